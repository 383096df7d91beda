"""Which ranges are safe to summarise: open obligations and the retained tail (sections 4.5, 4.6).

An obligation is a function call, a tool-confirmation request or an auth request (keyed by call
id) that has not been answered yet. A range may end only where nothing opened inside it is still
open, otherwise the summary would swallow a call whose answer stays raw (or is still to come),
except calls that can never be answered (ADK's dead-call rule: a crashed invocation's call, an
abandoned confirmation). Calls and responses without ids are ignored, as in ADK.

The planner (:func:`longest_self_contained_prefix`) and the commit check of a client's range
(:func:`still_open`) share the walk and the dead-call rule (``_Fates``): whatever the planner
proposes, the commit check accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Set as AbstractSet
from dataclasses import dataclass

from contextengine.v1 import event_pb2

__all__ = [
    "ANSWERED_LATER",
    "LONG_RUNNING",
    "NEWEST_INVOCATION",
    "NOT_FOLLOWED",
    "PENDING_REQUEST",
    "OpenObligation",
    "call_ids",
    "longest_self_contained_prefix",
    "open_obligations",
    "response_ids",
    "safe_split_index",
    "still_open",
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


def _resolved_response_ids(event: event_pb2.Event) -> set[str]:
    """Ids the event answers for good: its responses, less the placeholders that carry a request
    for the same id."""
    return response_ids(event) - _requests(event)


def _walk(window: Iterable[event_pb2.Event], ignored: AbstractSet[str]) -> Iterator[set[str]]:
    """The ids open after each event of ``window`` (the same set, updated in place). Within an
    event, responses close before its calls and requests open (a placeholder response that
    carries a confirmation request closes the call and reopens the same id); ``ignored`` ids
    never open."""
    open_ids: set[str] = set()
    for event in window:
        open_ids -= response_ids(event)
        open_ids |= call_ids(event) - ignored
        open_ids |= _requests(event) - ignored
        yield open_ids


def _balanced_length(window: Sequence[event_pb2.Event], ignored: AbstractSet[str]) -> int:
    """Length of the longest prefix after which no obligation is open."""
    safe = 0
    for index, open_ids in enumerate(_walk(window, ignored)):
        if not open_ids:
            safe = index + 1
    return safe


def open_obligations(
    window: Sequence[event_pb2.Event], ignored: AbstractSet[str] = frozenset()
) -> set[str]:
    """The ids still open after the whole of ``window`` (empty: the window is self-contained),
    ``ignored`` ids left out."""
    last: set[str] = set()
    for state in _walk(window, ignored):
        last = state
    return set(last)


@dataclass(frozen=True)
class _Fates:
    """What the whole scoped log says about each call id: ADK's dead-call rule, computed once
    for the planner and the commit check alike."""

    #: the newest invocation (its calls may still be answered: it may still be running)
    newest: str | None
    #: requests of the newest invocation or of events without one, by id: "tool confirmation"
    #: or "auth"
    pending: dict[str, str]
    #: long-running calls still expected to be answered (the client's own confirmation,
    #: credential and input calls only while their invocation is the newest)
    long_running: frozenset[str]
    #: ids with a response that is not a request's placeholder, anywhere in the log
    answered: frozenset[str]

    def dead(self, window: Iterable[event_pb2.Event]) -> set[str]:
        """Calls made in ``window`` that can never be answered: not answered anywhere in the
        session, not a protected long-running or pending human-in-the-loop call, and not made
        by the newest invocation."""
        dead: set[str] = set()
        for event in window:
            if self.newest and event.invocation_id == self.newest:
                continue
            dead |= {
                call
                for call in call_ids(event)
                if call not in self.pending
                and call not in self.long_running
                and call not in self.answered
            }
        return dead


def _newest_invocation(all_events: Sequence[event_pb2.Event]) -> str | None:
    for event in reversed(all_events):
        if event.invocation_id and not event.actions.HasField("compaction"):
            return event.invocation_id
    return None


def _fates(all_events: Sequence[event_pb2.Event]) -> _Fates:
    newest = _newest_invocation(all_events)
    pending: dict[str, str] = {}
    long_running: set[str] = set()
    answered: set[str] = set()
    for event in all_events:
        newest_or_unscoped = not event.invocation_id or event.invocation_id == newest
        if event.long_running_tool_ids:
            ids = set(event.long_running_tool_ids)
            if newest_or_unscoped:
                long_running |= ids
            else:
                long_running |= ids - _client_calls(event)
        if newest_or_unscoped:
            actions = event.actions
            pending.update(dict.fromkeys(actions.requested_auth_configs, "auth"))
            pending.update(dict.fromkeys(actions.requested_tool_confirmations, "tool confirmation"))
        answered |= _resolved_response_ids(event)
    return _Fates(newest, pending, frozenset(long_running), frozenset(answered))


def _client_calls(event: event_pb2.Event) -> set[str]:
    """Ids of the event's calls that the framework makes on the client's behalf."""
    return {
        part.function_call.id
        for part in event.content.parts
        if part.HasField("function_call")
        and part.function_call.id
        and part.function_call.name in _CLIENT_CALL_NAMES
    }


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
    dead = _fates(all_events).dead(window)
    if not dead:
        return list(window[:safe])
    return list(window[: max(safe, _balanced_length(window, dead))])


#: Why an obligation a range leaves open may still be answered (:class:`OpenObligation`).
ANSWERED_LATER = "answered_later"
PENDING_REQUEST = "pending_request"
LONG_RUNNING = "long_running"
NEWEST_INVOCATION = "newest_invocation"
#: answered only at or before the event that opened it (a reused id, or a call and its
#: response in one event), or a request whose call was made before the range
NOT_FOLLOWED = "not_followed"


@dataclass(frozen=True)
class OpenObligation:
    """An obligation a range leaves open that the dead-call rule does not excuse."""

    id: str
    #: ANSWERED_LATER, PENDING_REQUEST, LONG_RUNNING, NEWEST_INVOCATION or NOT_FOLLOWED
    why: str
    #: the event of the range that opened it (last, when several did)
    opened_by: event_pb2.Event
    #: ANSWERED_LATER: the sequence of the first response after the range; NOT_FOLLOWED: of the
    #: latest response at or before ``opened_by`` (0: none)
    response_sequence: int = 0
    #: PENDING_REQUEST: "tool confirmation" or "auth"
    request_kind: str = ""
    #: NEWEST_INVOCATION: the newest invocation, which made a call with this id
    newest: str = ""

    def describe(self) -> str:
        """What is left open and why, for an error message ("the range leaves ...")."""
        what = f"call {self.id!r} open"
        if self.why == ANSWERED_LATER:
            return f"{what}: its response (event {self.response_sequence}) is after the range"
        if self.why == PENDING_REQUEST:
            return f"{what}: its {self.request_kind} request is still pending"
        if self.why == LONG_RUNNING:
            names = {
                part.function_call.name
                for part in self.opened_by.content.parts
                if part.HasField("function_call") and part.function_call.id == self.id
            }
            client = sorted(names & _CLIENT_CALL_NAMES)
            if client:
                return f"{what}: the {client[0]} call is still pending, the client has not answered"
            return f"{what}: it is long-running and still pending, its response is still to come"
        if self.why == NEWEST_INVOCATION:
            return (
                f"{what}: invocation {self.newest!r} made it and is the newest, so it may still "
                "answer it"
            )
        if self.response_sequence:
            return (
                f"{what}: nothing after event {self.opened_by.sequence} answers it (the response "
                f"in event {self.response_sequence} does not follow it)"
            )
        return (
            f"the request for call {self.id!r} open: nothing answers it, and no call with its id "
            "is made in or after the range (only such a call could be ruled dead)"
        )


def still_open(
    covered: Sequence[event_pb2.Event], all_events: Sequence[event_pb2.Event]
) -> list[OpenObligation]:
    """What a range leaves open, by id (empty: the range may be summarised).

    ``covered`` is a non-empty run of raw events of ``all_events``, the whole scoped log (with
    rewinds applied) the range was chosen from, in log order. Open obligations are the ones
    :func:`longest_self_contained_prefix` tracks, less the calls the dead-call rule proves can
    never be answered, judged over every raw event from the range's first one to the end of the
    log: any window the planner trims starts at its range's first event and ends by the log's
    end, so whatever range it plans is accepted here (the relaxation's conditions only choose
    among safe prefixes)."""
    fates = _fates(all_events)
    first, last = covered[0].sequence, covered[-1].sequence
    tail = [
        event
        for event in all_events
        if event.sequence >= first and not event.actions.HasField("compaction")
    ]
    left_open = open_obligations(covered, fates.dead(tail))
    if not left_open:
        return []
    opened_by: dict[str, event_pb2.Event] = {}
    for event in covered:
        for opened in call_ids(event) | _requests(event):
            opened_by[opened] = event
    found = []
    for call_id in sorted(left_open):
        opener = opened_by[call_id]
        after = next(
            (
                event.sequence
                for event in all_events
                if event.sequence > last and call_id in _resolved_response_ids(event)
            ),
            0,
        )
        if after:
            found.append(OpenObligation(call_id, ANSWERED_LATER, opener, after))
        elif call_id in fates.pending:
            found.append(
                OpenObligation(
                    call_id, PENDING_REQUEST, opener, request_kind=fates.pending[call_id]
                )
            )
        elif call_id in fates.long_running:
            found.append(OpenObligation(call_id, LONG_RUNNING, opener))
        elif fates.newest and any(
            event.invocation_id == fates.newest and call_id in call_ids(event) for event in tail
        ):
            found.append(OpenObligation(call_id, NEWEST_INVOCATION, opener, newest=fates.newest))
        else:
            before = max(
                (
                    event.sequence
                    for event in all_events
                    if event.sequence <= opener.sequence
                    and call_id in _resolved_response_ids(event)
                ),
                default=0,
            )
            found.append(OpenObligation(call_id, NOT_FOLLOWED, opener, before))
    return found


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
