"""Which ranges are safe to summarise: open obligations and the retained tail (sections 4.5, 4.6).

An obligation is a function call, a tool-confirmation request or an auth request (keyed by call
id) that has not been answered yet. A range may end only where nothing opened inside it is still
open, otherwise the summary would swallow a call whose answer stays raw (or is still to come).
Calls and responses without ids are ignored, as in ADK.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from contextengine.v1 import event_pb2

__all__ = [
    "call_ids",
    "longest_self_contained_prefix",
    "open_obligations",
    "response_ids",
    "safe_split_index",
]

#: Calls the framework makes on the client's behalf (human in the loop, credentials, input).
_CLIENT_CALL_NAMES = frozenset(
    {"adk_request_credential", "adk_request_confirmation", "adk_request_input"}
)


def call_ids(event: event_pb2.Event) -> set[str]:
    """Ids of the function calls in the event's content."""
    return {
        part.function_call.id
        for part in event.content.parts
        if part.HasField("function_call") and part.function_call.id
    }


def response_ids(event: event_pb2.Event) -> set[str]:
    """Ids of the function responses in the event's content."""
    return {
        part.function_response.id
        for part in event.content.parts
        if part.HasField("function_response") and part.function_response.id
    }


def _requests(event: event_pb2.Event) -> set[str]:
    actions = event.actions
    return set(actions.requested_tool_confirmations) | set(actions.requested_auth_configs)


def _balanced_length(window: Sequence[event_pb2.Event], ignored: set[str]) -> int:
    """Length of the longest prefix after which no obligation is open. Within an event,
    responses close before its calls and requests open (a placeholder response that carries a
    confirmation request closes the call and reopens the same id)."""
    open_ids: set[str] = set()
    safe = 0
    for index, event in enumerate(window):
        open_ids -= response_ids(event)
        open_ids |= call_ids(event) - ignored
        open_ids |= _requests(event) - ignored
        if not open_ids:
            safe = index + 1
    return safe


def open_obligations(window: Sequence[event_pb2.Event]) -> set[str]:
    """The ids still open after the whole of ``window`` (empty: the window is self-contained)."""
    open_ids: set[str] = set()
    for event in window:
        open_ids -= response_ids(event)
        open_ids |= call_ids(event) | _requests(event)
    return open_ids


def _newest_invocation(all_events: Sequence[event_pb2.Event]) -> str | None:
    for event in reversed(all_events):
        if event.invocation_id and not event.actions.HasField("compaction"):
            return event.invocation_id
    return None


def _dead_call_ids(
    window: Iterable[event_pb2.Event],
    all_events: Sequence[event_pb2.Event],
    newest: str | None,
) -> set[str]:
    """Calls opened in ``window`` that can never be answered: not answered anywhere in the
    session, not a protected long-running or pending human-in-the-loop call, and not made by the
    newest invocation (which may still be running)."""
    protected: set[str] = set()
    answered: set[str] = set()
    for event in all_events:
        newest_or_unscoped = not event.invocation_id or event.invocation_id == newest
        if event.long_running_tool_ids:
            long_running = set(event.long_running_tool_ids)
            if newest_or_unscoped:
                protected |= long_running
            else:
                client_calls = {
                    part.function_call.id
                    for part in event.content.parts
                    if part.HasField("function_call")
                    and part.function_call.id
                    and part.function_call.name in _CLIENT_CALL_NAMES
                }
                protected |= long_running - client_calls
        requests = _requests(event)
        if newest_or_unscoped:
            protected |= requests
        answered |= response_ids(event) - requests
    dead: set[str] = set()
    for event in window:
        if newest and event.invocation_id == newest:
            continue
        dead |= {call for call in call_ids(event) if call not in protected | answered}
    return dead


def longest_self_contained_prefix(
    window: Sequence[event_pb2.Event], all_events: Sequence[event_pb2.Event] | None = None
) -> list[event_pb2.Event]:
    """The longest prefix of ``window`` that leaves no obligation it opened unanswered.

    With ``all_events`` (the whole scoped log), a prefix stalled inside one invocation (or at
    the very start) is extended past calls that are provably dead, so that one call whose
    process died does not block compaction forever (ADK's relaxation, same conditions)."""
    safe = _balanced_length(window, set())
    if safe == len(window):
        return list(window)
    if all_events is None:
        return list(window[:safe])
    if safe > 0 and window[safe - 1].invocation_id != window[safe].invocation_id:
        return list(window[:safe])
    dead = _dead_call_ids(window, all_events, _newest_invocation(all_events))
    if not dead:
        return list(window[:safe])
    return list(window[: max(safe, _balanced_length(window, dead))])


def safe_split_index(candidates: Sequence[event_pb2.Event], retention: int) -> int:
    """Where to split ``candidates`` into a summarised head and a retained tail of about
    ``retention`` events: the largest index at or before ``len - retention`` such that no
    response in the tail answers a call in the head. 0 when there is none."""
    initial = len(candidates) - retention
    if initial <= 0:
        return 0
    unmatched: set[str] = set()
    for index in range(len(candidates) - 1, -1, -1):
        event = candidates[index]
        unmatched |= response_ids(event)
        unmatched -= call_ids(event)
        if not unmatched and index <= initial:
            return index
    return 0
