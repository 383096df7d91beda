"""The PostgreSQL store's read queries, one coroutine each, on a connection of the pool.

A query of more than one statement runs in one ``REPEATABLE READ READ ONLY`` transaction, so it
sees one committed snapshot. Reads by position stop below the bound of ``_positions`` (every
position below it is final), computed in the same statement's snapshot: a reader never passes a
position whose transaction may still commit. ``last_position`` is that bound minus one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from contextengine.core.errors import session_not_found
from contextengine.core.state import merge_state
from contextengine.store._base import EventFilter, LoggedEvent, SessionKey, StateAt, StoredSession
from contextengine.store._rows import load_event, load_state
from contextengine.store.postgres._positions import BOUND
from contextengine.v1 import config_pb2, event_pb2

_SESSION_COLUMNS = (
    "s.id, s.user_id, s.session_id, s.state, s.create_time, s.update_time, s.last_sequence, u.state"
)
_SESSION_FROM = (
    "FROM sessions s LEFT JOIN user_states u ON u.app_name = s.app_name AND u.user_id = s.user_id"
)
_SESSION_KEY = "s.app_name = $1 AND s.user_id = $2 AND s.session_id = $3"


@asynccontextmanager
async def _snapshot(conn: asyncpg.Connection) -> AsyncIterator[None]:
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        yield


async def _whole_session_row(conn: asyncpg.Connection, key: SessionKey) -> asyncpg.Record:
    """The session's row with every column the StoredSession needs; SESSION_NOT_FOUND when none."""
    row = await conn.fetchrow(
        f"SELECT {_SESSION_COLUMNS} {_SESSION_FROM} WHERE {_SESSION_KEY}",
        key.app_name,
        key.user_id,
        key.session_id,
    )
    if row is None:
        raise session_not_found(key.app_name, key.user_id, key.session_id)
    return row


async def get_session(conn: asyncpg.Connection, key: SessionKey, flt: EventFilter) -> StoredSession:
    async with _snapshot(conn):
        row = await _whole_session_row(conn, key)
        app_state = await _app_state(conn, key.app_name)
        events = await _filtered_events(conn, row[0], flt)
    return _stored(key.app_name, row, app_state, events)


async def list_sessions(
    conn: asyncpg.Connection,
    app_name: str,
    user_id: str | None,
    limit: int,
    after: tuple[str, str] | None,
) -> list[StoredSession]:
    if limit <= 0:
        return []
    clauses = ["s.app_name = $1"]
    params: list[Any] = [app_name]
    if user_id is not None:
        params.append(user_id)
        clauses.append(f"s.user_id = ${len(params)}")
    if after is not None:
        params.extend(after)
        clauses.append(f"(s.user_id, s.session_id) > (${len(params) - 1}, ${len(params)})")
    params.append(limit)
    async with _snapshot(conn):
        rows = await conn.fetch(
            f"SELECT {_SESSION_COLUMNS} {_SESSION_FROM} WHERE {' AND '.join(clauses)}"
            f" ORDER BY s.user_id, s.session_id LIMIT ${len(params)}",
            *params,
        )
        app_state = await _app_state(conn, app_name) if rows else None
    return [_stored(app_name, row, app_state, []) for row in rows]


async def list_sessions_by_update(
    conn: asyncpg.Connection,
    app_name: str,
    user_id: str | None,
    limit: int,
    after: tuple[float, str, str] | None,
) -> list[StoredSession]:
    if limit <= 0:
        return []
    clauses = ["s.app_name = $1"]
    params: list[Any] = [app_name]
    if user_id is not None:
        params.append(user_id)
        clauses.append(f"s.user_id = ${len(params)}")
        if after is not None:
            params.extend((after[0], after[2]))
            clauses.append(f"(s.update_time, s.session_id) > (${len(params) - 1}, ${len(params)})")
        order = "s.update_time, s.session_id"
    else:
        if after is not None:
            params.extend(after)
            n = len(params)
            clauses.append(f"(s.update_time, s.user_id, s.session_id) > (${n - 2}, ${n - 1}, ${n})")
        order = "s.update_time, s.user_id, s.session_id"
    params.append(limit)
    async with _snapshot(conn):
        rows = await conn.fetch(
            f"SELECT {_SESSION_COLUMNS} {_SESSION_FROM} WHERE {' AND '.join(clauses)}"
            f" ORDER BY {order} LIMIT ${len(params)}",
            *params,
        )
        app_state = await _app_state(conn, app_name) if rows else None
    return [_stored(app_name, row, app_state, []) for row in rows]


