"""Transcription folding (section 6.5), checked against ADK."""

from __future__ import annotations

import pytest
from google.adk.events.event import Event
from google.genai import types

from tests.core.context.adk_compare import adk_options, assert_matches_adk
from tests.core.context.builders import describe, event, text

pytestmark = pytest.mark.unit

OPTIONS = adk_options(agent_name="agent")


def _heard(ts: float, value: str, author: str = "user") -> Event:
    return event(ts, author, input_transcription=types.Transcription(text=value))


def _said(ts: float, value: str, author: str = "agent") -> Event:
    return event(ts, author, output_transcription=types.Transcription(text=value))


def test_transcription_spec_example_hel_lo_and_hi_there() -> None:
    events = [_heard(1, "hel"), _heard(2, "lo"), _said(3, "hi "), _said(4, "there")]
    assert describe(assert_matches_adk(events, OPTIONS)) == ["user: hello", "model: hi there"]


def test_transcription_runs_are_split_by_other_events() -> None:
    events = [_heard(1, "a"), event(2, "agent", text("x")), _heard(3, "b"), _heard(4, "c")]
    assert describe(assert_matches_adk(events, OPTIONS)) == ["user: a", "model: x", "user: bc"]


def test_transcription_continues_into_an_event_with_content() -> None:
    # the next event has content *and* an input transcription: the run goes on and its text
    # is emitted by the next content-less piece
    events = [
        _heard(1, "a"),
        event(2, "user", text("typed"), input_transcription=types.Transcription(text="t")),
        _heard(3, "b"),
    ]
    assert describe(assert_matches_adk(events, OPTIONS)) == ["user: typed", "user: ab"]


def test_empty_transcription_text_is_visible_but_emits_nothing() -> None:
    events = [_heard(1, ""), event(2, "user", text("q"))]
    assert describe(assert_matches_adk(events, OPTIONS)) == ["user: q"]


def test_transcribed_other_agent_speech_is_framed() -> None:
    events = [_said(1, "I am the other", author="other")]
    contents = assert_matches_adk(events, OPTIONS)
    assert contents[0].role == "user"
    assert "[other] said:" in contents[0].parts[1].text
