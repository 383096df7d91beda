"""The PostgreSQL store's write transactions, one coroutine each, on a connection of the pool.

An append or a session creation runs in four round trips whatever it changes: ``BEGIN`` with the
advisory locks of what it changes (``_pg_write_locks``: taken before the transaction has an id),
one statement reading what the plan needs (the session's counter and state, the requested event
ids already recorded, the user's and the app's state when the append writes them), one statement
writing everything (the events with positions from the transaction's id, ``_pg_positions``; the
session's counter, state and last position; the user's and the app's state), and ``COMMIT``.
Nothing shared by unrelated sessions is locked or written, so appends to different sessions
commit concurrently, from one sidecar and from many.

After the commit the transaction's changes go to its ``Committer``: those without a position (a
deletion, a session created without shared state) are told to the commit listeners at once;
positions are read back by the change feed once they are final (``_pg_feed``), and other sidecars
are woken after the commit (``_pg_wake``). Deletions and configuration changes also notify other
sidecars inside their transaction (payloads: ``migrations/postgres/0001_init.sql`` and ``0005``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import asyncpg

from contextengine.core.errors import invalid, session_already_exists, session_not_found
from contextengine.core.state import (
    APP_PREFIX,
    USER_PREFIX,
    JsonObject,
    apply_delta,
    merge_state,
    split_delta,
)
from contextengine.store._append import plan_append
from contextengine.store._base import (
    AppendOutcome,
    Change,
    SessionCreated,
    SessionDeleted,
    SessionKey,
    StoredSession,
)
from contextengine.store._pg_positions import BASE, MAX_PER_TRANSACTION
from contextengine.store._pg_write_locks import (
    APP_SPACE,
    USER_SPACE,
    event_locks,
    session_lock,
    state_locks,
    transaction,
)
from contextengine.store._sqlite_rows import dump_state, load_event, load_state
from contextengine.v1 import config_pb2, event_pb2

#: the NOTIFY channel of every store on a database
CHANNEL = "contextengine"

#: what an append reads once its locks are held: the session's row, the requested ids already
#: recorded (one row per found event; one row with NULL event columns if none), and the user's
#: ($5) and the app's ($6) state when the append writes them
_FIND = """
SELECT s.id, s.last_sequence, s.state,
    CASE WHEN $5 THEN (
        SELECT u.state FROM user_states u WHERE u.app_name = $1 AND u.user_id = $2
    ) END,
    CASE WHEN $6 THEN (SELECT a.state FROM app_states a WHERE a.app_name = $1) END,
    e.event_id, e.data
FROM sessions s LEFT JOIN events e ON e.session = s.id AND e.event_id = ANY($4::text[])
WHERE s.app_name = $1 AND s.user_id = $2 AND s.session_id = $3
"""


def _shared_state(app: str, user: str, time: str, user_state: str, app_state: str) -> str:
    """The CTEs replacing the user's and the app's state (when the parameter named by
    ``user_state`` / ``app_state`` is not NULL) at the transaction's first position ``b`` of the
    CTE ``base``; the other arguments name the parameters holding the ids and the time."""
    return f"""
users AS (
    INSERT INTO user_states (app_name, user_id, state, update_time, last_position)
    SELECT {app}, {user}, {user_state}::text, {time}, b FROM base
    WHERE {user_state}::text IS NOT NULL
    ON CONFLICT (app_name, user_id) DO UPDATE SET state = excluded.state,
        update_time = excluded.update_time, last_position = excluded.last_position
), apps AS (
    INSERT INTO app_states (app_name, state, update_time, last_position)
    SELECT {app}, {app_state}::text, {time}, b FROM base WHERE {app_state}::text IS NOT NULL
    ON CONFLICT (app_name) DO UPDATE SET state = excluded.state,
        update_time = excluded.update_time, last_position = excluded.last_position
)"""


#: an append's writes: the events at the transaction's positions, the session's counter, time,
#: state and last position, the user's and the app's state; returns the first position
_APPEND = f"""
WITH base AS (SELECT {BASE} AS b), inserted AS (
    INSERT INTO events
        (position, session, app_name, user_id, sequence, event_id, timestamp, is_compaction, data)
    SELECT base.b + u.n - 1, $1, $2, $3, u.s, u.i, u.t, u.c, u.d
    FROM base, unnest($4::bigint[], $5::text[], $6::float8[], $7::bool[], $8::bytea[])
        WITH ORDINALITY AS u(s, i, t, c, d, n)
), touched AS (
    UPDATE sessions SET last_sequence = $9, update_time = $10, state = COALESCE($11, state),
        last_position = (SELECT b FROM base) + cardinality($4::bigint[]) - 1
    WHERE id = $1
), {_shared_state("$2", "$3", "$10", "$12", "$13")}
SELECT b FROM base
"""

#: what a creation reads once its locks are held: whether the session exists, the user's and the
#: app's state
_CREATE_FIND = """
SELECT EXISTS (
        SELECT 1 FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3
    ),
    (SELECT state FROM user_states WHERE app_name = $1 AND user_id = $2),
    (SELECT state FROM app_states WHERE app_name = $1)
"""

#: a session created without a position (no app:/user: keys in its state)
_CREATE = """
INSERT INTO sessions (app_name, user_id, session_id, state, create_time, update_time,
    last_sequence, config)