async def get_user_state(conn: asyncpg.Connection, app_name: str, user_id: str) -> dict[str, Any]:
    found = await conn.fetchval(
        "SELECT state FROM user_states WHERE app_name = $1 AND user_id = $2", app_name, user_id
    )
    return load_state(found)


async def _session_row(conn: asyncpg.Connection, key: SessionKey) -> asyncpg.Record:
    row = await conn.fetchrow(
        "SELECT id, last_sequence FROM sessions"
        " WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
        key.app_name,
        key.user_id,
        key.session_id,
    )
    if row is None:
        raise session_not_found(key.app_name, key.user_id, key.session_id)
    return row


async def list_events(
    conn: asyncpg.Connection, key: SessionKey, after_sequence: int, limit: int
) -> tuple[list[event_pb2.Event], int]:
    async with _snapshot(conn):
        row = await _session_row(conn, key)
        if limit <= 0:
            return [], int(row[1])
        found = await conn.fetch(
            "SELECT data FROM events WHERE session = $1 AND sequence > $2"
            " ORDER BY sequence LIMIT $3",
            row[0],
            after_sequence,
            limit,
        )
    return [load_event(data) for (data,) in found], int(row[1])


async def list_logged_events(
    conn: asyncpg.Connection, key: SessionKey, after_sequence: int, limit: int
) -> tuple[list[LoggedEvent], int]:
    async with _snapshot(conn):
        row = await _session_row(conn, key)
        if limit <= 0:
            return [], int(row[1])
        found = await conn.fetch(
            "SELECT position, data FROM events WHERE session = $1 AND sequence > $2"
            " ORDER BY sequence LIMIT $3",
            row[0],
            after_sequence,
            limit,
        )
    return [LoggedEvent(key, load_event(data), position) for position, data in found], int(row[1])


async def list_events_after_position(
    conn: asyncpg.Connection,
    app_name: str,
    user_id: str | None,
    after_position: int,
    limit: int,
) -> list[LoggedEvent]:
    """One range of ``events_by_app`` / ``events_by_user`` from the cursor, up to the limit,
    below the bound (final positions only)."""
    if limit <= 0:
        return []
    if user_id is None:
        found = await conn.fetch(
            "SELECT e.position, e.user_id, s.session_id, e.data"
            " FROM events e JOIN sessions s ON s.id = e.session"
            f" WHERE e.app_name = $1 AND e.position > $2 AND e.position < {BOUND}"
            " ORDER BY e.position LIMIT $3",
            app_name,
            after_position,
            limit,
        )
    else:
        found = await conn.fetch(
            "SELECT e.position, e.user_id, s.session_id, e.data"
            " FROM events e JOIN sessions s ON s.id = e.session"
            " WHERE e.app_name = $1 AND e.user_id = $2 AND e.position > $3"
            f" AND e.position < {BOUND} ORDER BY e.position LIMIT $4",
            app_name,
            user_id,
            after_position,
            limit,
        )
    return [
        LoggedEvent(SessionKey(app_name, user, session), load_event(data), position)
        for position, user, session, data in found
    ]


async def last_position(conn: asyncpg.Connection) -> int:
    """The last position of the final log: every position at or below it is final, every
    change committed later takes a higher one."""
    return int(await conn.fetchval(f"SELECT {BOUND} - 1"))


#: the session's merged state, the last position that changed each of its rows, and the bound,
#: in one snapshot
_STATE = f"""
SELECT s.id, s.user_id, s.session_id, s.state, s.create_time, s.update_time, s.last_sequence,
    u.state, a.state,
    GREATEST(s.last_position, COALESCE(u.last_position, 0), COALESCE(a.last_position, 0)),
    {BOUND}
FROM sessions s
    LEFT JOIN user_states u ON u.app_name = s.app_name AND u.user_id = s.user_id
    LEFT JOIN app_states a ON a.app_name = s.app_name
WHERE s.app_name = $1 AND s.user_id = $2 AND s.session_id = $3
"""


async def state_if_exact(conn: asyncpg.Connection, key: SessionKey) -> StateAt | None:
    """The merged state at a position, if it can be named: when every change to the session's,
    its user's and its app's rows is below the bound, the state holds exactly the changes at or
    before the bound minus one. None when one of them changed above the bound (committed, but a
    transaction with a smaller id is still in flight): the caller asks again later, without
    holding the connection meanwhile."""
    row = await conn.fetchrow(_STATE, key.app_name, key.user_id, key.session_id)
    if row is None:
        raise session_not_found(key.app_name, key.user_id, key.session_id)
    *fields, app_state, changed, bound = row
    if changed >= bound:
        return None
    stored = _stored(key.app_name, tuple(fields), app_state, [])
    return StateAt(state=stored.state, position=int(bound) - 1)


