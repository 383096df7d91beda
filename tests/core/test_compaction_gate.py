"""The "worth compacting" gate (section 3.4): content sizes and the decision, against google-adk.

* ``content_json_size`` of a content converted to the proto must equal the length of
  google-genai's ``model_dump_json(exclude_none=True, fallback=str)`` of the same content, for
  texts with any unicode, control characters, quotes and backslashes, thoughts and signatures,
  function calls and responses with nested payloads (floats of every magnitude), inline data,
  file data, code parts, video metadata and server-side tool parts;
* ``is_worth_compacting`` on hand-made logs, each also checked against ADK's own
  ``_is_range_worth_compacting``.

Known deviations the generator avoids (the proto cannot carry them): empty repeated fields
(``parts=[]`` dumps as ``"parts":[]``, an empty proto list is unset), integral floats in payloads
(``1.0`` comes back as ``1``) and integers of 2**53 or more in payloads (stored as doubles).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from google.adk.apps.compaction import _is_range_worth_compacting
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.core.compaction import content_json_size, is_worth_compacting
from contextengine.v1 import content_pb2
from tests.core.context.adk_compare import to_proto
from tests.core.context.builders import call, compaction, event, response, text

pytestmark = pytest.mark.unit

# ---------------------------------------------------------------------------- content sizes


def _proto(content: types.Content) -> content_pb2.Content:
    return json_format.Parse(content.model_dump_json(exclude_none=True), content_pb2.Content())


def _adk_size(content: types.Content) -> int:
    return len(content.model_dump_json(exclude_none=True, fallback=str))


_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"])
    | st.sampled_from('"\\\n\t\x00\x7f\u2028'),
    max_size=40,
)
_KEYS = st.text(max_size=8) | st.sampled_from(("a", "query", "ünï", 'q"uote', "back\\slash"))


def _not_integral(value: float) -> bool:
    return not value.is_integer() or (value == 0.0 and math.copysign(1.0, value) < 0.0)


#: Finite floats that are not integral (a JSON integral float comes back from the proto as an
#: int), -0.0 included, every magnitude (fixed and exponent notations, 1e-5 .. 1e-9 in
#: particular, which Python and google-genai write differently).
_FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).filter(_not_integral),
    st.sampled_from((1e-5, 1.5e-6, 2.5e-7, 9.99e-9, 1e-10, 1.234e-4, 0.1, 1e300, 1e16 + 0.5)),
    st.builds(lambda m, e: m * 10.0**e, st.floats(1, 10), st.integers(-12, -3)).filter(
        _not_integral
    ),
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    _FLOATS,
    _TEXT,
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
_PAYLOADS = st.dictionaries(_KEYS, _JSON, max_size=4)
_OPTIONAL_TEXT = st.none() | _TEXT
_BYTES = st.binary(max_size=12)


def _parts() -> st.SearchStrategy[types.Part]:
    return st.one_of(
        st.builds(
            types.Part,
            text=_TEXT,
            thought=st.none() | st.booleans(),
            thought_signature=st.none() | _BYTES,
        ),
        st.builds(
            types.Part,
            function_call=st.builds(
                types.FunctionCall,
                id=_OPTIONAL_TEXT,
                name=_OPTIONAL_TEXT,
                args=st.none() | _PAYLOADS,
                will_continue=st.none() | st.booleans(),
            ),
            thought=st.none() | st.booleans(),
            thought_signature=st.none() | _BYTES,
        ),
        st.builds(
            types.Part,
            function_response=st.builds(
                types.FunctionResponse,
                id=_OPTIONAL_TEXT,
                name=_OPTIONAL_TEXT,
                response=st.none() | _PAYLOADS,
                will_continue=st.none() | st.booleans(),
                scheduling=st.none() | st.sampled_from(list(types.FunctionResponseScheduling)),
            ),
        ),
        st.builds(
            types.Part,
            inline_data=st.builds(
                types.Blob,
                data=st.none() | _BYTES,
                mime_type=_OPTIONAL_TEXT,
                display_name=_OPTIONAL_TEXT,
            ),
        ),
        st.builds(
            types.Part,
            file_data=st.builds(
                types.FileData,
                file_uri=_OPTIONAL_TEXT,
                mime_type=_OPTIONAL_TEXT,
                display_name=_OPTIONAL_TEXT,
            ),
            video_metadata=st.none()
            | st.builds(
                types.VideoMetadata,
                start_offset=st.sampled_from(("1s", "0.5s")),
                end_offset=st.none() | st.just("5s"),
                fps=st.none() | _FLOATS.filter(lambda fps: fps > 0),
            ),
        ),
        st.builds(
            types.Part,
            executable_code=st.builds(
                types.ExecutableCode, code=_TEXT, language=st.just(types.Language.PYTHON)
            ),
        ),
        st.builds(
            types.Part,
            code_execution_result=st.builds(
                types.CodeExecutionResult,
                outcome=st.just(types.Outcome.OUTCOME_OK),
                output=_OPTIONAL_TEXT,
            ),
        ),
        st.builds(
            types.Part,
            tool_call=st.builds(
                types.ToolCall,
                id=_OPTIONAL_TEXT,
                tool_type=st.just(types.ToolType.GOOGLE_SEARCH_WEB),
                args=st.none() | _PAYLOADS,
            ),
        ),
    )


_CONTENTS = st.builds(
    types.Content,
    role=st.none() | st.sampled_from(("user", "model", "")),
    parts=st.none() | st.lists(_parts(), min_size=1, max_size=4),
)


# Slow generation is the shared machine, not the property: no health check, no deadline.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=_CONTENTS)
def test_content_json_size_matches_google_genai(content: types.Content) -> None:
    assert content_json_size(_proto(content)) == _adk_size(content)


def test_content_json_size_small_float_notation() -> None:
    """google-genai writes 1e-5 as 0.00001 and 1e-7 as 1e-7 (Python: 1e-05, 1e-07)."""
    for value in (1e-5, 1.5e-5, 1e-7, -9.99e-9, 2.5e-10, 1e-4, 1e16, 1.5e300):
        content = types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(name="f", args={"x": value}))],
        )
        assert content_json_size(_proto(content)) == _adk_size(content), value


def test_empty_summary_content_is_27_characters() -> None:
    """The weightless summary the gate prices with: ``{"parts":[],"role":"model"}``."""
    assert _adk_size(types.Content(role="model", parts=[])) == 27


# ---------------------------------------------------------------------------- the decision


def _turns(*stamps: float, size: int = 10) -> list[Event]:
    """One event per stamp, alternating user / agent, each with a ``size``-character text."""
    return [
        event(ts, "user" if i % 2 == 0 else "agent", text("x" * size), inv=f"i{ts:g}")
        for i, ts in enumerate(stamps)
    ]


def _decide(events: Sequence[Event], window: Sequence[Event]) -> bool:
    """Ours on the proto log, after asserting that ADK decides the same."""
    protos = to_proto(events)
    by_id = {e.id: p for e, p in zip(events, protos, strict=True)}
    ours = is_worth_compacting(protos, [by_id[e.id] for e in window])
    assert ours == _is_range_worth_compacting(events=list(events), events_to_compact=list(window))
    return ours


def test_first_range_with_content_is_worth_compacting() -> None:
    events = _turns(1, 2, 3)
    assert _decide(events, events[:2])


def test_range_without_content_is_not_worth_compacting() -> None:
    """Nothing to remove, and the empty summary still costs 27 characters."""
    events = [
        event(1, "agent", inv="i1", actions=EventActions(state_delta={"k": 1})),
        event(2, "agent", inv="i1", actions=EventActions(state_delta={"k": 2})),
        *_turns(3),
    ]
    assert not _decide(events, events[:2])


def test_range_must_outweigh_its_empty_summary() -> None:
    """Without a previous summary, a range must remove more than the empty summary adds (27
    characters): ``{"parts":[{"text":"abcd"}]}`` is 27 characters, one more passes."""
    for value, expected in (("abcd", False), ("abcde", True)):
        content = types.Content(parts=[types.Part(text=value)])
        events = [event(1, "user", inv="i1", content=content), *_turns(2)]
        assert _decide(events, events[:1]) is expected


def test_previous_summary_larger_than_range_blocks() -> None:
    events = [*_turns(1, 2, size=400), compaction(3, 1, 2, "s" * 900), *_turns(4, 5, size=100)]
    assert not _decide(events, events[3:5])


def test_range_larger_than_previous_summary_passes() -> None:
    events = [*_turns(1, 2, size=400), compaction(3, 1, 2, "s" * 900), *_turns(4, 5, size=600)]
    assert _decide(events, events[3:5])


def _removable(events: Sequence[Event], window: Sequence[Event]) -> int:
    """What ADK's gate compares (removed characters) for a fresh log without summaries."""
    protos = to_proto(events)
    positions = [events.index(e) for e in window]
    return sum(content_json_size(protos[i].content) for i in positions) - 27


