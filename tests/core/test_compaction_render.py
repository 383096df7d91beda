"""``render_events`` against google-adk 2.13's ``LlmEventSummarizer._format_events_for_prompt``.

Hypothesis draws lists of ADK events (texts, thoughts, empty texts, function calls and responses
with and without payloads, credential requests, compaction events carrying thoughts, payloads
around and far beyond the 2000-character cut, events without content or parts); each list is
rendered by ADK and, converted to protos through ``event_from_adk_json``, by the engine, and the
two texts must be equal.

Payload dicts have at most one key per level and hold integral numbers only: a proto ``Struct``
keeps neither key order nor the int/float distinction, a known deviation pinned elsewhere.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.core.adk_json import event_from_adk_json
from contextengine.core.compaction import render_events
from contextengine.core.compaction._render import MAX_TOOL_CONTENT_CHARS

pytestmark = pytest.mark.parity

T0 = 1_767_225_600.0
_AUTHORS = ("user", "root", "model", "coder")
_TOOLS = ("get_weather", "search", "adk_request_credential", "transfer_to_agent")
_KEYS = ("city", "query", "result", "k")
_TEXTS = (
    "hello",
    "Weather in Paris?",
    "line one\nline two",
    "   ",
    "café ☕ naïve",
    "{not a placeholder}",
    "It's 'quoted' and \"double\"",
)


class _NoLlm(BaseLlm):
    """ADK's summarizer needs a model to be built; rendering never calls it."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.model:  # always: rendering never gets here
            raise AssertionError("rendering must not call the model")
        yield LlmResponse()


_ADK = LlmEventSummarizer(llm=_NoLlm(model="none"))

_text = st.one_of(
    st.sampled_from(_TEXTS),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=12),
)
_scalars = st.one_of(
    _text,
    st.integers(min_value=-(2**40), max_value=2**40),
    st.booleans(),
    st.none(),
)
#: around the cut: "{'k': '<n chars>'}" is n + 9 characters long
_long_strings = st.integers(
    min_value=MAX_TOOL_CONTENT_CHARS - 20, max_value=MAX_TOOL_CONTENT_CHARS + 20
).map(lambda n: "é" * n) | st.just("z" * 5000)
_values = st.recursive(
    _scalars | _long_strings,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=1)
    ),
    max_leaves=5,
)
_payloads: st.SearchStrategy[dict[str, Any] | None] = st.one_of(
    st.none(),
    st.just({}),
    st.dictionaries(st.sampled_from(_KEYS), _values, min_size=1, max_size=1),
)


@st.composite
def _parts(draw: st.DrawFn) -> types.Part:
    kind = draw(st.sampled_from(("text", "thought", "call", "response", "text+call")))
    if kind == "text":
        return types.Part(text=draw(_text | st.just("")))
    if kind == "thought":
        return types.Part(text=draw(_text), thought=True)
    name = draw(st.sampled_from(_TOOLS))
    if kind == "response":
        response = types.FunctionResponse(id="c1", name=name, response=draw(_payloads))
        return types.Part(function_response=response)
    call = types.FunctionCall(
        id=draw(st.none() | st.just("adk-1")), name=name, args=draw(_payloads)
    )
    text = draw(_text) if kind == "text+call" else None
    return types.Part(text=text, function_call=call)


@st.composite
def _events(draw: st.DrawFn) -> list[Event]:
    events = []
    for n in range(draw(st.integers(min_value=0, max_value=8))):
        author = draw(st.sampled_from(_AUTHORS))
        shape = draw(st.sampled_from(("parts", "parts", "parts", "no-content", "no-parts")))
        content = None
        if shape != "no-content":
            parts = draw(st.lists(_parts(), min_size=1, max_size=4)) if shape == "parts" else []
            content = types.Content(role="user" if author == "user" else "model", parts=parts)
        actions = EventActions()
        if draw(st.booleans()) and draw(st.booleans()):  # a summary event, one time in four
            summary = types.Content(role="model", parts=[types.Part(text="an earlier summary")])
            actions = EventActions(
                compaction=EventCompaction(
                    start_timestamp=T0, end_timestamp=T0 + n, compacted_content=summary
                )
            )
        events.append(
            Event(
                id=f"ev-{n}",
                invocation_id=f"inv-{n // 3}",
                author=author,
                timestamp=T0 + n + 1,
                content=content,
                actions=actions,
            )
        )
    return events


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_events())
def test_render_matches_adk(events: list[Event]) -> None:
    protos = [event_from_adk_json(event.model_dump_json(exclude_none=True)) for event in events]
    assert render_events(protos) == _ADK._format_events_for_prompt(events)


def test_long_payloads_are_cut_like_adk() -> None:
    call = types.FunctionCall(name="search", args={"k": "é" * 3000})
    response = types.FunctionResponse(name="search", response={"k": "x" * 1991})
    events = [
        Event(
            author="root",
            timestamp=T0,
            content=types.Content(
                role="model",
                parts=[types.Part(function_call=call), types.Part(function_response=response)],
            ),
        )
    ]
    protos = [event_from_adk_json(event.model_dump_json(exclude_none=True)) for event in events]
    rendered = render_events(protos)
    assert rendered == _ADK._format_events_for_prompt(events)
    assert "... [truncated 1009 chars]" in rendered  # 3009 - 2000
    assert rendered.endswith("x" * 1991 + "'}")  # 2000 characters exactly: not cut
