"""Long-term memory across sessions: ingestion, keyword search (BM25), preload.

``MemoryService`` (``contextengine.memory.service``) is what the servicers use;
``open_memory_index`` picks the backend that fits the event store: FTS5 in the store's SQLite
file, PostgreSQL's full-text search in the store's database, or a pure-Python index beside the
in-memory store. See docs/design/memory.md.
"""

from __future__ import annotations

from contextengine.memory.index import Hit, MemoryIndex, Ranking
from contextengine.memory.pg_index import PostgresMemoryIndex
from contextengine.memory.python_index import PythonMemoryIndex
from contextengine.memory.sqlite_index import FtsMode, SqliteMemoryIndex
from contextengine.store import EventStore, SqliteStore
from contextengine.store.postgres import PostgresStore

__all__ = [
    "FtsMode",
    "Hit",
    "MemoryIndex",
    "PostgresMemoryIndex",
    "PythonMemoryIndex",
    "Ranking",
    "SqliteMemoryIndex",
    "open_memory_index",
]


def open_memory_index(store: EventStore, fts: FtsMode = "auto") -> MemoryIndex:
    """The memory backend for ``store`` (not opened yet): the store's own SQLite file or
    PostgreSQL database (``fts`` is SQLite's), else process memory (which does not survive a
    restart)."""
    if isinstance(store, SqliteStore):
        return SqliteMemoryIndex(store, fts=fts)
    if isinstance(store, PostgresStore):
        return PostgresMemoryIndex(store)
    return PythonMemoryIndex()
