"""What an edit may touch: the rules every pin, unpin, hide and summary is checked against.

Each ``check_*`` returns the edit to record, or raises :class:`EditRefusedError` naming the rule broken
and saying what to do instead (the model reads it). The same checks run when CallContextTool
answers and again when the answer is appended (the log may have moved in between), so an edit
lands in the log only if it holds against the log it lands in.

The rules (docs/design/context-tools.md):

* a range must hold live events the caller can see (its isolation scope, its branch or one
  above it) and must not start or end inside a hidden range;
* hide and summarize never touch the current turn, the protected turns before it, a pinned
  event or an event already hidden; hide never touches what a summary covers (a summary event in
  a hidden range stays shown), and a new summary takes an earlier one whole (it rolls it up) or
  not at all; they keep
  calls and their answers together (a range may not split a call from its response) and never
  take a call that is not answered yet (a pending or long-running call, an unanswered
  confirmation or credential request);
* hide and summarize must free at least ``min_tokens_freed`` tokens; hidden ranges may stand
  for at most ``max_hidden_fraction`` of the visible events' tokens;
* one invocation makes at most ``max_edits_per_invocation`` edits.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextengine.core.compaction import CompactionPlan, client_plan
from contextengine.core.context import Hidden, stub_text
from contextengine.core.context_tools._view import Limits, SessionView
from contextengine.core.errors import ContextEngineError
from contextengine.v1 import content_pb2, event_pb2

__all__ = [
    "EditRefusedError",
    "check_edit_budget",
    "check_hide",
    "check_pin",
    "check_summarize",
    "check_unpin",
    "derived_stub",
]

_CLIENT_REQUESTS = frozenset(
    {"adk_request_confirmation", "adk_request_credential", "adk_request_input"}
)


class EditRefusedError(Exception):
    """A call the engine answers with ``ok`` false: ``rule`` (snake_case) and a message that
    says what to do instead."""

    def __init__(self, rule: str, message: str, **metadata: object) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message
        self.metadata = {key: str(value) for key, value in metadata.items()}


def _span(first: int, last: int) -> str:
    return f"event {first}" if first == last else f"events {first}..{last}"


def check_edit_budget(view: SessionView, limits: Limits, earlier: int = 0) -> None:
    """EDIT_LIMIT when the caller's invocation has made its edits (``earlier``: edits made
    before this one in the same answer, not yet in the log)."""
    made = view.edits_in_invocation() + earlier
    if made >= limits.max_edits_per_invocation:
        raise EditRefusedError(
            "edit_limit",
            f"this turn has made {made} context edits, the most one turn may make "
            f"({limits.max_edits_per_invocation}); go on with the task and edit in a later turn",
            limit=limits.max_edits_per_invocation,
        )


def _range_events(view: SessionView, first: int, last: int) -> list[event_pb2.Event]:
    events = view.in_range(first, last)
    if not events:
        end = view.log[-1].sequence if view.log else 0
        raise EditRefusedError(
            "no_events",
            f"no event of this session lies in {_span(first, last)} (its events are 1..{end}); "
            "call context_status for the sequence numbers of your context",
            first=first,
            last=last,
        )
    for event in events:
        if not view.visible(event):
            raise EditRefusedError(
                "not_in_context",
                f"event {event.sequence} belongs to another agent's part of the session and is "
                "not in your context; choose a range of your own events (context_status lists "
                "them)",
                sequence=event.sequence,
            )
    for end, name in ((first, "first"), (last, "last")):
        hidden = view.hidden_at(end)
        if hidden is not None and not (hidden.first >= first and hidden.last <= last):
            raise EditRefusedError(
                "splits_hidden_range",
                f"{name} ({end}) lies inside the hidden range {hidden.first}..{hidden.last}; "
                "a range takes a hidden range whole or not at all",
                sequence=end,
            )
    return events


def check_pin(view: SessionView, limits: Limits, first: int, last: int) -> event_pb2.ContextEdit:
    """The pin of ``first``..``last``, or a refusal."""
    events = _range_events(view, first, last)
    for event in events:
        summary = view.covered_by.get(event.sequence)
        if summary is not None:
            raise EditRefusedError(
                "summarized",
                f"event {event.sequence} is already summarized (the summary at {summary}); a pin "
                "keeps events out of future summaries only. Read it with context_expand",
                sequence=event.sequence,
                summary_sequence=summary,
            )
        hidden = view.hidden_at(event.sequence)
        if hidden is not None:
            raise EditRefusedError(
                "hidden",
                f"event {event.sequence} is hidden ({hidden.first}..{hidden.last}); pin events "
                "that are in your context",
                sequence=event.sequence,
            )
    if all(view.pinned(event) for event in events):
        raise EditRefusedError(
            "already_pinned",
            f"{_span(first, last)} {'is' if first == last else 'are'} pinned already; nothing "
            "to do",
        )
    check_edit_budget(view, limits)
    return event_pb2.ContextEdit(pin=event_pb2.SequenceRange(first=first, last=last))


def check_unpin(view: SessionView, limits: Limits, first: int, last: int) -> event_pb2.ContextEdit:
    """The unpin of ``first``..``last``, or a refusal."""
    events = _range_events(view, first, last)
    by_tool = [event for event in events if event.sequence in view.edits.pinned]
    if not by_tool:
        stays = [event.sequence for event in events if event.pinned]
        why = (
            f"; event {stays[0]} was pinned by the application when it was recorded, and "
            "that pin stays"
            if stays
            else ""
        )
        raise EditRefusedError(
            "not_pinned",
            f"nothing in {_span(first, last)} was pinned with context_pin{why}",
        )
    check_edit_budget(view, limits)
    return event_pb2.ContextEdit(unpin=event_pb2.SequenceRange(first=first, last=last))


def _check_removable(
    view: SessionView, limits: Limits, first: int, last: int, what: str
) -> list[event_pb2.Event]:
    """The events of a range that hide or summarize may take out of the context."""
    events = _range_events(view, first, last)
    protected = view.protected_from(limits.protected_turns)
    for event in events:
        sequence = event.sequence
        if sequence >= view.turn_start:
            raise EditRefusedError(
                "current_turn",
                f"event {sequence} belongs to the current turn (from event {view.turn_start} "
                f"on), which no edit may {what}; choose a range that ends before "
                f"{view.turn_start}",
                sequence=sequence,
            )
        if sequence >= protected:
            raise EditRefusedError(
                "protected_turn",
                f"event {sequence} belongs to the {limits.protected_turns} most recent turns, "
                f"which this application protects; choose a range that ends before {protected}",
                sequence=sequence,
            )
        if view.is_summary(event):
            # a summary sitting in the range stays as it is (hide), or is rolled up by the new
            # one when all it covers lies in the range (summarize)
            span = view.covers(sequence)
            if what == "summarize" and span is not None and _straddles(span, first, last):
                raise EditRefusedError(
                    "contains_summary",
                    f"event {sequence} is a summary of events {span[0]}..{span[1]}; a new "
                    "summary takes an earlier one whole: choose a range from "
                    f"{min(first, span[0])} to {max(last, span[1])}, or one clear of it",
                    sequence=sequence,
                )
            continue
        summary = view.covered_by.get(sequence)
        if summary is not None:
            span = view.covers(summary)
            assert span is not None
            if what != "summarize" or not first <= span[0] <= span[1] <= last:
                how = (
                    "take its events whole (a new summary rolls it up) or not at all: events "
                    f"{span[0]}..{span[1]}"
                    if what == "summarize"
                    else "leave them out"
                )
                raise EditRefusedError(
                    "summarized",
                    f"event {sequence} is already summarized by the summary at {summary}; {how}",
                    sequence=sequence,
                    summary_sequence=summary,
                )
        if view.pinned(event):
            raise EditRefusedError(
                "pinned",
                f"event {sequence} is pinned; leave it out of the range, or unpin it first "
                "(context_unpin) if you no longer need it",
                sequence=sequence,
            )
    _check_calls(view, events, first, last, what)
    return events


def _straddles(span: tuple[int, int], first: int, last: int) -> bool:
    """Whether ``span`` lies partly inside ``first``..``last`` and partly outside."""
    inside = first <= span[0] and span[1] <= last
    outside = span[1] < first or span[0] > last
    return not inside and not outside


def _check_calls(
    view: SessionView, events: Sequence[event_pb2.Event], first: int, last: int, what: str
) -> None:
    """Calls and their answers stay together, and nothing unanswered is taken."""
    answered_at: dict[str, int] = {}
    called_at: dict[str, int] = {}
    for event in view.live:
        for part in event.content.parts:
            if part.HasField("function_call") and part.function_call.id:
                called_at.setdefault(part.function_call.id, event.sequence)
            if part.HasField("function_response") and part.function_response.id:
                answer = part.function_response.id
                if answer not in event.actions.requested_tool_confirmations and (
                    answer not in event.actions.requested_auth_configs
                ):
                    answered_at[answer] = event.sequence
    for event in events:
        long_running = set(event.long_running_tool_ids)
        for part in event.content.parts:
            if part.HasField("function_response") and part.function_response.id:
                called = called_at.get(part.function_response.id)
                if called is not None and called < first:
                    raise EditRefusedError(
                        "splits_call",
                        f"event {event.sequence} answers the call at event {called}, outside "
                        f"the range; start the range at {called} to {what} both",
                        sequence=event.sequence,
                        call_sequence=called,
                    )
            if not (part.HasField("function_call") and part.function_call.id):
                continue
            call = part.function_call
            answered = answered_at.get(call.id)
            if answered is None:
                if call.name in _CLIENT_REQUESTS:
                    rule, kind = "unanswered_request", f"the {call.name} request"
                elif call.id in long_running:
                    rule, kind = "pending_call", f"the long-running call {call.name}"
                else:
                    rule, kind = "pending_call", f"the call {call.name}"
                raise EditRefusedError(
                    rule,
                    f"event {event.sequence} holds {kind}, not answered yet; end the range "
                    f"before {event.sequence}",
                    sequence=event.sequence,
                    call_id=call.id,
                )
            if answered > last:
                raise EditRefusedError(
                    "splits_call",
                    f"the call {call.name} at event {event.sequence} is answered at event "
                    f"{answered}, outside the range; end the range at {answered} to {what} both",
                    sequence=event.sequence,
                    answer_sequence=answered,
                )
        for request in (
            *event.actions.requested_tool_confirmations,
            *event.actions.requested_auth_configs,
        ):
            if request not in answered_at or answered_at[request] <= event.sequence:
                raise EditRefusedError(
                    "unanswered_request",
                    f"event {event.sequence} asks the user for a confirmation or a credential "
                    f"that is not answered yet; end the range before {event.sequence}",
                    sequence=event.sequence,
                )


def _context_tokens(view: SessionView, events: Sequence[event_pb2.Event]) -> int:
    """Tokens ``events`` take in the context now: a hidden range counts as its stub, what a
    summary covers as the summary."""
    total = 0
    stubs: set[tuple[int, int]] = set()
    summaries: set[int] = set()
    for event in events:
        if view.is_summary(event):
            continue  # it stays, or (a summary of events in the range) counts as they do
        summary = view.covered_by.get(event.sequence)
        if summary is not None:
            if summary not in summaries:  # a summary counts once, for all it covers
                summaries.add(summary)
                shown = view.event(summary)
                total += view.tokens(shown) if shown is not None else 0
            continue
        hidden = view.hidden_at(event.sequence)
        if hidden is None:
            total += view.tokens(event)
        elif (hidden.recorded_at, hidden.first) not in stubs:
            stubs.add((hidden.recorded_at, hidden.first))
            total += _text_tokens(view, stub_text(hidden))
    return total


def _text_tokens(view: SessionView, text: str) -> int:
    return view.measure(
        event_pb2.Event(
            content=content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)])
        )
    )


def _check_freed(view: SessionView, limits: Limits, before: int, after: int, what: str) -> None:
    freed = before - after
    if freed < limits.min_tokens_freed:
        raise EditRefusedError(
            "too_small",
            f"{what} this range frees {max(freed, 0)} tokens, less than the "
            f"{limits.min_tokens_freed} worth an edit (an edit re-sends everything after it "
            "uncached); choose a larger range, or leave it",
            tokens_freed=max(freed, 0),
            min_tokens_freed=limits.min_tokens_freed,
        )


def derived_stub(view: SessionView, events: Sequence[event_pb2.Event]) -> str:
    """The engine's description of hidden events: their tools and their size."""
    tools: list[str] = []
    for event in events:
        for part in event.content.parts:
            name = ""
            if part.HasField("function_response"):
                name = part.function_response.name
            if name and name not in tools:
                tools.append(name)
    tokens = sum(view.tokens(event) for event in events)
    held = f"results of {', '.join(tools[:5])}" if tools else "conversation turns"
    return f"They held {held} ({tokens} tokens)."


