"""The SQLite store: ``SqliteStore``, the default event store, one SQLite file in WAL mode.

Its modules are private to this package (``tests/test_layers.py``): the store (``_store``), the
connections (``_conn``), the one-process lock (``_lock``), the batching writer (``_writer``), the
write operations (``_ops``), the reads (``_reads``), the token measures' table (``_measures``) and
the migration runner (``_migrations``; the ``.sql`` files stay in ``store/migrations``). The
write transaction (``WriteTx``) and the connection helpers (``connect``, ``run``) are public for
the components that keep their own tables in the store's file (memory's FTS5 index, through
``contextengine.store``).
"""

from __future__ import annotations

from contextengine.store.sqlite._conn import connect, run
from contextengine.store.sqlite._lock import DatabaseLockedError
from contextengine.store.sqlite._store import SqliteDiagnostics, SqliteStore, StorageListener
from contextengine.store.sqlite._writer import WriteTx

__all__ = [
    "DatabaseLockedError",
    "SqliteDiagnostics",
    "SqliteStore",
    "StorageListener",
    "WriteTx",
    "connect",
    "run",
]