def test_equality_does_not_pass_the_gate() -> None:
    """``removable > previous`` is strict: a range that removes exactly the previous summary's
    size is not worth it; one more character is."""
    head = _turns(1, 2, size=50)
    for extra, expected in ((0, False), (1, True)):
        tail = [
            event(4, "user", text("y" * (100 + extra)), inv="i4"),
            event(5, "agent", text("z" * 100), inv="i5"),
        ]
        removable = _removable(tail, tail)
        # the previous summary's content is {"parts":[{"text":"..."}],"role":"model"}
        summary_text = "s" * (removable - extra - len('{"parts":[{"text":""}],"role":"model"}'))
        events = [*head, compaction(3, 1, 2, summary_text), *tail]
        assert content_json_size(to_proto(events)[2].actions.compaction.compacted_content) == (
            removable - extra
        )
        assert _decide(events, tail) is expected


def test_range_already_covered_by_a_summary_removes_only_that_summary() -> None:
    """Re-summarising a range whose events a summary already hides removes the summary (now
    contained), not the hidden events a second time."""
    events = [*_turns(1, 2, 3, size=300), compaction(4, 1, 3, "s" * 100), *_turns(5, size=10)]
    # [1, 3] again plus e5: removes the 100-character summary and e5, adds 27
    assert _decide(events, [events[0], events[1], events[2], events[4]])
    # [1, 2] only: contained in [1, 3], so the new summary would itself be subsumed
    assert not _decide(events, events[:2])


