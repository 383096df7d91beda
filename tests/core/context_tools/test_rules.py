"""The rules every edit is checked against: each refusal, named, with what to do instead."""

from __future__ import annotations

import dataclasses

import pytest

from contextengine.core.context_tools import (
    EditRefusedError,
    check_hide,
    check_pin,
    check_summarize,
    check_unpin,
)
from contextengine.v1 import content_pb2, event_pb2
from tests.core.context_tools.log import BULK, ON, Log, long_session

pytestmark = pytest.mark.unit


def refused(rule: str, call: object, *args: object, **kw: object) -> EditRefusedError:
    with pytest.raises(EditRefusedError) as caught:
        call(*args, **kw)  # type: ignore[operator]
    assert caught.value.rule == rule, caught.value.message
    return caught.value


def test_hide_a_finished_call_and_its_answer() -> None:
    log = long_session()
    edit = check_hide(log.view("i4"), ON, 2, 3, "")
    assert edit.hide.range.first == 2
    assert edit.hide.range.last == 3
    assert edit.hide.stub == "They held results of lookup (" + edit.hide.stub.split("(")[1]
    assert check_hide(log.view("i4"), ON, 2, 3, " my words ").hide.stub == "my words"


def test_a_range_keeps_a_call_with_its_answer() -> None:
    log = long_session()
    error = refused("splits_call", check_hide, log.view("i4"), ON, 2, 2, "")
    assert "end the range at 3" in error.message
    error = refused("splits_call", check_hide, log.view("i4"), ON, 3, 4, "")
    assert "start the range at 2" in error.message


def test_the_current_turn_and_protected_turns_are_untouchable() -> None:
    log = long_session()
    error = refused("current_turn", check_hide, log.view("i4"), ON, 9, 13, "")
    assert "ends before 13" in error.message
    # without the invocation in the log, the current turn starts at the latest user message
    refused("current_turn", check_hide, log.view("unknown"), ON, 13, 13, "")
    protected = dataclasses.replace(ON, protected_turns=1)
    refused("protected_turn", check_hide, log.view("i4"), protected, 10, 11, "")
    assert check_hide(log.view("i4"), protected, 6, 7, "")


def test_pinned_events_are_never_hidden_or_summarized() -> None:
    log = long_session()
    log.events[6].pinned = True  # event 7, pinned when appended
    refused("pinned", check_hide, log.view("i4"), ON, 6, 7, "")
    refused("pinned", check_summarize, log.view("i4"), ON, 5, 8, "short")


def test_pins_made_by_the_tool_count_and_unpin_undoes_only_them() -> None:
    log = long_session()
    pin = check_pin(log.view("i4"), ON, 3, 3)
    log.answer("p", "context_pin", {"ok": True}, "i4").__index__()
    log.events[-1].context_edits.append(pin)
    refused("pinned", check_hide, log.view("i4"), ON, 2, 3, "")
    refused("already_pinned", check_pin, log.view("i4"), ON, 3, 3)
    unpin = check_unpin(log.view("i4"), ON, 1, 4)
    assert unpin.unpin.first == 1
    log.events[6].pinned = True
    error = refused("not_pinned", check_unpin, log.view("i4"), ON, 7, 7)
    assert "pinned by the application" in error.message


def test_unanswered_calls_and_requests_are_never_taken() -> None:
    log = Log()
    log.user("start", "i1")
    log.call("lr", "long_job", {}, "i1", long_running_tool_ids=["lr"])
    log.say("working on it " * 100, "i1")
    log.call("cf", "adk_request_confirmation", {"x": 1}, "i1")
    log.say("waiting " * 100, "i1")
    log.user("next", "i2")
    error = refused("pending_call", check_hide, log.view("i2"), ON, 2, 3, "")
    assert "long-running call long_job" in error.message
    refused("unanswered_request", check_hide, log.view("i2"), ON, 4, 5, "")
    assert check_hide(log.view("i2"), ON, 3, 3, "")


def test_small_edits_and_too_much_hidden_are_refused() -> None:
    log = long_session()
    error = refused("too_small", check_hide, log.view("i4"), ON, 1, 1, "")
    assert "choose a larger range" in error.message
    refused(
        "hidden_limit",
        check_hide,
        log.view("i4"),
        dataclasses.replace(ON, max_hidden_fraction=0.1),
        2,
        3,
        "",
    )
    refused(
        "too_small",
        check_hide,
        log.view("i4"),
        dataclasses.replace(ON, min_tokens_freed=1),
        1,
        1,
        "",
    )


