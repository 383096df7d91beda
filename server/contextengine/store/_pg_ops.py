"""The PostgreSQL store's write transactions, one coroutine each, on a connection of the pool.

Lock order (the same in every transaction, so two never wait on each other): the session row
(``FOR UPDATE``, or the row a delete/insert touches), the app state row, the user state row, then,
last, the one-row position counter (``positions``) inside the store's commit section. The commit
section is an ``asyncio.Lock`` of the store, held from taking positions until the commit listeners
were told: local transactions are told in commit order, and since the counter's row lock is held
until the commit is visible, positions are in commit order across every sidecar of the database
(see ``migrations/postgres/0001_init.sql``). Only the counter is locked inside the section, so
waiting for it cannot deadlock with a PostgreSQL row lock.

Every transaction that changes something other sidecars cache calls ``pg_notify`` inside the
transaction with the payload documented in ``0001_init.sql``.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg

from contextengine.core.errors import session_already_exists, session_not_found
from contextengine.core.state import (
    APP_PREFIX,
    USER_PREFIX,
    JsonObject,
    apply_delta,
    merge_state,
    split_delta,
)
from contextengine.store._append import copy_event, plan_append
from contextengine.store._base import (
    AppendOutcome,
    Change,
    LoggedEvent,
    SessionCreated,
    SessionDeleted,
    SessionKey,
    StoredSession,
)
from contextengine.store._sqlite_rows import dump_state, load_event, load_state
from contextengine.v1 import config_pb2, event_pb2

#: the NOTIFY channel of every store on a database
CHANNEL = "contextengine"

#: an append's first statement: the session's row locked (its counter), with the recorded events
#: among the requested ids (one row per found event; one row with NULL event columns if none)
_LOCK_AND_FIND = """
WITH s AS (
    SELECT id, last_sequence, state FROM sessions
    WHERE app_name = $1 AND user_id = $2 AND session_id = $3 FOR UPDATE
)
SELECT s.id, s.last_sequence, s.state, e.event_id, e.data
FROM s LEFT JOIN events e ON e.session = s.id AND e.event_id = ANY($4::text[])
"""

#: an append's writes once the session row is locked and the plan made: takes ``$10`` positions
#: (the counter's row lock, held until the commit), inserts the events with them, updates the
#: session's counter, time and state, and notifies other sidecars (payload: ``0001_init.sql``)
_APPEND = """
WITH taken AS (
    UPDATE positions SET last_position = last_position + $10 RETURNING last_position
), inserted AS (
    INSERT INTO events
        (position, session, app_name, user_id, sequence, event_id, timestamp, is_compaction, data)
    SELECT taken.last_position - $10 + u.n, $1, $2, $3, u.s, u.i, u.t, u.c, u.d
    FROM taken, unnest($5::bigint[], $6::text[], $7::float8[], $8::bool[], $9::bytea[])
        WITH ORDINALITY AS u(s, i, t, c, d, n)
), touched AS (
    UPDATE sessions SET last_sequence = $11, update_time = $12, state = COALESCE($13, state)
    WHERE id = $1
)
SELECT last_position, pg_notify($15, json_build_object(
    'o', $14::text, 'k', 'events', 'a', $2::text, 'u', $3::text, 's', $4::text,
    'p', last_position - $10 + 1, 'q', last_position)::text)
FROM taken
"""


@dataclass(frozen=True)
class Committer:
    """What a write transaction needs of its store: its origin id (in NOTIFY payloads), its
    commit section and its way to the commit listeners (``_pg_notify.ChangeFeed.committed``,
    which orders them with other sidecars' changes; awaited in the commit section)."""

    origin: str
    section: asyncio.Lock
    on_commit: Callable[[Sequence[Change]], Awaitable[None]]


class _Tx:
    """An open write transaction: the changes it records and its way into the commit section."""

    def __init__(self, section: asyncio.Lock) -> None:
        self.changes: list[Change] = []
        self._section = section
        self.in_section = False

    async def enter_section(self) -> None:
        """Waits for the commit section (after every row lock but the counter's)."""
        if not self.in_section:
            await self._section.acquire()
            self.in_section = True


@asynccontextmanager
async def _committing(conn: asyncpg.Connection, committer: Committer) -> AsyncIterator[_Tx]:
    """A transaction whose changes reach the commit listeners after the commit and before the
    commit section is released: in commit order."""
    tx = _Tx(committer.section)
    try:
        async with conn.transaction():
            yield tx
        if tx.changes:
            await committer.on_commit(tx.changes)
    finally:
        if tx.in_section:
            committer.section.release()


async def _notify(conn: asyncpg.Connection, origin: str, kind: str, **fields: object) -> None:
    payload = json.dumps({"o": origin, "k": kind, **fields}, separators=(",", ":"))
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)