def test_sizes_count_every_branch_and_author() -> None:
    """The gate reads the whole scoped log: other branches' events count too."""
    events = [
        event(1, "planner", text("p" * 300), inv="i1", branch="root.planner"),
        event(2, "coder", text("c" * 300), inv="i1", branch="root.coder"),
        compaction(3, 1, 2, "s" * 500),
        event(4, "coder", text("c" * 300), inv="i2", branch="root.coder"),
        event(5, "planner", text("p" * 300), inv="i2", branch="root.planner"),
    ]
    assert _decide(events, events[3:])


def test_call_and_response_payloads_count() -> None:
    events = [
        event(1, "agent", call("search", "c1", query="q" * 200), inv="i1"),
        event(2, "agent", response("search", "c1", result="r" * 400), inv="i1"),
        compaction(3, 0.5, 0.75, "s" * 550),
        *_turns(4),
    ]
    assert _decide(events, events[:2])


def test_memo_gives_the_same_answer() -> None:
    events = [*_turns(1, 2, size=400), compaction(3, 1, 2, "s" * 900), *_turns(4, 5, size=600)]
    protos = to_proto(events)
    memo: dict[int, int] = {}
    first = is_worth_compacting(protos, protos[3:5], memo)
    assert memo
    assert is_worth_compacting(protos, protos[3:5], memo) is first is True