VALUES ($1, $2, $3, $4, $5, $5, 0, $6)
"""

#: a session created with shared state: it takes the transaction's first position, its
#: app:/user: keys replace the user's and the app's state ($12, $13: the results, or NULL);
#: returns the position
_CREATE_SHARED = f"""
WITH base AS (SELECT {BASE} AS b), created AS (
    INSERT INTO sessions (app_name, user_id, session_id, state, create_time, update_time,
        last_sequence, config, created_shared, create_position, last_position)
    SELECT $1, $2, $3, $4, $5, $5, 0, $6, $7, b, b FROM base
), {_shared_state("$1", "$2", "$5", "$8", "$9")}
SELECT b FROM base
"""

#: a deletion, notifying other sidecars in its transaction when a session was deleted
_DELETE = """
WITH gone AS (
    DELETE FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3 RETURNING id
)
SELECT pg_notify($4, $5) FROM gone
"""


@dataclass(frozen=True)
class Committer:
    """What a write transaction tells its store after COMMIT: ``tell`` the changes without a
    position (the commit listeners hear them at once), ``took_positions`` when it recorded
    positions (the change feed reads them back once they are final)."""

    origin: str
    tell: Callable[[Sequence[Change]], None]
    took_positions: Callable[[], None]


def _payload(origin: str, kind: str, **fields: object) -> str:
    return json.dumps({"o": origin, "k": kind, **fields}, separators=(",", ":"))


async def _notify(conn: asyncpg.Connection, origin: str, kind: str, **fields: object) -> None:
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, _payload(origin, kind, **fields))


def _shared_results(
    found_user: str | None, found_app: str | None, user: JsonObject, app: JsonObject
) -> tuple[JsonObject, JsonObject, str | None, str | None]:
    """The user's and the app's state after ``user`` / ``app`` are applied, and the text to
    store for each (None: unchanged)."""
    user_state = load_state(found_user)
    app_state = load_state(found_app)
    user_text = app_text = None
    if user:
        user_state = apply_delta(user_state, user)
        user_text = dump_state(user_state)
    if app:
        app_state = apply_delta(app_state, app)
        app_text = dump_state(app_state)
    return user_state, app_state, user_text, app_text


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
    position = 0
    async with transaction(conn, [session_lock(key), *state_locks(key, shared)]):
        exists, found_user, found_app = await conn.fetchrow(
            _CREATE_FIND, key.app_name, key.user_id, key.session_id
        )
        if exists:
            raise session_already_exists(key.session_id)
        user, app, user_text, app_text = _shared_results(
            found_user, found_app, scoped.user, scoped.app
        )
        own = (key.app_name, key.user_id, key.session_id, dump_state(scoped.session), now)
        if shared:
            position = int(
                await conn.fetchval(
                    _CREATE_SHARED,
                    *own,
                    stored_config,
                    dump_state(shared),
                    user_text,
                    app_text,
                )
            )
        else:
            await conn.execute(_CREATE, *own, stored_config)
    if position:
        committer.took_positions()
    else:
        committer.tell([SessionCreated(key, {}, 0)])
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
    if len(events) > MAX_PER_TRANSACTION:
        raise invalid(
            "INVALID_ARGUMENT",
            "events",
            f"a PostgreSQL store records at most {MAX_PER_TRANSACTION:,} events per call, "
            f"not {len(events):,}: append them in several calls",
        )
    ids = list({event.id for event in events})
    locks = event_locks(key, events)
    spaces = {lock.space for lock in locks}
    async with transaction(conn, locks):
        rows = await conn.fetch(
            _FIND,
            key.app_name,
            key.user_id,
            key.session_id,
            ids,
            USER_SPACE in spaces,
            APP_SPACE in spaces,
        )
        if not rows:
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        row = rows[0]
        recorded = {r["event_id"]: load_event(r["data"]) for r in rows if r["event_id"] is not None}
        plan = plan_append(
            events, recorded.get, int(row["last_sequence"]), expected_last_sequence, now
        )
        new = plan.new_events
        if not new:
            return AppendOutcome(
                events=plan.recorded, duplicates=plan.duplicates, last_sequence=plan.last_sequence
            )
        changes = plan.changes
        _user, _app, user_text, app_text = _shared_results(
            row[3], row[4], changes.user, changes.app
        )
        session_state = None
        if changes.session:
            session_state = dump_state(apply_delta(load_state(row["state"]), changes.session))
        await conn.fetchval(
            _APPEND,
            row["id"],
            key.app_name,
            key.user_id,
            [event.sequence for event in new],
            [event.id for event in new],
            [event.timestamp for event in new],
            [event.actions.HasField("compaction") for event in new],
            [event.SerializeToString(deterministic=True) for event in new],
            plan.last_sequence,
            new[-1].timestamp,
            session_state,
            user_text,
            app_text,
        )
    committer.took_positions()
    return AppendOutcome(
        events=plan.recorded, duplicates=plan.duplicates, last_sequence=plan.last_sequence
    )


async def delete_session(
    conn: asyncpg.Connection, committer: Committer, *, key: SessionKey
) -> bool:
    # Events go with the session row (ON DELETE CASCADE).
    payload = _payload(committer.origin, "deleted", a=key.app_name, u=key.user_id, s=key.session_id)
    async with transaction(conn, [session_lock(key)]):
        gone = await conn.fetch(
            _DELETE, key.app_name, key.user_id, key.session_id, CHANNEL, payload
        )
    if not gone:
        return False
    committer.tell([SessionDeleted(key)])
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
