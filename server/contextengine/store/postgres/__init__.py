"""The PostgreSQL store: ``PostgresStore``, the event store in a PostgreSQL database, shared by
any number of sidecars (docs/design/concurrent-commits.md, docs/design/scaling-out.md).

Its modules are private to this package (``tests/test_layers.py``): the store (``_store``), its
write transactions (``_ops``, ``_write_locks``, ``_group``, ``_group_plan``) and positions
(``_positions``), the reads (``_reads``), the change feed and its connections (``_feed``,
``_listen``, ``_wake``, ``_hold``), the compaction lock (``_lock``), connection limits and errors
(``_timeouts``, ``_errors``), the token measures' table (``_measures``) and the migration runner
(``_migrations``; the ``.sql`` files stay in ``store/migrations/postgres``). What the SQLite store
shares with it (the rows' layout, the DSN helpers, the migration files' loader) is in ``store``.
"""

from __future__ import annotations

from contextengine.store._dsn import is_postgres_dsn, mask_dsn
from contextengine.store.postgres._store import PostgresStore
from contextengine.store.postgres._timeouts import Timeouts

__all__ = ["PostgresStore", "Timeouts", "is_postgres_dsn", "mask_dsn"]
