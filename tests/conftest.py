"""Shared fixtures: a real sidecar on 127.0.0.1:0 and a client talking to it over gRPC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from contextengine.server import ContextEngineServer
from contextengine.testing import start_local_server


@pytest.fixture(params=["memory", "sqlite"])
async def server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ContextEngineServer]:
    """A started server backed by the in-memory store or by a SQLite file."""
    db = ":memory:" if request.param == "memory" else str(tmp_path / "ce.db")
    async with start_local_server(db) as srv:
        yield srv


@pytest.fixture
async def client(server: ContextEngineServer) -> AsyncIterator[ContextEngineClient]:
    async with ContextEngineClient(server.target, attempts=1) as c:
        yield c
