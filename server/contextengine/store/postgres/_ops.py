"""The PostgreSQL store's write transactions, one coroutine each, on a connection of the pool.

A transaction of appends (the appends that waited together: ``_group``) or a session
creation runs in four round trips whatever it changes: ``BEGIN`` with the advisory locks of what
it changes (``_write_locks``: taken before the transaction has an id), one statement reading
what the plans need (each session's counter and state, the requested event ids already recorded,
the users' and the apps' state it writes), one statement writing everything (the events with
positions from the transaction's id, ``_positions``, in the callers' order; each session's
counter, state and last position; the users' and the apps' state), and ``COMMIT``. Nothing
shared by unrelated sessions is locked or written, so appends to different sessions commit
concurrently, from one sidecar and from many.

After the commit the transaction's changes go to its ``Committer``: those without a position (a
deletion, a session created without shared state) are told to the commit listeners at once;
positions are read back by the change feed once they are final (``_feed``), and other sidecars
are woken after the commit (``_wake``). Deletions and configuration changes also notify other
sidecars inside their transaction (payloads: ``migrations/postgres/0001_init.sql`` and ``0005``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
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
from contextengine.store._base import (
    Change,
    SessionCreated,
    SessionDeleted,
    SessionKey,
    StoredSession,
)
from contextengine.store._rows import dump_state, load_state
from contextengine.store.postgres._group_plan import AppendRequest, Result, plan_group, shared_keys
from contextengine.store.postgres._positions import BASE
from contextengine.store.postgres._write_locks import (
    app_lock,
    session_lock,
    state_locks,
    transaction,
    user_lock,
)
from contextengine.v1 import config_pb2

#: the NOTIFY channel of every store on a database
CHANNEL = "contextengine"


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


#: what a transaction of appends reads once its locks are held: each session's row ("s", the
#: index of its key in $1-$3) with the requested ids already recorded (one row per found event;
#: one row with NULL event columns if none), each user's ("u") and app's ("a") state it may write
_FIND_GROUP = """
SELECT 's', k.i::int, s.id, s.last_sequence, s.state, e.data
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(a, u, s, i)
    JOIN sessions s ON s.app_name = k.a AND s.user_id = k.u AND s.session_id = k.s
    LEFT JOIN events e ON e.session = s.id AND e.event_id = ANY($4::text[])
UNION ALL
SELECT 'u', k.i::int, NULL, NULL, t.state, NULL
FROM unnest($5::text[], $6::text[]) WITH ORDINALITY AS k(a, u, i)
    JOIN user_states t ON t.app_name = k.a AND t.user_id = k.u
UNION ALL
SELECT 'a', k.i::int, NULL, NULL, t.state, NULL
FROM unnest($7::text[]) WITH ORDINALITY AS k(a, i) JOIN app_states t ON t.app_name = k.a
"""

#: a transaction of appends' writes (``_group_plan.GroupPlan``'s columns): the events at the
#: transaction's positions in their order, each session's counter, time, state and last
#: position, the users' and the apps' state
_APPEND_GROUP = f"""
WITH base AS (SELECT {BASE} AS b), inserted AS (
    INSERT INTO events
        (position, session, app_name, user_id, sequence, event_id, timestamp, is_compaction, data)
    SELECT base.b + v.n - 1, v.pk, v.app, v.usr, v.seq, v.id, v.ts, v.c, v.d
    FROM base, unnest(
        $1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::float8[],
        $7::bool[], $8::bytea[]
    ) WITH ORDINALITY AS v(pk, app, usr, seq, id, ts, c, d, n)
), touched AS (
    UPDATE sessions SET last_sequence = t.seq, update_time = t.at,
        state = COALESCE(t.st, sessions.state), last_position = (SELECT b FROM base) + t.place
    FROM unnest($9::bigint[], $10::bigint[], $11::float8[], $12::text[], $13::int[])
        AS t(id, seq, at, st, place)
    WHERE sessions.id = t.id
), users AS (
    INSERT INTO user_states (app_name, user_id, state, update_time, last_position)
    SELECT t.app, t.usr, t.st, t.at, base.b
    FROM base, unnest($14::text[], $15::text[], $16::text[], $17::float8[]) AS t(app, usr, st, at)
    ON CONFLICT (app_name, user_id) DO UPDATE SET state = excluded.state,
        update_time = excluded.update_time, last_position = excluded.last_position
), apps AS (
    INSERT INTO app_states (app_name, state, update_time, last_position)
    SELECT t.app, t.st, t.at, base.b
    FROM base, unnest($18::text[], $19::text[], $20::float8[]) AS t(app, st, at)
    ON CONFLICT (app_name) DO UPDATE SET state = excluded.state,
        update_time = excluded.update_time, last_position = excluded.last_position
)
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


async def append_group(
    conn: asyncpg.Connection,
    committer: Committer,
    requests: Sequence[AppendRequest],
    committing: Callable[[], None] | None = None,
) -> list[Result]:
    """Appends ``requests`` in one transaction, in their order; each gets its outcome or the
    error of its own plan (the others are written all the same). A database error fails them
    all (the caller may then run them one by one: ``_group``). ``committing`` is called as
    the COMMIT is sent."""
    users, apps = shared_keys(requests)
    keys = list(dict.fromkeys(request.key for request in requests))
    locks = [
        *(session_lock(key) for key in keys),
        *(user_lock(app, user) for app, user in users),
        *(app_lock(app) for app in apps),
    ]
    ids = list({event.id for request in requests for event in request.events})
    async with transaction(conn, locks, committing):
        rows = await conn.fetch(
            _FIND_GROUP,
            [key.app_name for key in keys],
            [key.user_id for key in keys],
            [key.session_id for key in keys],
            ids,
            [app for app, _ in users],
            [user for _, user in users],
            apps,
        )
        sessions: dict[SessionKey, tuple[SessionKey, int, int, str]] = {}
        recorded: list[tuple[SessionKey, bytes]] = []
        found_users: dict[tuple[str, str], str | None] = dict.fromkeys(users)
        found_apps: dict[str, str | None] = dict.fromkeys(apps)
        for kind, index, pk, last_sequence, state, data in rows:
            if kind == "s":
                key = keys[index - 1]
                sessions[key] = (key, pk, int(last_sequence), state)
                if data is not None:
                    recorded.append((key, data))
            elif kind == "u":
                found_users[users[index - 1]] = state
            else:
                found_apps[apps[index - 1]] = state
        results, plan = plan_group(requests, sessions.values(), recorded, found_users, found_apps)
        if plan.events:
            await conn.fetchval(
                _APPEND_GROUP,
                *plan.event_columns(),
                *plan.session_columns(),
                *plan.shared_columns(),
            )
    if plan.events:
        committer.took_positions()
    return results


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
