"""Event stores: the append-only log behind one small interface."""

from __future__ import annotations

from contextengine.store._base import (
    AppendOutcome,
    Change,
    CommitListener,
    EventFilter,
    EventStore,
    LoggedEvent,
    SessionCreated,
    SessionDeleted,
    SessionKey,
    StateAt,
    StoredSession,
)
from contextengine.store.memory import MemoryStore
from contextengine.store.sqlite import SqliteStore

__all__ = [
    "AppendOutcome",
    "Change",
    "CommitListener",
    "EventFilter",
    "EventStore",
    "LoggedEvent",
    "MemoryStore",
    "SessionCreated",
    "SessionDeleted",
    "SessionKey",
    "SqliteStore",
    "StateAt",
    "StoredSession",
]
