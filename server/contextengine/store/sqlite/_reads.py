"""The read queries, as synchronous functions run on the read connection's thread.

Each function that runs more than one statement does so in one read transaction, so it sees a
single committed snapshot (WAL lets it run while the writer writes).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from contextengine.core.errors import session_not_found
from contextengine.core.state import merge_state
from contextengine.store._base import EventFilter, LoggedEvent, SessionKey, StateAt, StoredSession
from contextengine.store._rows import load_event, load_state
from contextengine.v1 import config_pb2, event_pb2

#: a session row with its user's state; the app state is read once per call
_SESSION_COLUMNS = (
    "s.id, s.user_id, s.session_id, s.state, s.create_time, s.update_time, s.last_sequence, u.state"
)
_SESSION_FROM = (
    "FROM sessions s LEFT JOIN user_states u ON u.app_name = s.app_name AND u.user_id = s.user_id"
)


@contextmanager
def _snapshot(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN")
    try:
        yield
    finally:
        if db.in_transaction:  # an I/O error may have ended it already
            db.execute("COMMIT")


def get_session(db: sqlite3.Connection, *, key: SessionKey, flt: EventFilter) -> StoredSession:
    with _snapshot(db):
        row = db.execute(
            f"SELECT {_SESSION_COLUMNS} {_SESSION_FROM}"
            " WHERE s.app_name = ? AND s.user_id = ? AND s.session_id = ?",
            (key.app_name, key.user_id, key.session_id),
        ).fetchone()
        if row is None:
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        app_state = _app_state(db, key.app_name)
        events = _filtered_events(db, row[0], flt)
    return _stored(key.app_name, row, app_state, events)


def list_sessions(
    db: sqlite3.Connection,
    *,
    app_name: str,
    user_id: str | None,
    limit: int,
    after: tuple[str, str] | None,
) -> list[StoredSession]:
    if limit <= 0:
        return []
    clauses = ["s.app_name = ?"]
    params: list[Any] = [app_name]
    if user_id is not None:
        clauses.append("s.user_id = ?")
        params.append(user_id)
    if after is not None:
        clauses.append("(s.user_id, s.session_id) > (?, ?)")
        params.extend(after)
    params.append(limit)
    with _snapshot(db):
        rows = db.execute(
            f"SELECT {_SESSION_COLUMNS} {_SESSION_FROM} WHERE {' AND '.join(clauses)}"
            " ORDER BY s.user_id, s.session_id LIMIT ?",
            params,
        ).fetchall()
        app_state = _app_state(db, app_name) if rows else None
    # Parsed per session, so the returned states share no objects.
    return [_stored(app_name, row, app_state, []) for row in rows]


def list_sessions_by_update(
    db: sqlite3.Connection,
    *,
    app_name: str,
    user_id: str | None,
    limit: int,
    after: tuple[float, str, str] | None,
) -> list[StoredSession]:
    if limit <= 0:
        return []
    clauses = ["s.app_name = ?"]
    params: list[Any] = [app_name]
    if user_id is not None:
        # A range of sessions_by_user_update.
        clauses.append("s.user_id = ?")
        params.append(user_id)
        if after is not None:
            clauses.append("(s.update_time, s.session_id) > (?, ?)")
            params.extend((after[0], after[2]))
        order = "s.update_time, s.session_id"
    else:
        # A range of sessions_by_update.
        if after is not None:
            clauses.append("(s.update_time, s.user_id, s.session_id) > (?, ?, ?)")
            params.extend(after)
        order = "s.update_time, s.user_id, s.session_id"
    params.append(limit)
    with _snapshot(db):
        rows = db.execute(
            f"SELECT {_SESSION_COLUMNS} {_SESSION_FROM} WHERE {' AND '.join(clauses)}"
            f" ORDER BY {order} LIMIT ?",
            params,
        ).fetchall()
        app_state = _app_state(db, app_name) if rows else None
    return [_stored(app_name, row, app_state, []) for row in rows]


def get_user_state(db: sqlite3.Connection, *, app_name: str, user_id: str) -> dict[str, Any]:
    found = db.execute(
        "SELECT state FROM user_states WHERE app_name = ? AND user_id = ?", (app_name, user_id)
    ).fetchone()
    return {} if found is None else load_state(found[0])


def list_events(
    db: sqlite3.Connection, *, key: SessionKey, after_sequence: int, limit: int
) -> tuple[list[event_pb2.Event], int]:
    with _snapshot(db):
        row = db.execute(
            "SELECT id, last_sequence FROM sessions"
            " WHERE app_name = ? AND user_id = ? AND session_id = ?",
            (key.app_name, key.user_id, key.session_id),
        ).fetchone()
        if row is None:
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        if limit <= 0:
            return [], int(row[1])
        found = db.execute(
            "SELECT data FROM events WHERE session = ? AND sequence > ? ORDER BY sequence LIMIT ?",
            (row[0], after_sequence, limit),
        ).fetchall()
    return [load_event(data) for (data,) in found], int(row[1])


def list_logged_events(
    db: sqlite3.Connection, *, key: SessionKey, after_sequence: int, limit: int
) -> tuple[list[LoggedEvent], int]:
    with _snapshot(db):
        row = db.execute(
            "SELECT id, last_sequence FROM sessions"
            " WHERE app_name = ? AND user_id = ? AND session_id = ?",
            (key.app_name, key.user_id, key.session_id),
        ).fetchone()
        if row is None:
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        if limit <= 0:
            return [], int(row[1])
        found = db.execute(
            "SELECT position, data FROM events WHERE session = ? AND sequence > ?"
            " ORDER BY sequence LIMIT ?",
            (row[0], after_sequence, limit),
        ).fetchall()
    return [LoggedEvent(key, load_event(data), position) for position, data in found], int(row[1])


def list_events_after_position(
    db: sqlite3.Connection,
    *,
    app_name: str,
    user_id: str | None,
    after_position: int,
    limit: int,
) -> list[LoggedEvent]:
    if limit <= 0:
        return []
    clauses = ["e.position > ?", "s.app_name = ?"]
    params: list[Any] = [after_position, app_name]
    if user_id is not None:
        clauses.append("s.user_id = ?")
        params.append(user_id)
    params.append(limit)
    # CROSS JOIN makes SQLite walk the events in position order from the cursor (a range of the
    # primary key) and stop at the limit, instead of reading every event of every session of
    # the app and sorting them: a subscriber resuming near the end reads only what is new.
    found = db.execute(
        "SELECT e.position, s.user_id, s.session_id, e.data"
        " FROM events e CROSS JOIN sessions s ON s.id = e.session"
        f" WHERE {' AND '.join(clauses)} ORDER BY e.position LIMIT ?",
        params,
    ).fetchall()
    return [
        LoggedEvent(SessionKey(app_name, user, session), load_event(data), position)
        for position, user, session, data in found
    ]


def last_position(db: sqlite3.Connection) -> int:
    found = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    return 0 if found is None else int(found[0])


def get_state(db: sqlite3.Connection, *, key: SessionKey) -> StateAt:
    with _snapshot(db):
        row = db.execute(
            f"SELECT {_SESSION_COLUMNS} {_SESSION_FROM}"
            " WHERE s.app_name = ? AND s.user_id = ? AND s.session_id = ?",
            (key.app_name, key.user_id, key.session_id),
        ).fetchone()
        if row is None:
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        app_state = _app_state(db, key.app_name)
        position = last_position(db)
    return StateAt(state=_stored(key.app_name, row, app_state, []).state, position=position)


def get_app_config(db: sqlite3.Connection, *, app_name: str) -> config_pb2.AppConfig | None:
    found = db.execute("SELECT config FROM app_configs WHERE app_name = ?", (app_name,)).fetchone()
    return None if found is None else config_pb2.AppConfig.FromString(found[0])


def get_session_config(db: sqlite3.Connection, *, key: SessionKey) -> config_pb2.SessionConfig:
    found = db.execute(
        "SELECT config FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
        (key.app_name, key.user_id, key.session_id),
    ).fetchone()
    if found is None:
        raise session_not_found(key.app_name, key.user_id, key.session_id)
    if found[0] is None:
        return config_pb2.SessionConfig()
    return config_pb2.SessionConfig.FromString(found[0])


def _app_state(db: sqlite3.Connection, app_name: str) -> str | None:
    """The app's state as stored (JSON text), None when it has none."""
    found = db.execute("SELECT state FROM app_states WHERE app_name = ?", (app_name,)).fetchone()
    return None if found is None else str(found[0])