def check_hide(
    view: SessionView, limits: Limits, first: int, last: int, stub: str, *, earlier: int = 0
) -> event_pb2.ContextEdit:
    """The hide of ``first``..``last`` (``stub``: the model's words, or "" for the engine's),
    or a refusal. ``earlier``: edits before this one in the same answer."""
    events = _check_removable(view, limits, first, last, "hide")
    for event in events:
        hidden = view.hidden_at(event.sequence)
        if hidden is not None:
            raise EditRefusedError(
                "already_hidden",
                f"event {event.sequence} is hidden already ({hidden.first}..{hidden.last})",
                sequence=event.sequence,
            )
    events = [event for event in events if not view.is_summary(event)]  # summaries stay
    if not events:
        raise EditRefusedError(
            "no_events",
            f"{_span(first, last)} holds only summaries, which hide leaves as they are; a new "
            "summary (context_summarize) can take them whole",
        )
    text = stub.strip() or derived_stub(view, events)
    stub_tokens = _text_tokens(view, stub_text(Hidden(first, last, text, 0)))
    tokens = sum(view.tokens(event) for event in events)
    _check_freed(view, limits, tokens, stub_tokens, "hiding")
    # of the raw events no summary covers: what the context would hold without hidden ranges
    unsummarized = [
        event
        for event in view.scoped()
        if not view.is_summary(event) and event.sequence not in view.covered_by
    ]
    visible_total = sum(view.tokens(event) for event in unsummarized)
    hidden_total = sum(
        view.tokens(event) for event in unsummarized if view.hidden_at(event.sequence)
    )
    if visible_total and (hidden_total + tokens) > limits.max_hidden_fraction * visible_total:
        raise EditRefusedError(
            "hidden_limit",
            f"hiding this range would hide {hidden_total + tokens} of the {visible_total} "
            "tokens of your unsummarized events, more than this application allows "
            f"({limits.max_hidden_fraction:.0%}); summarize instead (context_summarize)",
            max_hidden_fraction=limits.max_hidden_fraction,
        )
    check_edit_budget(view, limits, earlier)
    return event_pb2.ContextEdit(
        hide=event_pb2.HiddenRange(range=event_pb2.SequenceRange(first=first, last=last), stub=text)
    )


