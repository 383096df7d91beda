"""Fixtures for the store tests: every backend, opened on a fresh database and closed after."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from contextengine.store import EventStore, MemoryStore, SqliteStore
from contextengine.store.postgres import PostgresStore


class FakeClock:
    """A settable clock for the stores (the time that replaces zero timestamps)."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_store(kind: str, tmp_path: Path, clock: FakeClock, dsn: str = "") -> EventStore:
    """``dsn``: the database of a "postgres" store (``tests.pg_server.postgres_dsn``)."""
    if kind == "memory":
        return MemoryStore(clock=clock)
    if kind == "postgres":
        return PostgresStore(dsn, clock=clock)
    return SqliteStore(tmp_path / "store.db", clock=clock)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[EventStore]:
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else ""
    opened = make_store(request.param, tmp_path, clock, dsn)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()
