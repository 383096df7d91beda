"""Fixtures for the memory tests: every memory backend, and the engine's MemoryService over every
store (``open_engine``, the one wiring the sidecar uses)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from contextengine.engine import MEMORY_DB, Engine, EngineSettings, open_engine
from contextengine.memory import (
    MemoryIndex,
    PostgresMemoryIndex,
    PythonMemoryIndex,
    SqliteMemoryIndex,
)
from contextengine.memory.service import MemoryService
from contextengine.runtime.app_configs import AppConfigs
from contextengine.store import EventStore

#: backend name -> (store kind, fts mode)
BACKENDS = {
    "python": ("memory", None),
    "sqlite-fts5": ("sqlite", "on"),
    "sqlite-no-fts": ("sqlite", "off"),
    "postgres": ("postgres", None),
}


@dataclass
class Memory:
    """An open engine's store, its memory index and the service over both."""

    backend: str
    engine: Engine
    store: EventStore
    index: MemoryIndex
    service: MemoryService
    configs: AppConfigs


async def open_memory(backend: str, db: Path | str) -> Memory:
    """``db``: the SQLite file, or the PostgreSQL DSN of the "postgres" backend."""
    kind, fts = BACKENDS[backend]
    if kind == "memory":
        settings = EngineSettings(db=MEMORY_DB)
    elif kind == "postgres":
        settings = EngineSettings(db=str(db))
    else:
        settings = EngineSettings(db=str(db), memory_fts="on" if fts == "on" else "off")
    engine = await open_engine(settings)
    index = engine.memory.index
    expected: type[MemoryIndex] = {
        "memory": PythonMemoryIndex,
        "postgres": PostgresMemoryIndex,
    }.get(kind, SqliteMemoryIndex)
    assert isinstance(index, expected), index
    return Memory(backend, engine, engine.store, index, engine.memory, engine.app_configs)


async def close_memory(memory: Memory) -> None:
    await memory.engine.close()


@pytest.fixture(params=list(BACKENDS))
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    db: Path | str = tmp_path / "memory.db"
    if request.param == "postgres":
        db = request.getfixturevalue("postgres_dsn")
    opened = await open_memory(request.param, db)
    try:
        yield opened
    finally:
        await close_memory(opened)


@pytest.fixture
def index(memory: Memory) -> MemoryIndex:
    return memory.index
