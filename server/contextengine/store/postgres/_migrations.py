"""The runner of the numbered PostgreSQL schema migrations
(``store/migrations/postgres/NNNN_name.sql``).

Like the SQLite ones (``sqlite._migrations``): ``schema_version`` has one row per applied
migration and the schema's version is the highest. Several sidecars may start on one new database
at the same moment, so the runner holds a session-level ``pg_advisory_lock`` (one fixed key)
while it reads the version and applies what is missing, each migration in its own transaction:
the first sidecar migrates, the others wait for the lock, then find nothing to do.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import asyncpg

from contextengine.store._migrations import Migration, shipped_migrations

#: the advisory lock key of migrations (any fixed 64-bit number; "ctxeng" in ASCII)
MIGRATION_LOCK_KEY = 0x637478656E67

_CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at DOUBLE PRECISION NOT NULL
)"""


def load_migrations() -> list[Migration]:
    """The migrations shipped in ``contextengine/store/migrations/postgres``, numbered 1, 2, ..."""
    return shipped_migrations("postgres")


async def schema_version(conn: asyncpg.Connection) -> int:
    """The highest applied migration, 0 for a new database."""
    exists = await conn.fetchval("SELECT to_regclass('schema_version') IS NOT NULL")
    if not exists:
        return 0
    version = await conn.fetchval("SELECT MAX(version) FROM schema_version")
    return int(version) if version is not None else 0


async def migrate(conn: asyncpg.Connection, migrations: Sequence[Migration]) -> int:
    """Applies the migrations newer than the database's version under the advisory lock;
    returns the resulting version."""
    latest = migrations[-1].version if migrations else 0
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(_CREATE_VERSION_TABLE)
        current = await schema_version(conn)
        if current > latest:
            raise RuntimeError(
                f"the database schema is at version {current}, newer than this build knows "
                f"({latest})"
            )
        for migration in migrations:
            if migration.version <= current:
                continue
            async with conn.transaction():
                # A multi-statement script runs as one simple query (no parameters).
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)",
                    migration.version,
                    migration.name,
                    time.time(),
                )
            current = migration.version
        return current
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