async def get_app_config(conn: asyncpg.Connection, app_name: str) -> config_pb2.AppConfig | None:
    found = await conn.fetchval("SELECT config FROM app_configs WHERE app_name = $1", app_name)
    return None if found is None else config_pb2.AppConfig.FromString(found)


async def get_session_config(conn: asyncpg.Connection, key: SessionKey) -> config_pb2.SessionConfig:
    found = await conn.fetchrow(
        "SELECT config FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
        key.app_name,
        key.user_id,
        key.session_id,
    )
    if found is None:
        raise session_not_found(key.app_name, key.user_id, key.session_id)
    if found[0] is None:
        return config_pb2.SessionConfig()
    return config_pb2.SessionConfig.FromString(found[0])


async def page_token_key(conn: asyncpg.Connection) -> bytes:
    value = await conn.fetchval("SELECT value FROM secrets WHERE name = 'page_token'")
    if not isinstance(value, bytes) or len(value) < 16:
        raise RuntimeError("the database has no page token key (migration 0001 missing?)")
    return value


async def _app_state(conn: asyncpg.Connection, app_name: str) -> str | None:
    found = await conn.fetchval("SELECT state FROM app_states WHERE app_name = $1", app_name)
    return None if found is None else str(found)


async def _filtered_events(
    conn: asyncpg.Connection, session_pk: int, flt: EventFilter
) -> list[event_pb2.Event]:
    clauses = ["session = $1"]
    params: list[Any] = [session_pk]
    if flt.after_sequence is not None:
        params.append(flt.after_sequence)
        clauses.append(f"sequence > ${len(params)}")
    if flt.after_timestamp is not None:
        params.append(flt.after_timestamp)
        clauses.append(f"timestamp >= ${len(params)}")
    where = " AND ".join(clauses)
    if flt.num_recent_events is None:
        ordered = await conn.fetch(
            f"SELECT data FROM events WHERE {where} ORDER BY sequence", *params
        )
        return [load_event(data) for (data,) in ordered]
    if flt.num_recent_events <= 0:
        return []
    params.append(flt.num_recent_events)
    newest = await conn.fetch(
        f"SELECT data FROM events WHERE {where} ORDER BY sequence DESC LIMIT ${len(params)}",
        *params,
    )
    return [load_event(data) for (data,) in reversed(newest)]


def _stored(
    app_name: str,
    row: Sequence[Any],
    app_state: str | None,
    events: list[event_pb2.Event],
) -> StoredSession:
    _pk, user_id, session_id, state, create_time, update_time, last_sequence, user_state = row
    return StoredSession(
        key=SessionKey(app_name, user_id, session_id),
        state=merge_state(load_state(state), load_state(user_state), load_state(app_state)),
        create_time=create_time,
        last_update_time=update_time,
        last_sequence=int(last_sequence),
        events=events,
    )


# A loose index scan over the sessions' unique (app_name, user_id, session_id) index: one index
# seek per distinct name instead of reading every session row.
_APP_NAMES = (
    "WITH RECURSIVE names(name) AS ("
    " SELECT (SELECT MIN(app_name) FROM sessions WHERE app_name > $1)"
    " UNION ALL"
    " SELECT (SELECT MIN(app_name) FROM sessions WHERE app_name > names.name)"
    " FROM names WHERE names.name IS NOT NULL"
    ") SELECT name FROM names WHERE name IS NOT NULL LIMIT $2"
)
_USER_IDS = (
    "WITH RECURSIVE names(name) AS ("
    " SELECT (SELECT MIN(user_id) FROM sessions WHERE app_name = $1 AND user_id > $2)"
    " UNION ALL"
    " SELECT (SELECT MIN(user_id) FROM sessions WHERE app_name = $1 AND user_id > names.name)"
    " FROM names WHERE names.name IS NOT NULL"
    ") SELECT name FROM names WHERE name IS NOT NULL LIMIT $3"
)


async def list_app_names(conn: asyncpg.Connection, limit: int, after: str | None) -> list[str]:
    if limit <= 0:
        return []
    return [row[0] for row in await conn.fetch(_APP_NAMES, after or "", limit)]


async def list_user_ids(
    conn: asyncpg.Connection, app_name: str, limit: int, after: str | None
) -> list[str]:
    if limit <= 0:
        return []
    return [row[0] for row in await conn.fetch(_USER_IDS, app_name, after or "", limit)]