def check_summarize(
    view: SessionView, limits: Limits, first: int, last: int, summary: str, *, earlier: int = 0
) -> CompactionPlan:
    """The plan of the summary of ``first``..``last`` (``client_plan``'s, whose rules hold
    too), or a refusal. The summary event itself is built and appended by the caller."""
    events = _check_removable(view, limits, first, last, "summarize")
    before = _context_tokens(view, events)
    after = _text_tokens(view, summary)
    _check_freed(view, limits, before, after, "summarizing")
    check_edit_budget(view, limits, earlier)
    raw = [event for event in events if not view.is_summary(event)]
    if not raw:
        raise EditRefusedError(
            "no_events",
            f"{_span(first, last)} holds only summaries; choose a range of events",
        )
    # client_plan reads the log with the edits applied: a hidden range is its stub, at the
    # hidden range's first sequence
    last_hidden = view.hidden_at(raw[-1].sequence)
    try:
        plan = client_plan(
            view.log,
            first_sequence=raw[0].sequence,
            last_sequence=last_hidden.first if last_hidden is not None else raw[-1].sequence,
            rolls_up_sequence=0,
            isolation_scope=view.caller.isolation_scope,
            based_on_sequence=len(view.log),
        )
    except ContextEngineError as refused:
        raise EditRefusedError("not_self_contained", refused.message) from refused
    return plan
