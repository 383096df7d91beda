"""``include_contents=NONE``: the current turn only (section 6.9), checked against ADK."""

from __future__ import annotations

import pytest
from google.adk.events.event_actions import EventActions

from contextengine.core.context import IncludeContents
from tests.core.context.adk_compare import adk_options, assert_matches_adk
from tests.core.context.builders import call, describe, event, response, text

pytestmark = pytest.mark.unit

TURN = adk_options(agent_name="agent", include_contents=IncludeContents.NONE)


def test_current_turn_spec_example_old_q_old_a_new_q_fc_fr() -> None:
    events = [
        event(1, "user", text("old q"), inv="i1"),
        event(2, "agent", text("old a"), inv="i1"),
        event(3, "user", text("new q"), inv="i2"),
        event(4, "agent", call("f", "c1"), inv="i2"),
        event(5, "agent", response("f", "c1", r=1), inv="i2"),
    ]
    assert describe(assert_matches_adk(events, TURN)) == [
        "user: new q",
        "model: FC f({})#c1",
        "user: FR f={'r': 1}#c1",
    ]


def test_posted_back_result_extends_the_turn_to_its_call() -> None:
    events = [
        event(1, "user", text("old q"), inv="i1"),
        event(2, "agent", text("old a"), inv="i1"),
        event(3, "user", text("start job"), inv="i2"),
        event(4, "agent", call("lr", "c1"), inv="i2", long_running_tool_ids={"c1"}),
        event(5, "agent", response("lr", "c1", s="pending"), inv="i2"),
        event(6, "user", text("meanwhile"), inv="i3"),
        event(7, "agent", text("sure"), inv="i3"),
        event(8, "user", response("lr", "c1", s="done"), inv="i4"),
    ]
    assert describe(assert_matches_adk(events, TURN)) == [
        "user: start job",
        "model: FC lr({})#c1",
        "user: FR lr={'s': 'done'}#c1",
    ]


def test_other_agent_turn_starts_the_turn() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "other", text("handing over")),
        event(3, "agent", text("on it")),
    ]
    contents = assert_matches_adk(events, TURN)
    assert len(contents) == 2
    assert contents[0].parts[1].text.startswith("[other] said:")


def test_direct_transfer_does_not_start_the_turn() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "root", call("transfer_to_agent", "t1", agent_name="agent")),
        event(
            3,
            "root",
            response("transfer_to_agent", "t1"),
            actions=EventActions(transfer_to_agent="agent"),
        ),
        event(4, "agent", text("hello")),
    ]
    contents = assert_matches_adk(events, TURN)
    assert describe(contents)[0] == "user: q"
    assert len(contents) == 4


def test_no_anchor_gives_no_contents() -> None:
    events = [event(1, "agent", text("only me")), event(2, "user", text("hidden"), node_path="n@1")]
    assert assert_matches_adk(events, TURN) == []
    assert assert_matches_adk([], TURN) == []


def test_anchor_must_be_visible_to_the_branch() -> None:
    options = adk_options(
        agent_name="agent", branch="root.a", include_contents=IncludeContents.NONE
    )
    events = [
        event(1, "user", text("for a")),
        event(2, "other", text("in b"), branch="root.b"),
        event(3, "agent", text("answer"), branch="root.a"),
    ]
    assert describe(assert_matches_adk(events, options)) == ["user: for a", "model: answer"]


def test_tool_sub_branch_message_is_not_an_anchor() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("tool", "c1")),
        event(3, "helper", text("progress"), branch="tool@c1"),
        event(4, "agent", response("tool", "c1", r=1)),
    ]
    assert describe(assert_matches_adk(events, TURN)) == [
        "user: q",
        "model: FC tool({})#c1",
        "user: FR tool={'r': 1}#c1",
    ]


def test_rewinds_apply_to_the_slice_only() -> None:
    # the walk ignores rewinds, and the rewind in the slice names an invocation before the
    # slice, so it removes only itself: a rewound message reaches the current turn (ADK quirk)
    events = [
        event(1, "user", text("a"), inv="i1"),
        event(2, "user", text("b"), inv="i2"),
        event(3, "user", inv="r", actions=EventActions(rewind_before_invocation_id="i1")),
    ]
    assert describe(assert_matches_adk(events, TURN)) == ["user: b"]
    assert assert_matches_adk(events, adk_options(agent_name="agent")) == []


def test_other_agents_thoughts_are_never_shown_in_the_current_turn() -> None:
    events = [event(1, "user", text("q")), event(2, "other", text("hmm", thought=True), text("a"))]
    options = adk_options(
        agent_name="agent",
        include_contents=IncludeContents.NONE,
        include_thoughts_from_other_agents=True,
    )
    contents = assert_matches_adk(events, options)  # ADK's helper compares with thoughts off
    assert all("thought:" not in p.text for p in contents[-1].parts)
