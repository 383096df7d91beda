"""What tests, benchmarks and scripts start: a real sidecar in process (below), and a throw-away
PostgreSQL cluster (:mod:`contextengine.testing.postgres`).

async with start_local_server() as server:
    async with ContextEngineClient(server.target) as client:
        ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

from contextengine.compaction.compactor import SummarizerFactory
from contextengine.settings import MEMORY_DB, ServerSettings
from contextengine.transport import ContextEngineServer


@asynccontextmanager
async def start_local_server(
    db: str = MEMORY_DB,
    *,
    listen: str = "127.0.0.1:0",
    settings: ServerSettings | None = None,
    summarizers: SummarizerFactory | None = None,
) -> AsyncIterator[ContextEngineServer]:
    """A started server on a free loopback port (or ``listen``), stopped on exit.
    ``summarizers`` replaces the summarizers built from app configurations."""
    base = settings if settings is not None else ServerSettings()
    server = ContextEngineServer(replace(base, db=db, listen=listen), summarizers=summarizers)
    try:
        await server.start()
    except BaseException:
        await server.stop(grace=0.0)
        raise
    try:
        yield server
    finally:
        await server.stop(grace=1.0)
