"""Client-supplied summaries: checking a committed range, and expanding a summary.

A client that summarises with its own model commits the range it summarised (first and last
sequence, in the plan's scope), the log position it planned at, and optionally the summary it
rolled in. The range is acceptable when both ends are live (not rewound), non-summary events of
that scope, no pinned event lies in it (by sequence or by timestamp), and it is self-contained:
nothing opened inside it (a call, a confirmation or an auth request) is left open at its end,
except calls that can never be answered, by the planner's own rule (``still_open``), judged on
the log as it was at ``based_on_sequence``: a range the planner proposed there is accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextengine.core.compaction._obligations import still_open
from contextengine.core.compaction._planner import (
    CompactionPlan,
    after_surviving_summary,
    seed_event,
)
from contextengine.core.context import apply_context_edits, apply_rewinds
from contextengine.core.errors import ContextEngineError
from contextengine.v1 import event_pb2

__all__ = ["Expansion", "client_plan", "expand_summary"]

CLIENT = "client"


def _bad_range(field: str, message: str, **metadata: object) -> ContextEngineError:
    return ContextEngineError("INVALID_COMPACTION_RANGE", message, field=field, **metadata)


def _scope(event: event_pb2.Event) -> str | None:
    return event.isolation_scope if event.HasField("isolation_scope") else None


def client_plan(
    log: Sequence[event_pb2.Event],
    *,
    first_sequence: int,
    last_sequence: int,
    rolls_up_sequence: int,
    isolation_scope: str | None,
    based_on_sequence: int,
) -> CompactionPlan:
    """The plan a client's commit describes, or INVALID_COMPACTION_RANGE. ``log`` is the whole
    session; ``based_on_sequence`` must already be checked to be within it."""
    if first_sequence <= 0 or last_sequence < first_sequence:
        raise _bad_range(
            "first_sequence",
            f"range {first_sequence}..{last_sequence} is empty or reversed",
        )
    if last_sequence > based_on_sequence:
        raise _bad_range(
            "last_sequence",
            f"last_sequence {last_sequence} is after based_on_sequence {based_on_sequence}",
        )
    live = [
        e
        for e in apply_rewinds(apply_context_edits(log[:based_on_sequence]))
        if _scope(e) == isolation_scope
    ]
    by_sequence = {event.sequence: event for event in live}
    for name, sequence in (("first_sequence", first_sequence), ("last_sequence", last_sequence)):
        event = by_sequence.get(sequence)
        if event is None or event.actions.HasField("compaction"):
            raise _bad_range(
                name,
                f"{name} {sequence} is not a live, non-summary event of the range's scope",
                sequence=sequence,
            )
    raw = [
        event
        for event in live
        if first_sequence <= event.sequence <= last_sequence
        and not event.actions.HasField("compaction")
    ]
    rolls_up: event_pb2.Event | None = None
    if rolls_up_sequence:
        rolls_up = by_sequence.get(rolls_up_sequence)
        if rolls_up is None or not rolls_up.actions.compaction.HasField("compacted_content"):
            raise _bad_range(
                "rolls_up_sequence",
                f"rolls_up_sequence {rolls_up_sequence} is not a live summary of the range's scope",
                sequence=rolls_up_sequence,
            )
        if rolls_up.actions.compaction.end_timestamp >= raw[0].timestamp:
            raise _bad_range(
                "rolls_up_sequence",
                "the rolled-up summary must end before the first event of the range",
                sequence=rolls_up_sequence,
            )
    # The two ways the planner reads a range: every raw event from first to last (sliding
    # window), or only those newer than the end of the surviving summary, where the token
    # threshold's candidates start (with clocks out of order, older ones can lie in between).
    readings = [raw]
    _, candidates = after_surviving_summary(live)
    newer = {event.sequence for event in candidates}
    token_reading = [event for event in raw if event.sequence in newer]
    if len(token_reading) < len(raw) and {first_sequence, last_sequence} <= newer:
        readings.append(token_reading)
    refusals: list[ContextEngineError] = []
    for covered in readings:
        try:
            return _checked(covered, live, rolls_up, isolation_scope, based_on_sequence)
        except ContextEngineError as refusal:
            refusals.append(refusal)
    raise refusals[0]


def _checked(
    covered: list[event_pb2.Event],
    live: list[event_pb2.Event],
    rolls_up: event_pb2.Event | None,
    isolation_scope: str | None,
    based_on_sequence: int,
) -> CompactionPlan:
    """The plan summarising ``covered`` (the range's raw events, one reading of them), or
    INVALID_COMPACTION_RANGE: pins as the planner keeps them (no pinned raw event in the range,
    none whose timestamp the summary's range would hide), and nothing left open but dead calls
    (the planner's own rule)."""
    first_sequence, last_sequence = covered[0].sequence, covered[-1].sequence
    window = [seed_event(rolls_up), *covered] if rolls_up is not None else covered
    start, end = window[0].timestamp, window[-1].timestamp
    inside = {event.sequence for event in covered}
    for event in live:
        if (
            event.pinned
            and not event.actions.HasField("compaction")
            and (event.sequence in inside or start <= event.timestamp <= end)
        ):
            raise _bad_range(
                "first_sequence",
                f"event {event.sequence} is pinned and may not be inside a compacted range",
                sequence=event.sequence,
            )
    left_open = still_open(covered, live)
    if left_open:
        blocking = left_open[0]
        raise _bad_range(
            "last_sequence",
            f"the range {first_sequence}..{last_sequence} leaves {blocking.describe()}",
            call_id=blocking.id,
        )
    return CompactionPlan(
        CLIENT, tuple(window), tuple(covered), rolls_up, isolation_scope, based_on_sequence
    )


@dataclass(frozen=True)
class Expansion:
    summary: event_pb2.Event
    #: live raw events of the summary's scope inside its range, in log order
    events: list[event_pb2.Event]
    #: earlier summaries whose ranges lie inside this one's, in log order
    subsumed: list[event_pb2.Event]


def expand_summary(log: Sequence[event_pb2.Event], sequence: int) -> Expansion:
    """What the summary at ``sequence`` replaced (EVENT_NOT_FOUND / NOT_A_SUMMARY otherwise)."""
    if not 0 < sequence <= len(log):
        raise ContextEngineError(
            "EVENT_NOT_FOUND", f"the session has no event {sequence}", sequence=sequence
        )
    summary = log[sequence - 1]
    if not summary.actions.HasField("compaction"):
        raise ContextEngineError(
            "NOT_A_SUMMARY", f"event {sequence} is not a summary", sequence=sequence
        )
    compaction = summary.actions.compaction
    start, end = compaction.start_timestamp, compaction.end_timestamp
    scope = _scope(summary)
    events: list[event_pb2.Event] = []
    subsumed: list[event_pb2.Event] = []
    for event in apply_rewinds(log):
        if _scope(event) != scope or event.sequence == sequence:
            continue
        if event.actions.HasField("compaction"):
            inner = event.actions.compaction
            if (
                event.sequence < sequence
                and start <= inner.start_timestamp <= inner.end_timestamp <= end
            ):
                subsumed.append(event)
        elif start <= event.timestamp <= end:
            events.append(event)
    return Expansion(summary, events, subsumed)
