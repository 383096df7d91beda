"""The model's edits of its own context (context tools; docs/design/context-tools.md).

An edit is recorded on a function-response event (``Event.context_edits``) and takes effect in
every context built over a log in which that event survives the rewinds, in log order:

* ``pin`` / ``unpin`` a range of sequences: the events are pinned (``Event.pinned``) for the
  compaction planner, or no longer (only pins made by ``pin``; a pin set on append stays);
* ``hide`` a range: its events (those the rewinds leave; a summary in it stays) are replaced, at
  the first one's place, by one stub event: author "user", the stub text as one user text part, the first event's
  timestamp, invocation id and isolation scope, no branch (visible to every agent, like a
  summary);
* ``summary_sequence``: nothing here (the summary is an ordinary compaction event).

:func:`apply_context_edits` returns the log as the rest of the pipeline (and the compaction
planner) then reads it; with no edit in the log it returns the log itself, so every context of a
log without context tools is google-adk 2.13's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from contextengine.core.context._rewind import live_indices
from contextengine.v1 import content_pb2, event_pb2

__all__ = ["EditedLog", "Hidden", "apply_context_edits", "is_stub", "live_edits", "stub_text"]

#: the id of a hidden range's stub event starts with this (stubs are never stored)
STUB_ID_PREFIX = "context-stub-"


def is_stub(event: event_pb2.Event) -> bool:
    """Whether ``event`` is a hidden range's stub (made by :func:`apply_context_edits`)."""
    return event.id.startswith(STUB_ID_PREFIX)


@dataclass(frozen=True)
class Hidden:
    """A live hidden range: sequences ``first``..``last``, its stub, and the sequence of the
    event that recorded it."""

    first: int
    last: int
    stub: str
    recorded_at: int

    def holds(self, sequence: int) -> bool:
        return self.first <= sequence <= self.last


@dataclass
class EditedLog:
    """The live edits of a log: pinned sequences (by ``pin``) and hidden ranges, in log order."""

    pinned: set[int] = field(default_factory=set)
    hidden: list[Hidden] = field(default_factory=list)
    #: sequence of each event recording an edit -> the edits' count (for limits per invocation)
    recorded: dict[int, int] = field(default_factory=dict)

    def hidden_at(self, sequence: int) -> Hidden | None:
        for hidden in self.hidden:
            if hidden.holds(sequence):
                return hidden
        return None


def live_edits(events: Sequence[event_pb2.Event], live: Sequence[int] | None = None) -> EditedLog:
    """The edits of the events of ``events`` that survive the rewinds (``live``: their indices,
    when known), applied in log order."""
    state = EditedLog()
    indices = live_indices(events) if live is None else live
    for index in indices:
        event = events[index]
        if not event.context_edits:
            continue
        state.recorded[event.sequence] = len(event.context_edits)
        for edit in event.context_edits:
            kind = edit.WhichOneof("edit")
            if kind == "pin":
                state.pinned.update(range(edit.pin.first, edit.pin.last + 1))
            elif kind == "unpin":
                state.pinned.difference_update(range(edit.unpin.first, edit.unpin.last + 1))
            elif kind == "hide":
                hide = edit.hide
                state.hidden.append(
                    Hidden(hide.range.first, hide.range.last, hide.stub, event.sequence)
                )
    return state


def stub_text(hidden: Hidden) -> str:
    """What a context shows for a hidden range (this project's words)."""
    span = (
        f"event {hidden.first}"
        if hidden.first == hidden.last
        else f"events {hidden.first} to {hidden.last}"
    )
    return (
        f"[Hidden from this context at the model's request: {span}. {hidden.stub.strip()} "
        f"To read them again, call context_expand with sequence {hidden.first}.]"
    )


def _stub_event(hidden: Hidden, first: event_pb2.Event) -> event_pb2.Event:
    stub = event_pb2.Event(
        id=f"{STUB_ID_PREFIX}{hidden.recorded_at}-{hidden.first}",
        author="user",
        invocation_id=first.invocation_id,
        timestamp=first.timestamp,
        sequence=first.sequence,
        content=content_pb2.Content(role="user", parts=[content_pb2.Part(text=stub_text(hidden))]),
    )
    if first.HasField("isolation_scope"):
        stub.isolation_scope = first.isolation_scope
    return stub


def apply_context_edits(
    events: Sequence[event_pb2.Event], *, pins: bool = True
) -> Sequence[event_pb2.Event]:
    """``events`` as the pipeline reads them once the live edits are applied (see the module
    documentation); ``events`` itself when there is nothing to apply. ``pins=False`` leaves pins
    out (contexts do not depend on them, only compaction does). Events that a rewind removed
    stay as they are, for the pipeline's own rewind rule."""
    if not any(event.context_edits for event in events):
        return events
    live = live_indices(events)
    state = live_edits(events, live)
    pinned = state.pinned if pins else set()
    if not state.hidden and not pinned:
        return events
    alive = set(live)
    out: list[event_pb2.Event] = []
    stubbed: set[tuple[int, int]] = set()
    for index, event in enumerate(events):
        if index in alive:
            hidden = state.hidden_at(event.sequence)
            if hidden is not None and not event.actions.HasField("compaction"):
                if (hidden.recorded_at, hidden.first) not in stubbed:
                    stubbed.add((hidden.recorded_at, hidden.first))
                    out.append(_stub_event(hidden, event))
                continue
            if event.sequence in pinned and not event.pinned:
                event = _pinned(event)
        out.append(event)
    return out


def _pinned(event: event_pb2.Event) -> event_pb2.Event:
    copy = event_pb2.Event()
    copy.CopyFrom(event)
    copy.pinned = True
    return copy
