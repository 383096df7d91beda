"""The write operations, as synchronous functions run by the writer inside its transaction.

Each one either finishes or raises; the writer rolls a raising operation back to its savepoint.
State rows are only read and written for the scopes an operation actually changes. Each records
its changes, with their positions, in ``tx.changes`` for the commit listeners.

Positions come from the AUTOINCREMENT counter of ``events`` (``sqlite_sequence``): an event's
position is its row id; creating a session with ``app:``/``user:`` state takes the next value of
the counter without a row, so that every change of shared state has its place in one order that
survives restarts.
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Sequence
from functools import partial

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
    LoggedEvent,
    SessionCreated,
    SessionDeleted,
    SessionKey,
    StoredSession,
)
from contextengine.store._rows import (
    EVENT_COLUMNS,
    dump_state,
    event_row,
    load_event,
    load_state,
)
from contextengine.store.sqlite._writer import SessionRow, WriteTx
from contextengine.v1 import config_pb2, event_pb2

_INSERT_EVENT = f"INSERT INTO events ({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


def create_session(
    tx: WriteTx,
    *,
    key: SessionKey,
    state: JsonObject,
    now: float,
    config: config_pb2.SessionConfig | None = None,
) -> StoredSession:
    """``config`` is the store's own copy (its ``update_time`` is set to ``now``)."""
    if tx.sessions.get(key) is not None:
        raise session_already_exists(key.session_id)
    scoped = split_delta(state)
    app = _update_app_state(tx.db, key.app_name, scoped.app, now)
    user = _update_user_state(tx.db, key, scoped.user, now)
    stored_config: bytes | None = None
    if config is not None:
        config.update_time = now
        stored_config = config.SerializeToString(deterministic=True)
    cursor = tx.db.execute(
        "INSERT INTO sessions"
        " (app_name, user_id, session_id, state, create_time, update_time, last_sequence, config)"
        " VALUES (?, ?, ?, ?, ?, ?, 0, ?)",
        (
            key.app_name,
            key.user_id,
            key.session_id,
            dump_state(scoped.session),
            now,
            now,
            stored_config,
        ),
    )
    assert cursor.lastrowid is not None
    tx.sessions.set(key, SessionRow(pk=cursor.lastrowid, last_sequence=0))
    # Copied: the values are also in the returned session, which the caller may mutate.
    shared = {APP_PREFIX + k: copy.deepcopy(v) for k, v in scoped.app.items()}
    shared.update((USER_PREFIX + k, copy.deepcopy(v)) for k, v in scoped.user.items())
    position = _take_position(tx.db) if shared else 0
    tx.changes.append(SessionCreated(key, shared, position))
    return StoredSession(
        key=key,
        state=merge_state(scoped.session, user, app),
        create_time=now,
        last_update_time=now,
        last_sequence=0,
    )


def append_events(
    tx: WriteTx,
    *,
    key: SessionKey,
    events: Sequence[event_pb2.Event],
    expected_last_sequence: int | None,
    now: float,
) -> AppendOutcome:
    """``events`` are the store's own copies (the plan sets their sequence and timestamp)."""
    row = tx.sessions.get(key)
    if row is None:
        raise session_not_found(key.app_name, key.user_id, key.session_id)
    plan = plan_append(
        events,
        partial(_find_event, tx.db, row.pk),
        row.last_sequence,
        expected_last_sequence,
        now,
    )
    if plan.new_events:
        db = tx.db
        if len(plan.new_events) == 1:
            last_position = db.execute(
                _INSERT_EVENT, event_row(row.pk, plan.new_events[0])
            ).lastrowid
        else:
            db.executemany(_INSERT_EVENT, [event_row(row.pk, event) for event in plan.new_events])
            # The only writer inserts the rows one after the other: their positions are
            # consecutive.
            (last_position,) = db.execute("SELECT last_insert_rowid()").fetchone()
        assert last_position is not None
        first_position = last_position - len(plan.new_events) + 1
        tx.changes.extend(
            LoggedEvent(key, copy_event(event), first_position + i)
            for i, event in enumerate(plan.new_events)
        )
        update_time = plan.new_events[-1].timestamp
        if plan.changes.app:
            _update_app_state(db, key.app_name, plan.changes.app, update_time)
        if plan.changes.user:
            _update_user_state(db, key, plan.changes.user, update_time)
        if plan.changes.session:
            (current,) = db.execute("SELECT state FROM sessions WHERE id = ?", (row.pk,)).fetchone()
            state = apply_delta(load_state(current), plan.changes.session)
            db.execute(
                "UPDATE sessions SET state = ?, last_sequence = ?, update_time = ? WHERE id = ?",
                (dump_state(state), plan.last_sequence, update_time, row.pk),
            )
        else:
            db.execute(
                "UPDATE sessions SET last_sequence = ?, update_time = ? WHERE id = ?",
                (plan.last_sequence, update_time, row.pk),
            )
        tx.sessions.set(key, SessionRow(pk=row.pk, last_sequence=plan.last_sequence))
    return AppendOutcome(
        events=plan.recorded, duplicates=plan.duplicates, last_sequence=plan.last_sequence
    )