def _filtered_events(
    db: sqlite3.Connection, session_pk: int, flt: EventFilter
) -> list[event_pb2.Event]:
    """``EventFilter`` in SQL: the conditions, then the last N by sequence when asked."""
    clauses = ["session = ?"]
    params: list[Any] = [session_pk]
    if flt.after_sequence is not None:
        clauses.append("sequence > ?")
        params.append(flt.after_sequence)
    if flt.after_timestamp is not None:
        clauses.append("timestamp >= ?")
        params.append(flt.after_timestamp)
    where = " AND ".join(clauses)
    if flt.num_recent_events is None:
        ordered = db.execute(f"SELECT data FROM events WHERE {where} ORDER BY sequence", params)
        return [load_event(data) for (data,) in ordered]
    if flt.num_recent_events <= 0:
        return []
    params.append(flt.num_recent_events)
    newest = db.execute(
        f"SELECT data FROM events WHERE {where} ORDER BY sequence DESC LIMIT ?", params
    ).fetchall()
    return [load_event(data) for (data,) in reversed(newest)]


def _stored(
    app_name: str,
    row: tuple[Any, ...],
    app_state: str | None,
    events: list[event_pb2.Event],
) -> StoredSession:
    _pk, user_id, session_id, state, create_time, update_time, last_sequence, user_state = row
    return StoredSession(
        key=SessionKey(app_name, user_id, session_id),
        state=merge_state(load_state(state), load_state(user_state), load_state(app_state)),
        create_time=create_time,
        last_update_time=update_time,
        last_sequence=last_sequence,
        events=events,
    )


