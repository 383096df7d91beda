"""Event stores: the append-only log behind one interface, ``EventStore``, made of small
protocols (``EventLog``, ``ConfigStore``, ``ContentMeasures``, ``Coordination``; ``_base``) that
callers depend on one at a time where they use one part.

Besides the stores, the SQLite write transaction (``WriteTx``, what ``SqliteStore.write`` runs
an operation with) and the connection helpers (``connect_sqlite``, ``run_sqlite``) are public
for the components that keep their own tables in the store's file (memory's FTS5 index). The
SQLite and PostgreSQL stores are subpackages (``store.sqlite``, ``store.postgres``) with private
modules of their own; the ``_`` modules here are shared by the backends and stay private to this
package (``tests/test_layers.py``).
"""

from __future__ import annotations

from contextengine.store._base import (
    AppendOutcome,
    Change,
    CommitListener,
    ConfigChanged,
    ConfigListener,
    ConfigStore,
    ContentMeasures,
    Coordination,
    EventFilter,
    EventLog,
    EventStore,
    LoggedEvent,
    SessionCreated,
    SessionDeleted,
    SessionKey,
    StateAt,
    StoredSession,
)
from contextengine.store._dsn import is_postgres_dsn, mask_dsn
from contextengine.store.memory import MemoryStore
from contextengine.store.sqlite import (
    SqliteStore,
    WriteTx,
    connect as connect_sqlite,
    run as run_sqlite,
)

__all__ = [
    "AppendOutcome",
    "Change",
    "CommitListener",
    "ConfigChanged",
    "ConfigListener",
    "ConfigStore",
    "ContentMeasures",
    "Coordination",
    "EventFilter",
    "EventLog",
    "EventStore",
    "LoggedEvent",
    "MemoryStore",
    "SessionCreated",
    "SessionDeleted",
    "SessionKey",
    "SqliteStore",
    "StateAt",
    "StoredSession",
    "WriteTx",
    "connect_sqlite",
    "is_postgres_dsn",
    "mask_dsn",
    "run_sqlite",
]
