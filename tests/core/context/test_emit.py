"""Emitting contents (section 6.8): id stripping and the isolated agent's first turn."""

from __future__ import annotations

import pytest
from google.adk.events.event import Event
from google.genai import types

from contextengine.core.context import build_contents
from contextengine.v1 import content_pb2
from tests.core.context.adk_compare import adk_options, assert_matches_adk, to_proto
from tests.core.context.builders import call, describe, event, response, text

pytestmark = pytest.mark.unit

AGENT = adk_options(agent_name="agent")


def _pair(call_id: str) -> list[Event]:
    return [
        event(1, "user", text("q")),
        event(2, "agent", text("calling"), call("f", call_id, x=1)),
        event(3, "agent", response("f", call_id, y=2)),
    ]


def test_adk_ids_are_stripped() -> None:
    assert describe(assert_matches_adk(_pair("adk-123"), AGENT)) == [
        "user: q",
        "model: calling | FC f({'x': 1})",
        "user: FR f={'y': 2}",
    ]


def test_adk_ids_are_kept_when_preserved() -> None:
    options = adk_options(agent_name="agent", preserve_function_call_ids=True)
    assert describe(assert_matches_adk(_pair("adk-123"), options))[1:] == [
        "model: calling | FC f({'x': 1})#adk-123",
        "user: FR f={'y': 2}#adk-123",
    ]


def test_other_ids_are_always_kept() -> None:
    assert describe(assert_matches_adk(_pair("toolu_1"), AGENT))[2] == "user: FR f={'y': 2}#toolu_1"


def test_stripping_does_not_touch_the_input() -> None:
    events = to_proto(_pair("adk-1"))  # assert_matches_adk checks this too
    build_contents(events, AGENT)
    assert events[1].content.parts[1].function_call.id == "adk-1"


def test_unchanged_contents_are_shared_with_the_input() -> None:
    events = to_proto([event(1, "user", text("q"))])
    assert build_contents(events, AGENT)[0] is events[0].content


def test_isolation_scope_prepends_the_task_call_arguments() -> None:
    events = [
        event(1, "user", text("plan a trip")),
        event(
            2, "coordinator", call("task", "t1", días=3, goal="Paris", nested={"a": "é", "b": 1})
        ),
        event(3, "worker", text("working"), isolation_scope="t1"),
    ]
    options = adk_options(agent_name="worker", isolation_scope="t1")
    contents = assert_matches_adk(events, options)
    assert describe(contents) == [
        'user: {"días": 3, "goal": "Paris", "nested": {"a": "é", "b": 1}}',
        "model: working",
    ]


def test_known_deviation_task_arguments_are_written_with_sorted_keys() -> None:
    # ADK writes json.dumps(args) in the order the arguments were written; a protobuf Struct
    # keeps no order, so we sort the keys at every level
    events = to_proto([event(1, "c", call("task", "t1", z=1, a={"y": 2, "b": 3}))])
    contents = build_contents(events, adk_options(agent_name="w", isolation_scope="t1"))
    assert contents[0].parts[0].text == '{"a": {"b": 3, "y": 2}, "z": 1}'


def test_isolation_scope_falls_back_to_user_content() -> None:
    user_content = content_pb2.Content(role="model", parts=[content_pb2.Part(text="the input")])
    options = adk_options(agent_name="worker", isolation_scope="t9", user_content=user_content)
    events = [event(1, "worker", text("working"), isolation_scope="t9")]
    assert describe(assert_matches_adk(events, options)) == ["user: the input", "model: working"]


def test_isolation_scope_call_without_arguments_is_skipped() -> None:
    options = adk_options(agent_name="worker", isolation_scope="t1")
    events = [
        event(1, "coordinator", types.Part(function_call=types.FunctionCall(name="task", id="t1"))),
        event(2, "worker", text("working"), isolation_scope="t1"),
    ]
    assert describe(assert_matches_adk(events, options)) == ["model: working"]


def test_prepend_scope_content_can_be_left_out() -> None:
    events = to_proto(
        [
            event(1, "c", call("task", "t1", goal="x")),
            event(2, "w", text("hi"), isolation_scope="t1"),
        ]
    )
    options = adk_options(agent_name="w", isolation_scope="t1")
    assert len(build_contents(events, options)) == 2
    assert len(build_contents(events, options, prepend_scope_content=False)) == 1
