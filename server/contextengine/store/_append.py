"""Planning an append: idempotency, sequence assignment and state deltas, shared by every backend.

The plan is pure: the backend supplies a lookup of already recorded events by id and its current
last sequence, and writes what the plan says (all of it, or nothing when planning raises).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from contextengine.core.errors import event_id_conflict, sequence_mismatch
from contextengine.core.events import same_payload
from contextengine.core.state import JsonObject, apply_delta, split_delta
from contextengine.core.structs import struct_to_dict
from contextengine.v1 import event_pb2


@dataclass
class ScopedChanges:
    """The state deltas of all new events of one append, merged in order, prefixes removed."""

    app: JsonObject = field(default_factory=dict)
    user: JsonObject = field(default_factory=dict)
    session: JsonObject = field(default_factory=dict)


@dataclass
class AppendPlan:
    #: per requested event, the event as recorded (new events have sequence and timestamp set)
    recorded: list[event_pb2.Event]
    #: per requested event, True when it had been recorded before
    duplicates: list[bool]
    #: the events to write, in sequence order (a subset of ``recorded``)
    new_events: list[event_pb2.Event]
    changes: ScopedChanges
    #: the session's last sequence once the plan is written
    last_sequence: int


def copy_event(event: event_pb2.Event) -> event_pb2.Event:
    out = event_pb2.Event()
    out.CopyFrom(event)
    return out


def plan_append(
    events: Sequence[event_pb2.Event],
    find_recorded: Callable[[str], event_pb2.Event | None],
    last_sequence: int,
    expected_last_sequence: int | None,
    now: float,
) -> AppendPlan:
    """Plans appending ``events`` to a session whose log ends at ``last_sequence``.

    Takes ownership of ``events``: new events are modified in place (sequence, zero timestamp), so
    pass copies. ``find_recorded`` returns the recorded event with an id, or None. An id repeated
    within ``events`` is treated like a re-append of its first occurrence. Raises EVENT_ID_CONFLICT
    or SEQUENCE_MISMATCH; nothing is to be written then.
    """
    recorded: list[event_pb2.Event] = []
    duplicates: list[bool] = []
    new_events: list[event_pb2.Event] = []
    planned: dict[str, event_pb2.Event] = {}
    # Events stamped by the server get distinct, increasing times even within one batch:
    # compaction ranges are timestamp ranges, so equal stamps would make events inseparable.
    stamp = now
    for event in events:
        earlier = planned.get(event.id)
        if earlier is None:
            earlier = find_recorded(event.id)
        if earlier is not None:
            if not same_payload(event, earlier):
                raise event_id_conflict(event.id, earlier.sequence)
            recorded.append(earlier)
            duplicates.append(True)
            continue
        event.sequence = last_sequence + len(new_events) + 1
        if event.timestamp == 0.0:
            event.timestamp = stamp
            stamp = math.nextafter(stamp, math.inf)
        planned[event.id] = event
        new_events.append(event)
        recorded.append(event)
        duplicates.append(False)

    if not new_events:
        # A retry of a call that was committed: succeeds whatever the expected sequence says.
        return AppendPlan(recorded, duplicates, [], ScopedChanges(), last_sequence)
    if expected_last_sequence is not None and expected_last_sequence != last_sequence:
        raise sequence_mismatch(expected_last_sequence, last_sequence)
    return AppendPlan(
        recorded,
        duplicates,
        new_events,
        _merged_changes(new_events),
        last_sequence + len(new_events),
    )


def _merged_changes(events: Sequence[event_pb2.Event]) -> ScopedChanges:
    changes = ScopedChanges()
    for event in events:
        if not event.HasField("actions") or not event.actions.state_delta.fields:
            continue
        scoped = split_delta(struct_to_dict(event.actions.state_delta, "actions.state_delta"))
        changes.app = apply_delta(changes.app, scoped.app)
        changes.user = apply_delta(changes.user, scoped.user)
        changes.session = apply_delta(changes.session, scoped.session)
    return changes
