"""Fixtures for the memory tests: every memory backend, and a MemoryService over every store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from contextengine.memory import MemoryIndex, PythonMemoryIndex, SqliteMemoryIndex
from contextengine.memory.service import MemoryService
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.store import EventStore, MemoryStore, SqliteStore

#: backend name -> (store kind, fts mode)
BACKENDS = {
    "python": ("memory", None),
    "sqlite-fts5": ("sqlite", "on"),
    "sqlite-no-fts": ("sqlite", "off"),
}


@dataclass
class Memory:
    """An open store, a memory index over it and the service over both."""

    backend: str
    store: EventStore
    index: MemoryIndex
    service: MemoryService
    configs: AppConfigs


async def open_memory(backend: str, db: Path) -> Memory:
    kind, fts = BACKENDS[backend]
    store: EventStore
    index: MemoryIndex
    if kind == "memory":
        store = MemoryStore()
        await store.open()
        index = PythonMemoryIndex()
    else:
        sqlite = SqliteStore(db)
        await sqlite.open()
        store = sqlite
        index = SqliteMemoryIndex(sqlite, fts="on" if fts == "on" else "off")
    configs = AppConfigs(store)
    service = MemoryService(index, SessionEventCache(store), configs)
    await service.open()
    return Memory(backend, store, index, service, configs)


async def close_memory(memory: Memory) -> None:
    await memory.service.close()
    await memory.store.close()


@pytest.fixture(params=list(BACKENDS))
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    opened = await open_memory(request.param, tmp_path / "memory.db")
    try:
        yield opened
    finally:
        await close_memory(opened)


@pytest.fixture
def index(memory: Memory) -> MemoryIndex:
    return memory.index
