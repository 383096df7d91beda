"""The fold of the model's edits into the log, and the edits an appended answer records.

* a hidden range shows as one stub at its first event's place; a rewind before the answer that
  recorded it brings the events back; a log without edits is the same list object (so every
  context of such a log is google-adk's, which the parity suites check);
* incremental views equal a rebuild at every step of seeded odd sessions with edits inserted
  at random (valid hides found by the rules, pins);
* on append, only answers of real edit calls that say ``ok`` and still hold are recorded.
"""

from __future__ import annotations

import dataclasses
import logging
import random

import pytest

from contextengine.core.compaction import plan_sliding_window, plan_token_threshold
from contextengine.core.context import (
    ContextOptions,
    IncludeContents,
    apply_context_edits,
    build_contents,
    is_stub,
)
from contextengine.core.context.incremental import View, materialize
from contextengine.core.context_tools import (
    Caller,
    EditRefusedError,
    SessionView,
    check_hide,
    recorded_edits,
)
from contextengine.core.tokens import CharsPerFourCounter
from contextengine.v1 import config_pb2, event_pb2
from tests.core.context.adk_compare import to_proto
from tests.core.context.random_sessions import random_options, random_session
from tests.core.context_tools.log import ON, Log, answer_event, long_session, measure

pytestmark = pytest.mark.unit

COUNTER = CharsPerFourCounter()
REFUSED: dict[str, int] = {}


def hide(log: Log, first: int, last: int, invocation: str = "i4", stub: str = "") -> int:
    edit = check_hide(log.view(invocation), ON, first, last, stub)
    at = log.answer(f"h{first}", "context_hide", {"ok": True}, invocation)
    log.events[-1].context_edits.append(edit)
    return at


def texts(log: Log) -> list[str]:
    options = ContextOptions(agent_name="agent")
    return [
        part.text or part.function_call.name or part.function_response.name
        for content in build_contents(log.events, options)
        for part in content.parts
    ]


def test_a_log_without_edits_is_left_as_it_is() -> None:
    log = long_session()
    assert apply_context_edits(log.events) is log.events


def test_a_hidden_range_is_one_stub_in_its_place() -> None:
    log = long_session()
    hide(log, 6, 7, stub="Weather rows for Oslo.")
    edited = apply_context_edits(log.events)
    stub = next(event for event in edited if is_stub(event))
    assert stub.sequence == 6
    assert stub.timestamp == 6.0
    assert stub.author == "user"
    assert [event.sequence for event in edited][:8] == [1, 2, 3, 4, 5, 6, 8, 9]
    shown = texts(log)
    assert shown[5].startswith("[Hidden from this context at the model's request: events 6 to 7.")
    assert "Weather rows for Oslo." in shown[5]
    assert "context_expand with sequence 6" in shown[5]
    assert "answer of i2" in shown[6]
    # the raw log is unchanged
    assert log.events[5].content.parts[0].function_call.name == "lookup"


def test_a_rewind_before_the_answer_undoes_the_edit() -> None:
    log = long_session()
    before = texts(log)
    hide(log, 2, 3)
    assert texts(log) != before
    log.add(event_pb2.Event(author="user", invocation_id="i5"))
    log.events[-1].actions.rewind_before_invocation_id = "i4"
    assert apply_context_edits(log.events) == log.events or not any(
        is_stub(event) for event in apply_context_edits(log.events)
    )
    assert texts(log) == before[:-1]  # the rewind also removed i4's question


def test_pins_made_by_the_tool_reach_the_compaction_planner_only() -> None:
    log = long_session()
    log.answer("p", "context_pin", {"ok": True}, "i4")
    log.events[-1].context_edits.append(
        event_pb2.ContextEdit(pin=event_pb2.SequenceRange(first=3, last=4))
    )
    pinned = apply_context_edits(log.events)
    assert [event.sequence for event in pinned if event.pinned] == [3, 4]
    assert not log.events[2].pinned  # copies, never the log's own events
    assert apply_context_edits(log.events, pins=False) is log.events


def _with_random_edits(rng: random.Random, events: list[event_pb2.Event]) -> list[event_pb2.Event]:
    """``events`` with answers recording hides (valid ones, found by the rules) and pins
    inserted after random events (sequences renumbered)."""
    out: list[event_pb2.Event] = []
    for event in events:
        copy = event_pb2.Event()
        copy.CopyFrom(event)
        copy.sequence = len(out) + 1
        out.append(copy)
        if rng.random() >= 0.3 or len(out) < 2:
            continue
        invocation = f"edit-{len(out)}"
        view = SessionView(out, Caller("agent", None, None, invocation), measure)
        answer = answer_event(f"t{len(out)}", "context_hide", {"ok": True}, invocation)
        answer.timestamp = out[-1].timestamp
        answer.sequence = len(out) + 1
        # any size (a stub may be longer than what it hides), any share of the session
        limits = dataclasses.replace(ON, min_tokens_freed=-(10**9), max_hidden_fraction=1.0)
        before = min(len(out), view.turn_start - 1)
        if before < 1:
            continue
        edit = None
        for _ in range(8):  # a few tries at a range the rules accept
            first = rng.randrange(1, before + 1)
            last = rng.randrange(first, min(before, first + 4) + 1)
            try:
                edit = check_hide(view, limits, first, last, rng.choice(["", "gone"]))
                break
            except EditRefusedError as refused:
                REFUSED[refused.rule] = REFUSED.get(refused.rule, 0) + 1
        if edit is None:
            edit = event_pb2.ContextEdit(pin=event_pb2.SequenceRange(first=first, last=last))
        answer.context_edits.append(edit)
        out.append(answer)
    return out