async def _take_positions(conn: asyncpg.Connection, count: int) -> int:
    """Takes ``count`` consecutive positions (inside the commit section); returns the last."""
    last = await conn.fetchval(
        "UPDATE positions SET last_position = last_position + $1 RETURNING last_position", count
    )
    return int(last)


async def create_session(
    conn: asyncpg.Connection,
    committer: Committer,
    *,
    key: SessionKey,
    state: JsonObject,
    now: float,
    config: config_pb2.SessionConfig | None,
) -> StoredSession:
    """``config`` is the store's own copy (its ``update_time`` is set to ``now``)."""
    scoped = split_delta(state)
    shared = {APP_PREFIX + k: copy.deepcopy(v) for k, v in scoped.app.items()}
    shared.update((USER_PREFIX + k, copy.deepcopy(v)) for k, v in scoped.user.items())
    stored_config: bytes | None = None
    if config is not None:
        config.update_time = now
        stored_config = config.SerializeToString(deterministic=True)
    async with _committing(conn, committer) as tx:
        pk = await conn.fetchval(
            "INSERT INTO sessions (app_name, user_id, session_id, state, create_time,"
            " update_time, last_sequence, config, created_shared)"
            " VALUES ($1, $2, $3, $4, $5, $5, 0, $6, $7)"
            " ON CONFLICT (app_name, user_id, session_id) DO NOTHING RETURNING id",
            key.app_name,
            key.user_id,
            key.session_id,
            dump_state(scoped.session),
            now,
            stored_config,
            dump_state(shared) if shared else None,
        )
        if pk is None:
            raise session_already_exists(key.session_id)
        app = await _update_app_state(conn, key.app_name, scoped.app, now)
        user = await _update_user_state(conn, key, scoped.user, now)
        await tx.enter_section()
        position = 0
        if shared:
            position = await _take_positions(conn, 1)
            await conn.execute(
                "UPDATE sessions SET create_position = $1 WHERE id = $2", position, pk
            )
        await _notify(
            conn,
            committer.origin,
            "created",
            a=key.app_name,
            u=key.user_id,
            s=key.session_id,
            p=position,
            q=position,
        )
        tx.changes.append(SessionCreated(key, shared, position))
    return StoredSession(
        key=key,
        state=merge_state(scoped.session, user, app),
        create_time=now,
        last_update_time=now,
        last_sequence=0,
    )


async def append_events(
    conn: asyncpg.Connection,
    committer: Committer,
    *,
    key: SessionKey,
    events: Sequence[event_pb2.Event],
    expected_last_sequence: int | None,
    now: float,
) -> AppendOutcome:
    """``events`` are the store's own copies (the plan sets their sequence and timestamp)."""
    ids = list({event.id for event in events})
    async with _committing(conn, committer) as tx:
        # The session row locked and the requested ids looked up in one round trip. The lookup
        # reads the statement's snapshot, taken before the lock was granted: an id committed by
        # the transaction it waited for is missed, its insert then violates the unique key, and
        # the store runs the transaction again (``_pg_errors.retryable``), finding it.
        rows = await conn.fetch(_LOCK_AND_FIND, key.app_name, key.user_id, key.session_id, ids)
        if not rows:
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        row = rows[0]
        pk: int = row["id"]
        recorded = {r["event_id"]: load_event(r["data"]) for r in rows if r["event_id"] is not None}
        plan = plan_append(
            events, recorded.get, int(row["last_sequence"]), expected_last_sequence, now
        )
        if not plan.new_events:
            return AppendOutcome(
                events=plan.recorded, duplicates=plan.duplicates, last_sequence=plan.last_sequence
            )
        update_time = plan.new_events[-1].timestamp
        if plan.changes.app:
            await _update_app_state(conn, key.app_name, plan.changes.app, update_time)
        if plan.changes.user:
            await _update_user_state(conn, key, plan.changes.user, update_time)
        session_state = None
        if plan.changes.session:
            session_state = dump_state(apply_delta(load_state(row["state"]), plan.changes.session))
        new = plan.new_events
        count = len(new)
        await tx.enter_section()
        # One statement (one round trip, inside the section): positions, events, the session's
        # counter and the notification.
        last_position = int(
            await conn.fetchval(
                _APPEND,
                pk,
                key.app_name,
                key.user_id,
                key.session_id,
                [event.sequence for event in new],
                [event.id for event in new],
                [event.timestamp for event in new],
                [event.actions.HasField("compaction") for event in new],
                [event.SerializeToString(deterministic=True) for event in new],
                count,
                plan.last_sequence,
                update_time,
                session_state,
                committer.origin,
                CHANNEL,
            )
        )
        first_position = last_position - count + 1
        tx.changes.extend(
            LoggedEvent(key, copy_event(event), first_position + i) for i, event in enumerate(new)
        )
    return AppendOutcome(
        events=plan.recorded, duplicates=plan.duplicates, last_sequence=plan.last_sequence
    )


