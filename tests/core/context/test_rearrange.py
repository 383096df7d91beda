"""Function call/response repair (section 6.7), checked against ADK."""

from __future__ import annotations

import pytest
from google.adk.events.event_actions import EventActions
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from tests.core.context.adk_compare import adk_options, assert_matches_adk
from tests.core.context.builders import call, describe, event, response, text

pytestmark = pytest.mark.unit

AGENT = adk_options(agent_name="agent")


def test_progress_updates_spec_example_10_50_100() -> None:
    events = [
        event(1, "user", text("go"), inv="i1"),
        event(2, "agent", call("job", "c1"), inv="i1", long_running_tool_ids={"c1"}),
        event(3, "agent", response("job", "c1", p="10%"), inv="i1"),
        event(4, "agent", text("working"), inv="i1"),
        event(5, "agent", response("job", "c1", p="50%"), inv="i1"),
        event(6, "agent", text("still"), inv="i1"),
        event(7, "agent", response("job", "c1", p="100%"), inv="i1"),
        event(8, "agent", text("finished"), inv="i1"),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: go",
        "model: FC job({})#c1",
        "user: FR job={'p': '100%'}#c1",
        "model: finished",
    ]


def test_replies_between_updates_of_other_invocations_stay() -> None:
    events = [
        event(1, "user", text("go"), inv="i1"),
        event(2, "agent", call("job", "c1"), inv="i1", long_running_tool_ids={"c1"}),
        event(3, "agent", response("job", "c1", p="10%"), inv="i1"),
        event(4, "agent", text("other invocation"), inv="i2"),
        event(5, "agent", response("job", "c1", p="100%"), inv="i1"),
        event(6, "agent", text("done"), inv="i1"),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: go",
        "model: FC job({})#c1",
        "user: FR job={'p': '100%'}#c1",
        "model: other invocation",
        "model: done",
    ]


def test_replies_after_a_confirmation_request_stay() -> None:
    confirm = EventActions(requested_tool_confirmations={"c1": ToolConfirmation(hint="ok?")})
    events = [
        event(1, "user", text("go"), inv="i1"),
        event(2, "agent", call("job", "c1"), inv="i1"),
        event(3, "agent", response("job", "c1", p="asked"), inv="i1", actions=confirm),
        event(4, "agent", text("waiting"), inv="i1"),
        event(5, "agent", response("job", "c1", p="done"), inv="i1"),
        event(6, "agent", text("end"), inv="i1"),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: go",
        "model: FC job({})#c1",
        "user: FR job={'p': 'done'}#c1",
        "model: waiting",
        "model: end",
    ]


def test_orphaned_responses_are_dropped() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", response("f", "nobody", r=1), response("g", "c1", r=2)),
        event(3, "agent", call("g", "c1")),
        event(4, "agent", response("g", "c1", r=3)),
        event(5, "agent", text("end")),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC g({})#c1",
        "user: FR g={'r': 3}#c1",
        "model: end",
    ]


def test_response_in_the_same_event_as_its_call_is_an_orphan() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("f", "c1"), response("f", "c1", r=1)),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == ["user: q"]


def test_idless_calls_pair_by_name() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("f")),
        event(3, "agent", response("f", r=1)),
        event(4, "agent", response("g", r=2)),  # no id-less call named g: orphan
        event(5, "agent", text("end")),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC f({})",
        "user: FR f={'r': 1}",
        "model: end",
    ]


def test_latest_response_spec_example_drops_everything_after_the_call() -> None:
    # the LR result arrives last: user messages typed while it was pending are discarded
    events = [
        event(1, "user", text("q"), inv="i1"),
        event(2, "agent", call("lr", "c1"), inv="i1", long_running_tool_ids={"c1"}),
        event(3, "agent", response("lr", "c1", s="pending"), inv="i1"),
        event(4, "user", text("meanwhile"), inv="i2"),
        event(5, "agent", text("ok"), inv="i2"),
        event(6, "user", response("lr", "c1", s="done"), inv="i3"),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC lr({})#c1",
        "user: FR lr={'s': 'done'}#c1",
    ]


def test_latest_response_answering_two_call_events_is_split() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("a", "ca"), long_running_tool_ids={"ca"}),
        event(3, "agent", response("a", "ca", s="pending")),
        event(4, "agent", call("b", "cb"), long_running_tool_ids={"cb"}),
        event(5, "agent", text("meanwhile")),
        event(6, "user", response("a", "ca", s="a"), response("b", "cb", s="b"), text("note")),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC a({})#ca",
        "user: FR a={'s': 'a'}#ca",
        "model: FC b({})#cb",
        "user: FR b={'s': 'b'}#cb | note",
    ]


def test_latest_response_right_after_its_call_is_left_alone() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("f", "c1")),
        event(3, "agent", response("f", "c1", r=1)),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC f({})#c1",
        "user: FR f={'r': 1}#c1",
    ]


def test_parallel_responses_are_merged_after_their_call() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("a", "ca"), call("b", "cb")),
        event(3, "agent", response("a", "ca", r=1)),
        event(4, "agent", response("b", "cb", r=2)),
        event(5, "agent", text("end")),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC a({})#ca | FC b({})#cb",
        "user: FR a={'r': 1}#ca | FR b={'r': 2}#cb",
        "model: end",
    ]


def test_reused_call_ids_pair_with_the_nearest_call() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("f", "c1", n=1)),
        event(3, "agent", response("f", "c1", r=1)),
        event(4, "agent", call("f", "c1", n=2)),
        event(5, "agent", response("f", "c1", r=2)),
        event(6, "agent", text("end")),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC f({'n': 1})#c1",
        "user: FR f={'r': 1}#c1",
        "model: FC f({'n': 2})#c1",
        "user: FR f={'r': 2}#c1",
        "model: end",
    ]


def test_unanswered_calls_are_dropped_unless_long_running() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", text("calling"), call("f", "c1"), call("g", "c2"), call("h")),
        event(3, "agent", call("lr", "c3"), long_running_tool_ids={"c3"}),
        event(4, "agent", call("x", "c4")),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: calling | FC h({})",
        "model: FC lr({})#c3",
    ]


def test_mixed_call_and_response_event_loses_its_call() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("f", "c1")),
        event(3, "agent", response("f", "c1", r=1), call("g", "c2")),
        event(4, "agent", response("g", "c2", r=2)),
        event(5, "agent", text("end")),
    ]
    # the mixed event is not indexed as a call event: g's response finds no call and vanishes,
    # the mixed event answers f, and its unanswered call of g is dropped
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC f({})#c1",
        "model: FR f={'r': 1}#c1",
        "model: end",
    ]


def test_empty_args_and_signatures_are_echoed() -> None:
    signed = types.Part(
        function_call=types.FunctionCall(name="f", id="c1", args={}), thought_signature=b"sig"
    )
    events = [
        event(1, "user", text("q")),
        event(2, "agent", signed),
        event(3, "agent", response("f", "c1")),
    ]
    contents = assert_matches_adk(events, AGENT)
    assert contents[1].parts[0].thought_signature == b"sig"


def test_response_event_answering_two_call_events_is_repeated_after_each() -> None:
    # ADK places the whole response event after every call event it answers
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("a", "c1")),
        event(3, "agent", call("b", "c2")),
        event(4, "agent", response("a", "c1", r=1), response("b", "c2", r=2)),
        event(5, "agent", text("end")),
    ]
    both = "user: FR a={'r': 1}#c1 | FR b={'r': 2}#c2"
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC a({})#c1",
        both,
        "model: FC b({})#c2",
        both,
        "model: end",
    ]
