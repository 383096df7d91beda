"""Event kinds and the author/branch/kind filter."""

from __future__ import annotations

import pytest

from contextengine.subscriptions.filters import EventMatcher, event_kinds, unknown_kinds
from contextengine.v1 import content_pb2, event_pb2, subscription_service_pb2 as spb

from .helpers import message

pytestmark = pytest.mark.unit


def with_parts(*parts: content_pb2.Part) -> event_pb2.Event:
    return event_pb2.Event(author="a", content=content_pb2.Content(role="model", parts=parts))


def call_part() -> content_pb2.Part:
    part = content_pb2.Part()
    part.function_call.name = "get_weather"
    return part


def response_part() -> content_pb2.Part:
    part = content_pb2.Part()
    part.function_response.name = "get_weather"
    return part


def test_kinds_of_content() -> None:
    assert event_kinds(message("hi")) == {spb.EVENT_KIND_MESSAGE}
    assert event_kinds(with_parts(call_part())) == {spb.EVENT_KIND_TOOL_CALL}
    assert event_kinds(with_parts(response_part())) == {spb.EVENT_KIND_TOOL_RESPONSE}
    mixed = with_parts(content_pb2.Part(text="let me check"), call_part(), call_part())
    assert event_kinds(mixed) == {spb.EVENT_KIND_MESSAGE, spb.EVENT_KIND_TOOL_CALL}
    media = content_pb2.Part()
    media.inline_data.mime_type = "image/png"
    assert event_kinds(with_parts(media)) == {spb.EVENT_KIND_MESSAGE}
    code = content_pb2.Part()
    code.executable_code.code = "print(1)"
    assert event_kinds(with_parts(code)) == {spb.EVENT_KIND_MESSAGE}
    assert event_kinds(with_parts(content_pb2.Part(text=""))) == {spb.EVENT_KIND_MESSAGE}
    transcribed = event_pb2.Event(author="user")
    transcribed.input_transcription.text = "hello"
    assert event_kinds(transcribed) == {spb.EVENT_KIND_MESSAGE}


def test_kinds_of_actions() -> None:
    state = message("x", state_delta={"k": 1})
    assert event_kinds(state) == {spb.EVENT_KIND_MESSAGE, spb.EVENT_KIND_STATE_CHANGE}
    summary = event_pb2.Event(author="user")
    summary.actions.compaction.start_timestamp = 1.0
    assert event_kinds(summary) == {spb.EVENT_KIND_COMPACTION}
    rewind = event_pb2.Event(author="user")
    rewind.actions.rewind_before_invocation_id = "inv-1"
    rewind.actions.state_delta.update({})
    assert event_kinds(rewind) == {spb.EVENT_KIND_REWIND}
    assert event_kinds(event_pb2.Event(author="user")) == frozenset()
    assert event_kinds(message("x", state_delta={})) == {spb.EVENT_KIND_MESSAGE}


def test_empty_matcher_matches_everything() -> None:
    matcher = EventMatcher.of()
    assert matcher.is_everything
    assert matcher.matches(event_pb2.Event())


@pytest.mark.parametrize(
    ("matcher", "expected"),
    [
        (EventMatcher.of(authors=["user"]), [True, False, True, False]),
        (EventMatcher.of(branches=[""]), [True, True, False, False]),
        (EventMatcher.of(branches=["root.a"]), [False, False, True, False]),
        (EventMatcher.of(kinds=[spb.EVENT_KIND_TOOL_CALL]), [False, False, False, True]),
        (
            EventMatcher.of(kinds=[spb.EVENT_KIND_TOOL_CALL, spb.EVENT_KIND_STATE_CHANGE]),
            [False, True, False, True],
        ),
        (EventMatcher.of(authors=["agent"], branches=["root.b"]), [False, False, False, True]),
        (EventMatcher.of(authors=["nobody"]), [False, False, False, False]),
    ],
)
def test_matchers(matcher: EventMatcher, expected: list[bool]) -> None:
    tool_call = with_parts(call_part())
    tool_call.author = "agent"
    tool_call.branch = "root.b"
    events = [
        message("no branch"),
        message("state", author="agent", state_delta={"k": 1}),
        message("on a", branch="root.a"),
        tool_call,
    ]
    assert [matcher.matches(event) for event in events] == expected


def test_unknown_kinds() -> None:
    assert unknown_kinds([spb.EVENT_KIND_MESSAGE, spb.EVENT_KIND_REWIND]) == []
    assert unknown_kinds([0, 1, 7, 99]) == [0, 7, 99]
