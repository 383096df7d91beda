"""Event stores: the append-only log behind one small interface."""

from __future__ import annotations

from contextengine.store._base import (
    AppendOutcome,
    EventFilter,
    EventStore,
    SessionKey,
    StoredSession,
)
from contextengine.store.memory import MemoryStore
from contextengine.store.sqlite import SqliteStore

__all__ = [
    "AppendOutcome",
    "EventFilter",
    "EventStore",
    "MemoryStore",
    "SessionKey",
    "SqliteStore",
    "StoredSession",
]