def test_edits_per_invocation_are_limited() -> None:
    log = long_session()
    one = dataclasses.replace(ON, max_edits_per_invocation=1)
    edit = check_hide(log.view("i4"), one, 2, 3, "")
    log.answer("h", "context_hide", {"ok": True}, "i4")
    log.events[-1].context_edits.append(edit)
    error = refused("edit_limit", check_hide, log.view("i4"), one, 6, 7, "")
    assert "in a later turn" in error.message
    refused("edit_limit", check_pin, log.view("i4"), one, 4, 4)
    # another invocation has its own budget
    assert check_hide(log.view("i5"), one, 6, 7, "")


def test_hidden_ranges_are_taken_whole_or_not_at_all() -> None:
    log = long_session()
    edit = check_hide(log.view("i4"), ON, 2, 3, "")
    log.answer("h", "context_hide", {"ok": True}, "i4")
    log.events[-1].context_edits.append(edit)
    refused("already_hidden", check_hide, log.view("i4"), ON, 1, 4, "")
    refused("splits_hidden_range", check_hide, log.view("i4"), ON, 3, 4, "")
    refused("hidden", check_pin, log.view("i4"), ON, 2, 3)
    # a summary may take the hidden range whole: it counts as its stub
    plan = check_summarize(
        log.view("i4"), dataclasses.replace(ON, min_tokens_freed=1), 1, 4, "asked, looked up"
    )
    assert [event.sequence for event in plan.covered] == [1, 2, 4]


def summary(log: Log, first: int, last: int) -> int:
    event = event_pb2.Event(author="user", invocation_id="sum")
    compaction = event.actions.compaction
    compaction.start_timestamp = float(first)
    compaction.end_timestamp = float(last)
    compaction.compacted_content.CopyFrom(
        content_pb2.Content(role="model", parts=[content_pb2.Part(text="summary")])
    )
    return log.add(event)


def test_summarized_events_and_summaries_are_not_edited() -> None:
    log = long_session()
    del log.events[-1]  # the current turn's question comes after the summary
    at = summary(log, 1, 4)
    log.user("question of i4", "i4")
    view = log.view("i4")
    assert view.covered_by[2] == at
    error = refused("summarized", check_hide, view, ON, 2, 3, "")
    assert f"the summary at {at}" in error.message
    refused("summarized", check_pin, view, ON, 2, 2)
    refused("no_events", check_hide, log.view("i4"), ON, at, at, "")


def test_a_new_summary_rolls_up_earlier_ones_whole() -> None:
    log = long_session()
    del log.events[-1]
    at = summary(log, 1, 4)
    log.user("question of i4", "i4")
    wide = dataclasses.replace(ON, min_tokens_freed=1)
    plan = check_summarize(log.view("i4"), wide, 1, 8, "all of it")
    assert [e.sequence for e in plan.covered] == list(range(1, 9))
    error = refused("summarized", check_summarize, log.view("i4"), wide, 3, 8, "part")
    assert "events 1..4" in error.message
    # a summary sitting in a range it does not cover stays; a range around it is fine
    assert check_summarize(log.view("i4"), wide, 5, at, "turns 2 and 3")


def test_another_branch_or_scope_is_not_in_the_callers_context() -> None:
    log = Log()
    log.user("start", "i1")
    log.say("x " * 400, "i1", branch="root.other")
    log.say("y " * 400, "i1", branch="root")
    log.user("next", "i2")
    anything = dataclasses.replace(ON, max_hidden_fraction=1.0)
    refused("not_in_context", check_hide, log.view("i2", branch="root.me"), anything, 2, 2, "")
    assert check_hide(log.view("i2", branch="root.me"), anything, 3, 3, "")
    refused("not_in_context", check_hide, log.view("i2", scope="task"), ON, 1, 3, "")


def test_a_range_with_no_live_event() -> None:
    log = long_session()
    error = refused("no_events", check_pin, log.view("i4"), ON, 40, 50)
    assert "1..13" in error.message


def test_summarize_checks_the_compaction_rules_too() -> None:
    log = long_session()
    plan = check_summarize(log.view("i4"), ON, 1, 8, "Two questions, two lookups.")
    assert [e.sequence for e in plan.covered] == list(range(1, 9))
    refused("splits_call", check_summarize, log.view("i4"), ON, 1, 2, "x")
    big = "a summary longer than what it replaces " * 200
    refused("too_small", check_summarize, log.view("i4"), ON, 1, 4, big)
    assert BULK