async def delete_session(
    conn: asyncpg.Connection, committer: Committer, *, key: SessionKey
) -> bool:
    # Events go with the session row (ON DELETE CASCADE); the row lock is taken before the
    # commit section, like every other lock.
    async with _committing(conn, committer) as tx:
        status = await conn.execute(
            "DELETE FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
            key.app_name,
            key.user_id,
            key.session_id,
        )
        if status == "DELETE 0":
            return False
        await tx.enter_section()
        await _notify(
            conn, committer.origin, "deleted", a=key.app_name, u=key.user_id, s=key.session_id
        )
        tx.changes.append(SessionDeleted(key))
    return True


async def put_app_config(
    conn: asyncpg.Connection, origin: str, *, config: config_pb2.AppConfig, now: float
) -> config_pb2.AppConfig:
    """``config`` is the store's own copy; its ``update_time`` is set to ``now``."""
    config.update_time = now
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO app_configs (app_name, config, update_time) VALUES ($1, $2, $3)"
            " ON CONFLICT (app_name) DO UPDATE"
            " SET config = excluded.config, update_time = excluded.update_time",
            config.app_name,
            config.SerializeToString(deterministic=True),
            now,
        )
        await _notify(conn, origin, "app_config", a=config.app_name)
    return config


async def put_session_config(
    conn: asyncpg.Connection,
    origin: str,
    *,
    key: SessionKey,
    config: config_pb2.SessionConfig,
    now: float,
) -> config_pb2.SessionConfig:
    """``config`` is the store's own copy; its ``update_time`` is set to ``now``."""
    config.update_time = now
    async with conn.transaction():
        status = await conn.execute(
            "UPDATE sessions SET config = $1 WHERE app_name = $2 AND user_id = $3"
            " AND session_id = $4",
            config.SerializeToString(deterministic=True),
            key.app_name,
            key.user_id,
            key.session_id,
        )
        if status == "UPDATE 0":
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        await _notify(
            conn, origin, "session_config", a=key.app_name, u=key.user_id, s=key.session_id
        )
    return config


async def _update_app_state(
    conn: asyncpg.Connection, app_name: str, delta: JsonObject, now: float
) -> JsonObject:
    """Applies ``delta`` to the app's state (no write, no lock when empty); returns the result."""
    if not delta:
        found = await conn.fetchval("SELECT state FROM app_states WHERE app_name = $1", app_name)
        return load_state(found)
    await conn.execute(
        "INSERT INTO app_states (app_name, state, update_time) VALUES ($1, '{}', $2)"
        " ON CONFLICT (app_name) DO NOTHING",
        app_name,
        now,
    )
    found = await conn.fetchval(
        "SELECT state FROM app_states WHERE app_name = $1 FOR UPDATE", app_name
    )
    state = apply_delta(load_state(found), delta)
    await conn.execute(
        "UPDATE app_states SET state = $1, update_time = $2 WHERE app_name = $3",
        dump_state(state),
        now,
        app_name,
    )
    return state


async def _update_user_state(
    conn: asyncpg.Connection, key: SessionKey, delta: JsonObject, now: float
) -> JsonObject:
    """Applies ``delta`` to the user's state (no write, no lock when empty); returns the result."""
    if not delta:
        found = await conn.fetchval(
            "SELECT state FROM user_states WHERE app_name = $1 AND user_id = $2",
            key.app_name,
            key.user_id,
        )
        return load_state(found)
    await conn.execute(
        "INSERT INTO user_states (app_name, user_id, state, update_time)"
        " VALUES ($1, $2, '{}', $3) ON CONFLICT (app_name, user_id) DO NOTHING",
        key.app_name,
        key.user_id,
        now,
    )
    found = await conn.fetchval(
        "SELECT state FROM user_states WHERE app_name = $1 AND user_id = $2 FOR UPDATE",
        key.app_name,
        key.user_id,
    )
    state = apply_delta(load_state(found), delta)
    await conn.execute(
        "UPDATE user_states SET state = $1, update_time = $2 WHERE app_name = $3 AND user_id = $4",
        dump_state(state),
        now,
        key.app_name,
        key.user_id,
    )
    return state