# A loose index scan over the sessions' unique (app_name, user_id, session_id) index: one index
# seek per distinct name instead of reading every session row.
_APP_NAMES = (
    "WITH RECURSIVE names(name) AS ("
    " SELECT (SELECT MIN(app_name) FROM sessions WHERE app_name > ?)"
    " UNION ALL"
    " SELECT (SELECT MIN(app_name) FROM sessions WHERE app_name > names.name)"
    " FROM names WHERE names.name IS NOT NULL"
    ") SELECT name FROM names WHERE name IS NOT NULL LIMIT ?"
)
_USER_IDS = (
    "WITH RECURSIVE names(name) AS ("
    " SELECT (SELECT MIN(user_id) FROM sessions WHERE app_name = ?1 AND user_id > ?2)"
    " UNION ALL"
    " SELECT (SELECT MIN(user_id) FROM sessions WHERE app_name = ?1 AND user_id > names.name)"
    " FROM names WHERE names.name IS NOT NULL"
    ") SELECT name FROM names WHERE name IS NOT NULL LIMIT ?3"
)


def list_app_names(db: sqlite3.Connection, *, limit: int, after: str | None) -> list[str]:
    if limit <= 0:
        return []
    return [row[0] for row in db.execute(_APP_NAMES, (after or "", limit)).fetchall()]


def list_user_ids(
    db: sqlite3.Connection, *, app_name: str, limit: int, after: str | None
) -> list[str]:
    if limit <= 0:
        return []
    rows = db.execute(_USER_IDS, (app_name, after or "", limit)).fetchall()
    return [row[0] for row in rows]
