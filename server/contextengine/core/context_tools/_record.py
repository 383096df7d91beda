"""Recording edits on append: the answer of an edit tool carries its edit into the log.

When an event is appended, each of its function responses that answers a context tool's edit
call (a call of that name and id earlier in the live log) with ``ok`` true is checked again,
with the call's own arguments, against the log it lands in (plus the edits recorded before it in
the same event); the edits that hold are set on the event (``Event.context_edits``), the rest
are left out, so a client can neither forge an edit nor keep one the log no longer allows. The
caller is the call's author, on the call's branch and in its isolation scope; the invocation is
the answer's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from contextengine.core.context import live_indices
from contextengine.core.context_tools._args import parse_args
from contextengine.core.context_tools._declarations import (
    EDIT_TOOLS,
    HIDE,
    PIN,
    SUMMARIZE,
    UNPIN,
)
from contextengine.core.context_tools._rules import (
    EditRefusedError,
    check_hide,
    check_pin,
    check_unpin,
)
from contextengine.core.context_tools._view import Caller, Limits, SessionView
from contextengine.core.errors import ContextEngineError
from contextengine.core.structs import struct_to_dict
from contextengine.v1 import event_pb2

__all__ = ["answers_edit_calls", "recorded_edits"]


def answers_edit_calls(event: event_pb2.Event) -> bool:
    """Whether ``event`` holds a function response named after an edit tool (the only events
    :func:`recorded_edits` has to look at)."""
    return any(
        part.HasField("function_response") and part.function_response.name in EDIT_TOOLS
        for part in event.content.parts
    )


def _calls(log: Sequence[event_pb2.Event]) -> dict[str, event_pb2.Event]:
    """Live events holding an edit tool's call, by call id."""
    found: dict[str, event_pb2.Event] = {}
    for index in live_indices(log):
        event = log[index]
        for part in event.content.parts:
            call = part.function_call
            if part.HasField("function_call") and call.name in EDIT_TOOLS and call.id:
                found.setdefault(call.id, event)
    return found


def _call_args(event: event_pb2.Event, call_id: str) -> tuple[str, dict[str, Any]]:
    for part in event.content.parts:
        if part.HasField("function_call") and part.function_call.id == call_id:
            call = part.function_call
            return call.name, struct_to_dict(call.args, "args") if call.HasField("args") else {}
    raise AssertionError("the call is in the event")


def recorded_edits(
    log: Sequence[event_pb2.Event],
    event: event_pb2.Event,
    limits: Limits,
    measure: Callable[[event_pb2.Event], int],
) -> list[event_pb2.ContextEdit]:
    """The edits ``event`` records when appended after ``log`` (the whole session so far, in
    sequence order; ``event`` gets the next sequence)."""
    if not limits.enabled or not answers_edit_calls(event):
        return []
    calls = _calls(log)
    edits: list[event_pb2.ContextEdit] = []
    for part in event.content.parts:
        if not part.HasField("function_response"):
            continue
        answer = part.function_response
        if answer.name not in EDIT_TOOLS or not answer.id or answer.id not in calls:
            continue
        result = struct_to_dict(answer.response, "response") if answer.HasField("response") else {}
        if result.get("ok") is not True:
            continue
        call_event = calls[answer.id]
        name, raw_args = _call_args(call_event, answer.id)
        if name != answer.name:
            continue
        caller = Caller(
            agent_name=call_event.author,
            branch=call_event.branch or None,
            isolation_scope=(
                call_event.isolation_scope if call_event.HasField("isolation_scope") else None
            ),
            invocation_id=event.invocation_id or call_event.invocation_id,
        )
        edit = _edit(log, event, edits, caller, limits, measure, name, raw_args, result)
        if edit is not None:
            edits.append(edit)
    return edits


def _edit(
    log: Sequence[event_pb2.Event],
    event: event_pb2.Event,
    earlier: list[event_pb2.ContextEdit],
    caller: Caller,
    limits: Limits,
    measure: Callable[[event_pb2.Event], int],
    name: str,
    raw_args: dict[str, Any],
    result: dict[str, Any],
) -> event_pb2.ContextEdit | None:
    try:
        args = parse_args(name, raw_args)
    except ContextEngineError:
        return None
    # the edits recorded before this one in the same event count, as the event will hold them
    landed = list(log)
    if earlier:
        so_far = event_pb2.Event(
            id=event.id or "pending",
            author=event.author,
            invocation_id=caller.invocation_id,
            sequence=len(log) + 1,
            timestamp=event.timestamp,
            context_edits=earlier,
        )
        landed.append(so_far)
    view = SessionView(landed, caller, measure)
    try:
        if name == PIN:
            return check_pin(view, limits, args.first, args.last)
        if name == UNPIN:
            return check_unpin(view, limits, args.first, args.last)
        if name == HIDE:
            return check_hide(view, limits, args.first, args.last, args.stub)
    except EditRefusedError:
        return None
    if name == SUMMARIZE:
        return _summary_edit(log, caller, result)
    return None


def _summary_edit(
    log: Sequence[event_pb2.Event], caller: Caller, result: dict[str, Any]
) -> event_pb2.ContextEdit | None:
    """A summary the tool appended: a live summary of the caller's scope at the sequence the
    answer names."""
    sequence = result.get("summary_sequence")
    if isinstance(sequence, float) and sequence.is_integer():
        sequence = int(sequence)
    if not isinstance(sequence, int) or isinstance(sequence, bool) or not 0 < sequence <= len(log):
        return None
    summary = log[sequence - 1]
    live = set(live_indices(log))
    scope = summary.isolation_scope if summary.HasField("isolation_scope") else None
    if (
        sequence - 1 not in live
        or not summary.actions.HasField("compaction")
        or scope != caller.isolation_scope
    ):
        return None
    return event_pb2.ContextEdit(summary_sequence=sequence)
