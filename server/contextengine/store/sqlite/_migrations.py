"""The runner of the numbered SQLite schema migrations (``store/migrations/NNNN_name.sql``).

``schema_version`` has one row per applied migration; the schema's version is the highest. Each
migration runs in its own ``BEGIN IMMEDIATE`` transaction that re-reads the version first, so two
processes opening the same new file do not both apply it. Synchronous: run it on the connection's
thread.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from contextengine.store._migrations import Migration, shipped_migrations

_CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
)"""


def load_migrations() -> list[Migration]:
    """The SQLite migrations shipped in ``contextengine/store/migrations``, numbered 1, 2, 3, ..."""
    return shipped_migrations()


def schema_version(conn: sqlite3.Connection) -> int:
    """The highest applied migration, 0 for a new database."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> int:
    """Applies the migrations newer than the database's version; returns the resulting version.

    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    latest = migrations[-1].version if migrations else 0
    current = schema_version(conn)
    if current > latest:
        raise RuntimeError(
            f"the database schema is at version {current}, newer than this build knows ({latest})"
        )
    for migration in migrations:
        if migration.version > current:
            current = _apply(conn, migration)
    return current


def _apply(conn: sqlite3.Connection, migration: Migration) -> int:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_CREATE_VERSION_TABLE)
        current = schema_version(conn)
        if migration.version == current + 1:
            for statement in split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time()),
            )
            current = migration.version
        elif migration.version > current:
            raise RuntimeError(f"cannot apply {migration.name} to schema version {current}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return current


def split_statements(sql: str) -> list[str]:
    """The statements of a script, each complete (``sqlite3.complete_statement``), in order."""
    statements: list[str] = []
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    leftover = [
        line for line in pending.splitlines() if line.strip() and not line.strip().startswith("--")
    ]
    if leftover:
        raise RuntimeError(
            f"incomplete SQL statement at the end of a migration: {pending.strip()!r}"
        )
    return statements
