"""The migrations that add the token measures' table (kept for BuildContext's cold start) to an
existing database; what the stores do with it is the contract's (``contract/test_measures.py``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from contextengine.store import SessionKey, SqliteStore
from contextengine.store.postgres import PostgresStore, _migrations as pg_migrations
from contextengine.store.sqlite._migrations import load_migrations, migrate
from contextengine.v1 import event_pb2
from tests.pg_server import PostgresServer

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "u", "s")
COUNTER = "tiktoken/cl100k_base"

A = b"a" * 16


def _event(event_id: str, text: str) -> event_pb2.Event:
    event = event_pb2.Event(id=event_id, author="user", invocation_id="i", timestamp=1.0)
    event.content.role = "user"
    event.content.parts.add().text = text
    return event


async def test_a_sqlite_database_of_the_previous_version_gets_the_table(tmp_path: Path) -> None:
    """A file written before migration 0006 (a session and its event in it) is migrated when
    opened: the session and event are kept, and measures can be recorded for them."""
    path = tmp_path / "old.db"
    previous = [m for m in load_migrations() if m.version < 6]
    event = _event("e1", "hello")
    event.sequence = 1
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert migrate(conn, previous) == 5
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert "content_measures" not in tables
        conn.execute(
            "INSERT INTO sessions (app_name, user_id, session_id, state, create_time,"
            " update_time, last_sequence) VALUES ('app', 'u', 's', '{}', 1.0, 1.0, 1)"
        )
        conn.execute(
            "INSERT INTO events (session, sequence, event_id, invocation_id, author, timestamp,"
            " is_compaction, data) VALUES (1, 1, 'e1', 'i', 'user', 1.0, 0, ?)",
            (event.SerializeToString(deterministic=True),),
        )
    finally:
        conn.close()
    store = SqliteStore(path)
    await store.open()
    try:
        assert (await store.diagnostics()).schema_version == len(load_migrations())
        events, last = await store.list_events(KEY, 0, 10)
        assert [e.id for e in events] == ["e1"]
        assert last == 1
        assert await store.get_content_measures(KEY, COUNTER) == {}
        await store.put_content_measures(KEY, COUNTER, {A: (1, 5)})
        assert await store.get_content_measures(KEY, COUNTER) == {A: (1, 5)}
    finally:
        await store.close()


async def test_a_postgres_database_of_the_previous_version_gets_the_table(
    postgres_server: PostgresServer,
) -> None:
    """A database at schema 3 (before postgres/0004), with a session in it, is migrated when a
    store opens it; the session keeps working and measures can be recorded for it."""
    dsn = postgres_server.dsn(postgres_server.create_empty_database())
    previous = [m for m in pg_migrations.load_migrations() if m.version < 4]
    conn = await asyncpg.connect(dsn)
    try:
        assert await pg_migrations.migrate(conn, previous) == 3
        assert await conn.fetchval("SELECT to_regclass('content_measures') IS NULL")
        await conn.execute(
            "INSERT INTO sessions (app_name, user_id, session_id, state, create_time,"
            " update_time) VALUES ('app', 'u', 's', '{}', 1.0, 1.0)"
        )
    finally:
        await conn.close()
    store = PostgresStore(dsn)
    await store.open()
    try:
        await store.append_events(KEY, [_event("e1", "hello")], None)
        await store.put_content_measures(KEY, COUNTER, {A: (1, 5)})
        assert await store.get_content_measures(KEY, COUNTER) == {A: (1, 5)}
    finally:
        await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        version = await conn.fetchval("SELECT MAX(version) FROM schema_version")
        assert version == len(pg_migrations.load_migrations())
    finally:
        await conn.close()
