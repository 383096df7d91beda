"""ExtractiveSummarizer: sections, scoring, the rolled-up summary, the budget, speed."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from contextengine.compaction.summarizers.extractive import ExtractiveSummarizer
from contextengine.compaction.summarizers.summarizer import SummaryInput
from contextengine.core.compaction import render_events
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, event_pb2

pytestmark = pytest.mark.unit


def _event(author: str, *parts: content_pb2.Part, **fields: Any) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        author=author, content=content_pb2.Content(role=role, parts=list(parts)), **fields
    )


def _text(text: str, **fields: Any) -> content_pb2.Part:
    return content_pb2.Part(text=text, **fields)


def _call(name: str, **args: Any) -> content_pb2.Part:
    return content_pb2.Part(
        function_call=content_pb2.FunctionCall(name=name, args=dict_to_struct(args))
    )


def _result(name: str, **response: Any) -> content_pb2.Part:
    return content_pb2.Part(
        function_response=content_pb2.FunctionResponse(name=name, response=dict_to_struct(response))
    )


def _conversation() -> list[event_pb2.Event]:
    return [
        _event("user", _text("What is the weather in Paris tomorrow?")),
        _event(
            "root",
            _text("The user wants a forecast; I will call the tool.", thought=True),
            _text("Sure, let me look that up."),
            _call("get_weather", city="Paris"),
        ),
        _event("root", _result("get_weather", temp=21, sky="clear")),
        _event(
            "root",
            _text("Tomorrow in Paris it will be 21°C and clear. Do you want anything else?"),
        ),
        _event("user", _text("Book a table at Le Jules Verne for 2 at 8pm.")),
        _event("root", _call("book_table", people=2), _call("get_weather", city="Paris")),
        _event(
            "root",
            _text(
                "Your table at Le Jules Verne is booked for 2 people at 20:00. "
                "The confirmation code is `JV-4821`. Enjoy!"
            ),
        ),
    ]


async def _summary(events: list[event_pb2.Event], max_chars: int = 2000) -> str:
    summary = await ExtractiveSummarizer(max_chars).summarize(
        SummaryInput(events=events, conversation_history=render_events(events))
    )
    assert summary is not None
    assert summary.usage_metadata is None
    assert summary.content.role == "model"
    [part] = summary.content.parts
    return part.text


async def test_sections_requests_tools_and_facts() -> None:
    text = await _summary(_conversation())
    assert text == (
        "User requests:\n"
        "- What is the weather in Paris tomorrow?\n"
        "- Book a table at Le Jules Verne for 2 at 8pm.\n"
        "Tools called: get_weather (2), book_table (1)\n"
        "Key facts:\n"
        "- get_weather returned {'sky': 'clear', 'temp': 21}\n"
        "- Tomorrow in Paris it will be 21°C and clear.\n"
        "- Your table at Le Jules Verne is booked for 2 people at 20:00.\n"
        "- The confirmation code is `JV-4821`."
    )
    # thoughts, filler and small talk are not facts
    assert "forecast" not in text
    assert "Sure" not in text
    assert "Enjoy" not in text


async def test_previous_summary_is_kept_first_and_its_tool_counts_merged() -> None:
    first = await _summary(_conversation())
    seed = _event("model", _text(first))
    later = [
        seed,
        _event("user", _text("And on Sunday?")),
        _event("root", _call("get_weather", city="Paris", day="Sunday")),
        _event("root", _text("On Sunday Paris expects light rain and 17°C.")),
    ]
    text = await _summary(later)

    lines = text.splitlines()
    assert lines[0] == "Earlier summary:"
    assert "  - What is the weather in Paris tomorrow?" in lines
    assert "  - The confirmation code is `JV-4821`." in lines
    assert "Tools called: get_weather (3), book_table (1)" in lines
    assert not any(line.strip().startswith("Tools called") for line in lines[1:] if "  " in line)
    assert lines.index("User requests:") > lines.index("  - The confirmation code is `JV-4821`.")
    assert "- And on Sunday?" in lines
    assert "- On Sunday Paris expects light rain and 17°C." in lines


async def test_a_compaction_event_counts_as_earlier_summary() -> None:
    compaction = event_pb2.EventCompaction(
        start_timestamp=1.0,
        end_timestamp=2.0,
        compacted_content=content_pb2.Content(
            role="model", parts=[_text("The user is planning a trip to Rome.")]
        ),
    )
    summary_event = event_pb2.Event(
        author="user", actions=event_pb2.EventActions(compaction=compaction)
    )
    text = await _summary([summary_event, _event("user", _text("Flights on May 3?"))])
    assert text.splitlines()[:2] == ["Earlier summary:", "  The user is planning a trip to Rome."]


async def test_credential_events_and_thoughts_are_left_out() -> None:
    events = [
        _event("root", _call("adk_request_credential", token="s3cret")),
        _event("user", _result("adk_request_credential", token="s3cret")),
        _event("root", _text("The secret plan is Project Zeta 42.", thought=True)),
    ]
    text = await _summary(events)
    assert "s3cret" not in text
    assert "Zeta" not in text
    assert text == "Earlier turns: 3 events (1 from the user, 2 from agents)."


async def test_a_range_with_nothing_to_extract_still_gets_a_summary() -> None:
    """A blank user text and an "ok" (no content word) once gave no summary: the engine
    recorded a summarizer failure and retried, and agents waiting for the compaction stopped."""
    events = [_event("user", _text(" ")), _event("root", _text("ok"))]
    assert await _summary(events) == (
        'Earlier turns: 2 events (1 from the user, 1 from agents).\nShort replies: "ok"'
    )
    events = [event_pb2.Event(author="root"), _event("root"), _event("root", _text("  "))]
    assert await _summary(events) == "Earlier turns: 3 events (0 from the user, 3 from agents)."
    assert await _summary([]) == "Earlier turns: no events."
    assert ExtractiveSummarizer(10).summary_text([_event("root", _text("ok"))]) == "Earlier…"


async def test_transfer_results_are_not_facts() -> None:
    """Every ADK port answers a transfer differently; none of it is a fact worth keeping."""
    for answer in ({"result": None}, {}, {"result": "Transfer queued"}):
        events = [
            _event("user", _text("Please ask the helper about 42 euros.")),
            _event("root", _call("transfer_to_agent", agent_name="helper")),
            _event("root", _result("transfer_to_agent", **answer)),
        ]
        text = await _summary(events)
        assert "returned" not in text
        assert "Tools called: transfer_to_agent (1)" in text


async def test_budget_keeps_the_most_informative_facts() -> None:
    events = [
        _event("user", _text("Tell me about the deployment.")),
        _event(
            "ops",
            _text(
                "The weather has been nice lately and everyone is happy about it. "
                "Deployment 7 of service billing-api failed at 14:02 UTC with error E1234. "
                "It was a long day for the whole team and people went home late. "
                "Rollback to version 2.3.1 of billing-api completed at 14:20 UTC."
            ),
        ),
    ]
    text = await _summary(events, max_chars=220)
    assert len(text) <= 220
    assert "E1234" in text
    assert "2.3.1" in text
    assert "weather" not in text


async def test_requests_keep_the_first_and_the_latest() -> None:
    events = [_event("user", _text(f"Request number {i} about topic {i}.")) for i in range(30)]
    text = await _summary(events, max_chars=300)
    assert "- Request number 0 about topic 0." in text
    assert "- Request number 29 about topic 29." in text
    assert "- Request number 1 about" not in text
    lines = text.splitlines()
    assert lines.index("- Request number 0 about topic 0.") < lines.index(
        "- Request number 29 about topic 29."
    )


async def test_long_texts_and_many_tools_are_shortened() -> None:
    events = [
        _event("user", _text("word " * 500)),
        _event("root", *[_call(f"tool_{i:02d}") for i in range(40)]),
    ]
    text = await _summary(events, max_chars=400)
    assert len(text) <= 400
    request = next(line for line in text.splitlines() if line.startswith("- word"))
    assert request.endswith("…")
    assert len(request) <= 302
    tools = next(line for line in text.splitlines() if line.startswith("Tools called: "))
    assert tools.startswith("Tools called: tool_00 (1), tool_01 (1)")
    assert tools.endswith(" more")


@pytest.mark.parametrize("max_chars", [1, 5, 40, 100, 2000])
async def test_never_longer_than_max_chars(max_chars: int) -> None:
    summary = await ExtractiveSummarizer(max_chars).summarize(SummaryInput(_conversation() * 3, ""))
    assert summary is not None
    assert 0 < len(summary.content.parts[0].text) <= max_chars


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveSummarizer(0)


_words = st.sampled_from(
    ("Paris", "the", "42", "build", "failed", "ok.", "Sure,", "x_y", "?", "!", "\n", "é", "。")
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("user", "root", "model")),
            st.lists(_words, max_size=30).map(" ".join),
            st.booleans(),
        ),
        max_size=12,
    ),
    st.integers(min_value=1, max_value=600),
)
def test_any_range_gives_a_bounded_deterministic_summary(
    raw: list[tuple[str, str, bool]], max_chars: int
) -> None:
    events = [_event(author, _text(text, thought=thought)) for author, text, thought in raw]
    summarizer = ExtractiveSummarizer(max_chars)
    text = summarizer.summary_text(events)
    assert len(text) <= max_chars
    assert text == ExtractiveSummarizer(max_chars).summary_text(list(events))


def test_speed_is_in_the_ten_thousand_events_per_second_range() -> None:
    """About 30k events/s on a developer machine; the bound leaves room for a loaded CI box."""
    events = _conversation() * 3000  # 21,000 events
    started = time.perf_counter()
    text = ExtractiveSummarizer().summary_text(events)
    elapsed = time.perf_counter() - started
    assert text
    assert len(events) / elapsed > 5_000, f"{len(events) / elapsed:.0f} events/s"