@pytest.mark.parametrize("block", range(3))
def test_incremental_views_with_edits_equal_rebuilds(
    block: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    hides = 0
    for seed in range(block * 60, (block + 1) * 60):
        rng = random.Random(seed)
        events = _with_random_edits(rng, to_proto(random_session(rng, rng.randrange(2, 25))))
        hides += sum(1 for e in events for edit in e.context_edits if edit.HasField("hide"))
        options = random_options(rng)
        if rng.random() < 0.8:
            options = dataclasses.replace(options, include_contents=IncludeContents.DEFAULT)
        view: View | None = None
        for cut in range(1, len(events) + 1):
            view = materialize(events[:cut], options, COUNTER, view)
            fresh = build_contents(events[:cut], options)
            assert view.contents == fresh, f"seed {seed}, after {cut} events ({view.mode})"
    assert hides > 20, REFUSED  # the generator does reach the rules' accepted cases


# -- recording on append ---------------------------------------------------------------------


def pending(
    log: Log, call_id: str, name: str, args: dict[str, object], result: dict[str, object]
) -> event_pb2.Event:
    log.call(call_id, name, args, "i4")
    return answer_event(call_id, name, result, "i4")


def test_an_answer_records_the_edit_of_its_call() -> None:
    log = long_session()
    answer = pending(log, "x1", "context_hide", {"first": 2, "last": 3}, {"ok": True})
    (edit,) = recorded_edits(log.events, answer, ON, measure)
    assert edit.hide.range.first == 2
    assert edit.hide.stub.startswith("They held results of lookup")


def test_nothing_is_recorded_when_the_tools_are_off_or_the_answer_is_a_refusal() -> None:
    log = long_session()
    answer = pending(log, "x1", "context_hide", {"first": 2, "last": 3}, {"ok": False})
    assert recorded_edits(log.events, answer, ON, measure) == []
    answer = answer_event("x1", "context_hide", {"ok": True}, "i4")
    assert recorded_edits(log.events, answer, dataclasses.replace(ON, enabled=False), measure) == []


def test_a_forged_answer_records_nothing() -> None:
    log = long_session()
    # no call with this id in the log
    forged = answer_event("nope", "context_hide", {"ok": True}, "i4")
    assert recorded_edits(log.events, forged, ON, measure) == []
    # a call the rules refuse (the current turn), answered ok by the client
    answer = pending(log, "x2", "context_hide", {"first": 13, "last": 13}, {"ok": True})
    assert recorded_edits(log.events, answer, ON, measure) == []
    # an answer under another tool's name than its call's
    log.call("x3", "context_pin", {"first": 2}, "i4")
    renamed = answer_event("x3", "context_hide", {"ok": True}, "i4")
    assert recorded_edits(log.events, renamed, ON, measure) == []


def test_answers_in_one_event_are_checked_in_order() -> None:
    log = long_session()
    log.call("a", "context_hide", {"first": 2, "last": 3}, "i4")
    log.call("b", "context_hide", {"first": 1, "last": 4}, "i4")
    log.call("c", "context_pin", {"first": 8}, "i4")
    event = answer_event("a", "context_hide", {"ok": True}, "i4")
    for call_id, name in (("b", "context_hide"), ("c", "context_pin")):
        second = answer_event(call_id, name, {"ok": True}, "i4")
        event.content.parts.extend(second.content.parts)
    edits = recorded_edits(log.events, event, ON, measure)
    # the second hide overlaps the first, recorded before it in the same event
    assert [edit.WhichOneof("edit") for edit in edits] == ["hide", "pin"]


def test_a_summary_answer_records_the_summary_it_appended() -> None:
    log = long_session()
    log.call("s", "context_summarize", {"first": 1, "last": 4, "summary": "x"}, "i4")
    summary = event_pb2.Event(author="user", invocation_id="other")
    summary.actions.compaction.start_timestamp = 1.0
    summary.actions.compaction.end_timestamp = 4.0
    summary.actions.compaction.compacted_content.role = "model"
    at = log.add(summary)
    answer = answer_event("s", "context_summarize", {"ok": True, "summary_sequence": at}, "i4")
    (edit,) = recorded_edits(log.events, answer, ON, measure)
    assert edit.summary_sequence == at
    wrong = answer_event("s", "context_summarize", {"ok": True, "summary_sequence": 3}, "i4")
    assert recorded_edits(log.events, wrong, ON, measure) == []


# -- compaction keeps the model's edits --------------------------------------------------------


def test_compaction_plans_see_stubs_and_keep_pins() -> None:
    log = long_session()
    hide(log, 6, 7, stub="Rows of turn two.")
    log.answer("p", "context_pin", {"ok": True}, "i4")
    log.events[-1].context_edits.append(
        event_pb2.ContextEdit(pin=event_pb2.SequenceRange(first=10, last=11))
    )
    tokens = config_pb2.EventsCompactionConfig(token_threshold=1, event_retention_size=0)
    plan = plan_token_threshold(log.events, tokens, agent_name="agent").plan
    assert plan is not None
    window = [event.sequence for event in plan.covered]
    assert 6 in window
    assert 7 not in window
    assert any(is_stub(event) for event in plan.covered)
    assert not {10, 11} & set(window)  # the model's pin
    sliding = config_pb2.EventsCompactionConfig(compaction_interval=1, overlap_size=0)
    plan = plan_sliding_window(log.events, sliding).plan
    assert plan is not None
    assert not {10, 11} & {event.sequence for event in plan.covered}