def delete_session(tx: WriteTx, *, key: SessionKey) -> bool:
    # Events go with the session row (ON DELETE CASCADE).
    cursor = tx.db.execute(
        "DELETE FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
        (key.app_name, key.user_id, key.session_id),
    )
    if cursor.rowcount == 0:
        return False
    tx.sessions.set(key, None)
    tx.changes.append(SessionDeleted(key))
    return True


def put_app_config(
    tx: WriteTx, *, config: config_pb2.AppConfig, now: float
) -> config_pb2.AppConfig:
    """``config`` is the store's own copy; its ``update_time`` is set to ``now``."""
    config.update_time = now
    tx.db.execute(
        "INSERT INTO app_configs (app_name, config, update_time) VALUES (?, ?, ?)"
        " ON CONFLICT (app_name) DO UPDATE"
        " SET config = excluded.config, update_time = excluded.update_time",
        (config.app_name, config.SerializeToString(deterministic=True), now),
    )
    return config


def put_session_config(
    tx: WriteTx, *, key: SessionKey, config: config_pb2.SessionConfig, now: float
) -> config_pb2.SessionConfig:
    """``config`` is the store's own copy; its ``update_time`` is set to ``now``."""
    row = tx.sessions.get(key)
    if row is None:
        raise session_not_found(key.app_name, key.user_id, key.session_id)
    config.update_time = now
    tx.db.execute(
        "UPDATE sessions SET config = ? WHERE id = ?",
        (config.SerializeToString(deterministic=True), row.pk),
    )
    return config


def _take_position(db: sqlite3.Connection) -> int:
    """Takes the next position without inserting an event (see the module docstring)."""
    taken = db.execute(
        "UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'events' RETURNING seq"
    ).fetchall()
    if taken:
        return int(taken[0][0])
    # No event was ever inserted: start the counter (AUTOINCREMENT continues from it).
    db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('events', 1)")
    return 1


def _find_event(db: sqlite3.Connection, session_pk: int, event_id: str) -> event_pb2.Event | None:
    found = db.execute(
        "SELECT data FROM events WHERE session = ? AND event_id = ?", (session_pk, event_id)
    ).fetchone()
    return None if found is None else load_event(found[0])


def _update_app_state(
    db: sqlite3.Connection, app_name: str, delta: JsonObject, now: float
) -> JsonObject:
    """Applies ``delta`` to the app's state (no write when empty) and returns the result."""
    found = db.execute("SELECT state FROM app_states WHERE app_name = ?", (app_name,)).fetchone()
    state = load_state(None if found is None else found[0])
    if not delta:
        return state
    state = apply_delta(state, delta)
    db.execute(
        "INSERT INTO app_states (app_name, state, update_time) VALUES (?, ?, ?)"
        " ON CONFLICT (app_name) DO UPDATE"
        " SET state = excluded.state, update_time = excluded.update_time",
        (app_name, dump_state(state), now),
    )
    return state


def _update_user_state(
    db: sqlite3.Connection, key: SessionKey, delta: JsonObject, now: float
) -> JsonObject:
    """Applies ``delta`` to the user's state (no write when empty) and returns the result."""
    found = db.execute(
        "SELECT state FROM user_states WHERE app_name = ? AND user_id = ?",
        (key.app_name, key.user_id),
    ).fetchone()
    state = load_state(None if found is None else found[0])
    if not delta:
        return state
    state = apply_delta(state, delta)
    db.execute(
        "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (app_name, user_id) DO UPDATE"
        " SET state = excluded.state, update_time = excluded.update_time",
        (key.app_name, key.user_id, dump_state(state), now),
    )
    return state
