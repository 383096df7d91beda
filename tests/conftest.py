"""Shared fixtures: a real sidecar on 127.0.0.1:0 and a client talking to it over gRPC."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import settings

from contextengine.client import ContextEngineClient
from contextengine.server import ContextEngineServer
from contextengine.testing import start_local_server
from tests.pg_server import postgres_dsn, postgres_server

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures of every test module

# `make test` (and CI) run every property test on a fixed, code-derived set of examples so that a
# run is reproducible; HYPOTHESIS_PROFILE=explore draws new random examples (use it to hunt).
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ContextEngineServer]:
    """A started server backed by the in-memory store, a SQLite file or a PostgreSQL database
    (its own database of the test run's server, ``tests.pg_server``)."""
    if request.param == "postgres":
        db = request.getfixturevalue("postgres_dsn")
    else:
        db = ":memory:" if request.param == "memory" else str(tmp_path / "ce.db")
    async with start_local_server(db) as srv:
        yield srv


@pytest.fixture
async def client(server: ContextEngineServer) -> AsyncIterator[ContextEngineClient]:
    async with ContextEngineClient(server.target, attempts=1) as c:
        yield c
