"""Planning the appends of one PostgreSQL write transaction: several callers' appends at once.

The store commits the appends that wait together in one transaction (``_group``). This module
is the pure part: given what the transaction read once its locks were held (each session's
counter and state, the requested ids already recorded, the user's and the app's state), it plans
each append in the order the callers came (``_append.plan_append``: idempotency, sequences,
``expected_last_sequence``, deltas), carrying each session's counter, recorded ids and state from
one append to the next, and gathers what the transaction writes: the events in order (their
place in the transaction is their position's ``n``), one row per session, one per user's and
app's state that changed. An append whose plan fails (SESSION_NOT_FOUND, SEQUENCE_MISMATCH,
EVENT_ID_CONFLICT, too many events) gets its error and writes nothing; the others go on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextengine.core.errors import ContextEngineError, invalid, session_not_found
from contextengine.core.state import JsonObject, apply_delta
from contextengine.store._append import copy_event, plan_append
from contextengine.store._base import AppendOutcome, SessionKey
from contextengine.store._rows import dump_state, load_event, load_state
from contextengine.store.postgres._positions import MAX_PER_TRANSACTION
from contextengine.v1 import event_pb2

__all__ = ["AppendRequest", "GroupPlan", "Result", "plan_group", "shared_keys"]

#: an append's outcome, or why it failed
Result = AppendOutcome | ContextEngineError


@dataclass(frozen=True)
class AppendRequest:
    """One caller's append: ``events`` are the store's own copies (planning modifies them)."""

    key: SessionKey
    events: Sequence[event_pb2.Event]
    expected_last_sequence: int | None
    now: float


@dataclass
class _Session:
    """A session as the transaction found it, then as its appends leave it."""

    pk: int
    last_sequence: int
    state_text: str
    recorded: dict[str, event_pb2.Event]
    state: JsonObject | None = None
    changed_state: bool = False
    update_time: float = 0.0
    #: the place of its last new event in the transaction (-1: none)
    last_place: int = -1

    def find(self, event_id: str) -> event_pb2.Event | None:
        """The recorded event with that id, as a copy of its own for each caller."""
        found = self.recorded.get(event_id)
        return None if found is None else copy_event(found)


@dataclass
class GroupPlan:
    """What the transaction writes (column arrays, as the write statement takes them)."""

    sessions: dict[SessionKey, _Session] = field(default_factory=dict)
    users: dict[tuple[str, str], tuple[JsonObject, float]] = field(default_factory=dict)
    apps: dict[str, tuple[JsonObject, float]] = field(default_factory=dict)
    events: list[tuple[int, str, str, event_pb2.Event]] = field(default_factory=list)

    def event_columns(self) -> list[list[Any]]:
        """Session pk, app, user, sequence, id, timestamp, is_compaction, data: one list each."""
        return [
            [pk for pk, _, _, _ in self.events],
            [app for _, app, _, _ in self.events],
            [user for _, _, user, _ in self.events],
            [e.sequence for _, _, _, e in self.events],
            [e.id for _, _, _, e in self.events],
            [e.timestamp for _, _, _, e in self.events],
            [e.actions.HasField("compaction") for _, _, _, e in self.events],
            [e.SerializeToString(deterministic=True) for _, _, _, e in self.events],
        ]

    def session_columns(self) -> list[list[Any]]:
        """Pk, last sequence, update time, state (NULL: unchanged), place of the last event."""
        touched = [s for s in self.sessions.values() if s.last_place >= 0]
        return [
            [s.pk for s in touched],
            [s.last_sequence for s in touched],
            [s.update_time for s in touched],
            [dump_state(s.state or {}) if s.changed_state else None for s in touched],
            [s.last_place for s in touched],
        ]

    def shared_columns(self) -> list[list[Any]]:
        """Users' app, user, state, time; apps' app, state, time."""
        users = list(self.users.items())
        apps = list(self.apps.items())
        return [
            [app for (app, _), _ in users],
            [user for (_, user), _ in users],
            [dump_state(state) for _, (state, _) in users],
            [at for _, (_, at) in users],
            [app for app, _ in apps],
            [dump_state(state) for _, (state, _) in apps],
            [at for _, (_, at) in apps],
        ]


def shared_keys(requests: Iterable[AppendRequest]) -> tuple[list[tuple[str, str]], list[str]]:
    """The users' and apps' states the requests may write (their deltas' prefixes)."""
    users: dict[tuple[str, str], None] = {}
    apps: dict[str, None] = {}
    for request in requests:
        for event in request.events:
            if not event.HasField("actions"):
                continue
            for name in event.actions.state_delta.fields:
                if name.startswith("user:"):
                    users[(request.key.app_name, request.key.user_id)] = None
                elif name.startswith("app:"):
                    apps[request.key.app_name] = None
    return list(users), list(apps)


def plan_group(
    requests: Sequence[AppendRequest],
    sessions: Iterable[tuple[SessionKey, int, int, str]],
    recorded: Iterable[tuple[SessionKey, bytes]],
    users: dict[tuple[str, str], str | None],
    apps: dict[str, str | None],
) -> tuple[list[Result], GroupPlan]:
    """Plans ``requests`` in order on what was read: ``sessions`` (key, pk, last sequence,
    state text), ``recorded`` events among the requested ids (key, data), the users' and apps'
    state texts (None: no row)."""
    plan = GroupPlan()
    for key, pk, last_sequence, state_text in sessions:
        plan.sessions[key] = _Session(pk, last_sequence, state_text, {})
    for key, data in recorded:
        event = load_event(data)
        plan.sessions[key].recorded[event.id] = event
    user_states = {k: load_state(v) for k, v in users.items()}
    app_states = {k: load_state(v) for k, v in apps.items()}
    results: list[Result] = []
    for request in requests:
        try:
            results.append(_plan_one(request, plan, user_states, app_states))
        except ContextEngineError as error:
            results.append(error)
    return results, plan


def _plan_one(
    request: AppendRequest,
    plan: GroupPlan,
    user_states: dict[tuple[str, str], JsonObject],
    app_states: dict[str, JsonObject],
) -> AppendOutcome:
    key = request.key
    session = plan.sessions.get(key)
    if session is None:
        raise session_not_found(key.app_name, key.user_id, key.session_id)
    if len(request.events) > MAX_PER_TRANSACTION:
        raise invalid(
            "INVALID_ARGUMENT",
            "events",
            f"a PostgreSQL store records at most {MAX_PER_TRANSACTION:,} events per call, "
            f"not {len(request.events):,}: append them in several calls",
        )
    planned = plan_append(
        request.events,
        session.find,
        session.last_sequence,
        request.expected_last_sequence,
        request.now,
    )
    new = planned.new_events
    if new:
        changes = planned.changes
        at = new[-1].timestamp
        session.last_sequence = planned.last_sequence
        session.update_time = at
        for event in new:
            session.recorded[event.id] = event
            plan.events.append((session.pk, key.app_name, key.user_id, event))
        session.last_place = len(plan.events) - 1
        if changes.session:
            if session.state is None:
                session.state = load_state(session.state_text)
            session.state = apply_delta(session.state, changes.session)
            session.changed_state = True
        if changes.user:
            user = (key.app_name, key.user_id)
            user_states[user] = apply_delta(user_states.get(user, {}), changes.user)
            plan.users[user] = (user_states[user], at)
        if changes.app:
            app_states[key.app_name] = apply_delta(app_states.get(key.app_name, {}), changes.app)
            plan.apps[key.app_name] = (app_states[key.app_name], at)
    return AppendOutcome(
        events=planned.recorded, duplicates=planned.duplicates, last_sequence=planned.last_sequence
    )
