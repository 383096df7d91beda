"""A PostgreSQL database written with counter positions (schema 4) moves to positions from
transaction ids (postgres/0005): what was recorded keeps its positions and stays first, cursors
handed out before mean the same place, and a sidecar of the earlier version cannot take another
counter position."""

from __future__ import annotations

import asyncpg
import pytest

from contextengine.store import SessionKey
from contextengine.store.postgres import PostgresStore, _migrations as pg_migrations
from contextengine.v1 import event_pb2
from tests.pg_server import PostgresServer

pytestmark = pytest.mark.unit

APP = "app"
KEY = SessionKey(APP, "u", "old")


def _event(event_id: str, sequence: int = 0) -> event_pb2.Event:
    return event_pb2.Event(
        id=event_id, author="user", invocation_id="i", timestamp=1.0, sequence=sequence
    )


async def _schema_4_with_events(dsn: str, count: int) -> None:
    """What a sidecar of the previous version leaves: a session with ``count`` events at
    counter positions 1..count (one transaction each, as it wrote them)."""
    previous = [m for m in pg_migrations.load_migrations() if m.version < 5]
    conn = await asyncpg.connect(dsn)
    try:
        assert await pg_migrations.migrate(conn, previous) == 4
        pk = await conn.fetchval(
            "INSERT INTO sessions (app_name, user_id, session_id, state, create_time,"
            " update_time, last_sequence) VALUES ($1, $2, $3, '{}', 1.0, 1.0, $4) RETURNING id",
            KEY.app_name,
            KEY.user_id,
            KEY.session_id,
            count,
        )
        for n in range(1, count + 1):
            async with conn.transaction():
                position = await conn.fetchval(
                    "UPDATE positions SET last_position = last_position + 1 RETURNING last_position"
                )
                await conn.execute(
                    "INSERT INTO events (position, session, app_name, user_id, sequence,"
                    " event_id, timestamp, is_compaction, data)"
                    " VALUES ($1, $2, $3, $4, $5, $6, 1.0, false, $7)",
                    position,
                    pk,
                    KEY.app_name,
                    KEY.user_id,
                    n,
                    f"old-{n}",
                    _event(f"old-{n}", n).SerializeToString(deterministic=True),
                )
    finally:
        await conn.close()


async def test_counter_positions_stay_first_and_old_cursors_keep_their_place(
    postgres_server: PostgresServer,
) -> None:
    dsn = postgres_server.dsn(postgres_server.create_empty_database())
    await _schema_4_with_events(dsn, 5)
    store = PostgresStore(dsn)
    await store.open()
    try:
        appended = await store.append_events(KEY, [_event("new-6"), _event("new-7")], None)
        assert [e.sequence for e in appended.events] == [6, 7]
        other = SessionKey(APP, "u2", "new")
        await store.create_session(other, {}, 1.0)
        await store.append_events(other, [_event("elsewhere")], None)

        everything = await store.list_events_after_position(APP, None, 0, 100)
        assert [e.event.id for e in everything] == [
            *(f"old-{n}" for n in range(1, 6)),
            "new-6",
            "new-7",
            "elsewhere",
        ]
        assert [e.position for e in everything[:5]] == [1, 2, 3, 4, 5]
        assert [e.position for e in everything] == sorted(e.position for e in everything)
        # A cursor given out before the migration (after old position 3): the same place.
        after_3 = await store.list_events_after_position(APP, None, 3, 100)
        assert [e.event.id for e in after_3] == ["old-4", "old-5", "new-6", "new-7", "elsewhere"]
        # The session's log is one sequence, positions in its order across the change.
        logged, last = await store.list_logged_events(KEY, 0, 100)
        assert [e.event.sequence for e in logged] == list(range(1, 8))
        assert [e.position for e in logged] == sorted(e.position for e in logged)
        assert last == 7
        assert await store.last_position() >= everything[-1].position
    finally:
        await store.close()

    # A sidecar of the earlier version would take a counter position: refused, with the cause.
    conn = await asyncpg.connect(dsn)
    try:
        with pytest.raises(asyncpg.FeatureNotSupportedError, match="sidecar is older"):
            await conn.execute("UPDATE positions SET last_position = last_position + 1")
    finally:
        await conn.close()
