"""Incremental materialization equals a full rebuild (and ADK), on generated logs growing one
event at a time and in random batches; generated logs end in an event nobody sees (state delta
only, empty text, summary, rewind...) as often as in a message. Named regressions below (each
found by a hunt or by reading ADK, and failing before its fix).

Hunting profile (by hand): ``INCREMENTAL_HUNT=<n>`` multiplies the generated examples and the
seeded sessions by ``n``; with ``HYPOTHESIS_PROFILE=explore`` the generated ones are fresh on
every run, e.g. ``HYPOTHESIS_PROFILE=explore INCREMENTAL_HUNT=20 .venv/bin/pytest
tests/core/context/test_incremental.py --timeout=0 -x -q``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
from collections.abc import Sequence

import pytest
from google.adk.events.event import Event
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.client import ContextEngineClient
from contextengine.core.adk_json import event_to_adk_json
from contextengine.core.context import ContextOptions, IncludeContents, build_contents
from contextengine.core.context.incremental import (
    CONTENTS_DIGEST_SEED,
    View,
    chain_digest,
    encode_contents_field,
    materialize,
)
from contextengine.core.tokens import CharsPerFourCounter, content_chars
from contextengine.v1 import content_pb2, event_pb2
from tests.core.context.adk_compare import adk_as_json, adk_options, as_json, run_adk, to_proto
from tests.core.context.context_compare import options_for, to_proto_events
from tests.core.context.context_strategies import Session, sessions, views
from tests.core.context.random_sessions import random_options, random_session
from tests.service.helpers import text_event

COUNTER = CharsPerFourCounter()

#: the hunting profile's multiplier (see the module docstring)
SCALE = int(os.environ.get("INCREMENTAL_HUNT", "1"))

pytestmark = [pytest.mark.service, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _check_growth(
    events: Sequence[event_pb2.Event], options: ContextOptions, cuts: list[int]
) -> None:
    """Materializes ``events`` in steps ending at each cut (views are extended in place) and
    compares every step with a full rebuild."""
    view: View | None = None
    for cut in [*sorted(set(cuts)), len(events)]:
        prefix = list(events[:cut])
        view = materialize(prefix, options, COUNTER, view)
        full = build_contents(prefix, options)
        assert view.contents == full, f"differs after {cut} events ({view.mode})"
        assert bytes(view.body) == b"".join(encode_contents_field(c) for c in full)
        encoded = [encode_contents_field(c) for c in full]
        assert view.offsets == [sum(len(e) for e in encoded[:i]) for i in range(len(full) + 1)]
        digests = [CONTENTS_DIGEST_SEED]
        for entry in encoded:
            digests.append(chain_digest(digests[-1], entry))
        assert view.digests == digests
        assert view.tokens == [COUNTER.count_content(c) for c in full]
        assert view.total_tokens == sum(view.tokens)
        assert view.total_chars == sum(content_chars(c) for c in full)


@settings(
    max_examples=150 * SCALE,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), session=sessions(quiet=True))
def test_incremental_equals_rebuild(data: st.DataObject, session: Session) -> None:
    """One event at a time (every prefix), then in random batches, for one drawn view; the
    sessions put a quiet event (state only, empty text, summary, rewind...) after half of their
    steps."""
    events = to_proto_events(session.events)
    options = options_for(data.draw(views(session)))
    _check_growth(events, options, list(range(len(events))))
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=6))
    _check_growth(events, options, cuts)


@pytest.mark.parametrize("block", range(4))
def test_random_sessions_grow_like_rebuilds(block: int, caplog: pytest.LogCaptureFixture) -> None:
    """Seeded odd sessions (``random_sessions``, half of their events followed by a quiet one):
    after every appended event, the incremental view equals a fresh build, and ADK."""
    caplog.set_level(logging.ERROR)  # ADK warns about every orphan it drops
    for seed in range(block * 50 * SCALE, (block + 1) * 50 * SCALE):
        rng = random.Random(seed)
        adk_events = random_session(rng, rng.randrange(1, 25), quiet=True)
        options = random_options(rng)
        if rng.random() < 0.8:  # views with include_contents='none' are never extended
            options = dataclasses.replace(options, include_contents=IncludeContents.DEFAULT)
        events = to_proto(adk_events)
        view: View | None = None
        for cut in range(1, len(events) + 1):
            view = materialize(events[:cut], options, COUNTER, view)
            fresh = build_contents(events[:cut], options)
            assert view.contents == fresh, f"seed {seed}, after {cut} events ({view.mode})"
            expected = adk_as_json(run_adk(adk_events[:cut], options))
            assert as_json(fresh) == expected, f"seed {seed}, after {cut} events"


def test_plain_conversation_is_extended_not_rebuilt() -> None:
    options = ContextOptions(agent_name="agent")
    events: list[event_pb2.Event] = []
    view = None
    modes = []
    for i in range(30):
        author = "user" if i % 2 == 0 else "agent"
        event = text_event(
            f"m{i}", author=author, invocation_id=f"i{i // 2}", timestamp=float(i + 1)
        )
        event.sequence = i + 1
        events.append(event)
        view = materialize(events, options, COUNTER, view)
        modes.append(view.mode)
    assert modes[0] == "full"
    assert set(modes[1:]) == {"extended"}
    assert view is not None
    assert view.contents == build_contents(events, options)


def test_rewind_forces_rebuild() -> None:
    options = ContextOptions(agent_name="agent")
    events = [
        text_event("q", invocation_id="i1", timestamp=1.0),
        text_event("a", author="agent", invocation_id="i1", timestamp=2.0),
    ]
    view = materialize(events, options, COUNTER)
    rewind = event_pb2.Event(author="user", invocation_id="e-r", timestamp=3.0)
    rewind.actions.rewind_before_invocation_id = "i1"
    events.append(rewind)
    view = materialize(events, options, COUNTER, view)
    assert view.mode == "full"
    assert view.contents == []


def test_idless_response_to_a_call_in_the_view_forces_rebuild() -> None:
    """ADK pairs calls and responses without ids by name, across the whole history."""
    options = ContextOptions(agent_name="agent")
    call = event_pb2.Event(author="agent", invocation_id="i1", timestamp=2.0)
    call.content.role = "model"
    call.content.parts.add().function_call.name = "read_file"
    response = event_pb2.Event(author="agent", invocation_id="i1", timestamp=3.0)
    response.content.role = "user"
    response.content.parts.add().function_response.name = "read_file"
    events = [text_event("q", invocation_id="i1", timestamp=1.0), call]
    view = materialize(events, options, COUNTER)
    events.append(response)
    view = materialize(events, options, COUNTER, view)
    assert view.mode == "full"
    assert view.contents == build_contents(events, options)


# ------------------------------------------------- the latest-response rule sees visible events


def _call(call_id: str, timestamp: float) -> event_pb2.Event:
    event = event_pb2.Event(author="root", invocation_id="i1", timestamp=timestamp)
    event.content.role = "model"
    call = event.content.parts.add().function_call
    call.id, call.name = call_id, "tool"
    return event


def _response(call_id: str, timestamp: float) -> event_pb2.Event:
    event = event_pb2.Event(author="root", invocation_id="i1", timestamp=timestamp)
    event.content.role = "user"
    response = event.content.parts.add().function_response
    response.id, response.name = call_id, "tool"
    return event


def _state_delta_only(timestamp: float) -> event_pb2.Event:
    return text_event("", author="root", timestamp=timestamp, state_delta={"k": 1})


def _hidden_text_case(quiet: event_pb2.Event) -> list[event_pb2.Event]:
    """root calls c1; root says "T"; the response to c1 arrives; ``quiet`` (an event nobody
    sees); the user says "U"."""
    quiet.timestamp = 4.0
    return [
        _call("c1", 1.0),
        text_event("T", author="root", invocation_id="i1", timestamp=2.0),
        _response("c1", 3.0),
        quiet,
        text_event("U", invocation_id="i2", timestamp=5.0),
    ]


def _quiet_events() -> dict[str, event_pb2.Event]:
    state = event_pb2.Event(author="root", invocation_id="i1")
    state.actions.state_delta.CopyFrom(_state_delta_only(0.0).actions.state_delta)
    empty_text = text_event("", author="root", invocation_id="i1")
    summary = event_pb2.Event(author="user", invocation_id="c")
    summary.actions.compaction.start_timestamp = 0.5
    summary.actions.compaction.end_timestamp = 0.6
    summary.actions.compaction.compacted_content.role = "model"
    summary.actions.compaction.compacted_content.parts.add().text = "S"
    rewind = event_pb2.Event(author="user", invocation_id="e-r")
    rewind.actions.rewind_before_invocation_id = "i-unknown"
    return {"state_delta": state, "empty_text": empty_text, "summary": summary, "rewind": rewind}


def _adk(events: Sequence[event_pb2.Event], options: ContextOptions) -> list[object]:
    """ADK's contents for ``events`` (converted back to ADK events), as normalised JSON."""
    adk_events = [Event.model_validate_json(event_to_adk_json(event)) for event in events]
    return adk_as_json(run_adk(adk_events, options))


def _texts(contents: Sequence[content_pb2.Content]) -> list[str]:
    return [part.text for content in contents for part in content.parts if part.text]


@pytest.mark.parametrize("quiet", sorted(_quiet_events()))
def test_hidden_text_comes_back_after_an_invisible_event(quiet: str) -> None:
    """The latest-response rule hides "T" while the response is the last event ADK *sees*; an
    invisible event after it does not close the tail: once "U" arrives, "T" is back."""
    events = _hidden_text_case(_quiet_events()[quiet])
    options = adk_options(agent_name="root")
    view = None
    for cut in range(1, len(events) + 1):
        prefix = events[:cut]
        view = materialize(prefix, options, COUNTER, view)
        assert view.contents == build_contents(prefix, options), f"after {cut} events"
        assert as_json(view.contents) == _adk(prefix, options), f"after {cut} events"
    assert view is not None
    assert _texts(view.contents)[-2:] == ["T", "U"]


@pytest.mark.parametrize("quiet", sorted(_quiet_events()))
async def test_hidden_text_comes_back_over_grpc(client: ContextEngineClient, quiet: str) -> None:
    """The same through a real sidecar: one event per AppendEvents, BuildContext after each."""
    events = _hidden_text_case(_quiet_events()[quiet])
    for sequence, event in enumerate(events, start=1):
        event.sequence = sequence
    session = await client.create_session("app", "u", f"hidden-{quiet}")
    options = ContextOptions(agent_name="root")
    for cut, event in enumerate(events, start=1):
        await client.append_events("app", "u", session.id, [event])
        response = await client.build_context("app", "u", session.id, agent_name="root")
        expected = build_contents(events[:cut], options)
        assert list(response.contents) == expected, f"after {cut} events"
    assert _texts(response.contents)[-2:] == ["T", "U"]


def _check_every_step(events: Sequence[event_pb2.Event], options: ContextOptions) -> View:
    """Incremental equals fresh equals ADK after every append."""
    view: View | None = None
    for cut in range(1, len(events) + 1):
        prefix = events[:cut]
        view = materialize(prefix, options, COUNTER, view)
        assert view.contents == build_contents(prefix, options), f"after {cut} events"
        assert as_json(view.contents) == _adk(prefix, options), f"after {cut} events"
    assert view is not None
    return view


def _fragment(text: str, timestamp: float, *, output: bool = False) -> event_pb2.Event:
    event = event_pb2.Event(author="user", invocation_id="i1", timestamp=timestamp)
    (event.output_transcription if output else event.input_transcription).text = text
    return event


@pytest.mark.parametrize("output", [False, True], ids=["input", "output"])
def test_transcription_run_continues_across_an_invisible_event(output: bool) -> None:
    """Folding joins the fragments ADK sees, whatever invisible events lie between them."""
    events = [
        _fragment("a", 1.0, output=output),
        _state_delta_only(2.0),
        _fragment("b", 3.0, output=output),
    ]
    view = _check_every_step(events, adk_options(agent_name="root"))
    assert _texts(view.contents) == ["ab"]


def test_held_back_fragment_joins_the_next_run() -> None:
    """A fragment followed by an event with content *and* an input transcription is held back
    (ADK keeps its text for the next fragment that ends a run), so that text is still open."""
    with_content = text_event("hi", timestamp=2.0)
    with_content.input_transcription.text = "x"
    events = [
        _fragment("a", 1.0),
        with_content,
        _fragment("b", 3.0),
        text_event("c", timestamp=4.0),
    ]
    view = _check_every_step(events, adk_options(agent_name="root"))
    assert _texts(view.contents) == ["hi", "ab", "c"]


def _summary(
    start: float, end: float, timestamp: float, *parts: content_pb2.Part
) -> event_pb2.Event:
    event = event_pb2.Event(author="user", invocation_id="c1", timestamp=timestamp)
    compaction = event.actions.compaction
    compaction.start_timestamp, compaction.end_timestamp = start, end
    compaction.compacted_content.role = "model"
    compaction.compacted_content.parts.extend(parts)
    return event


def test_response_to_a_call_inside_a_summary_forces_rebuild() -> None:
    """A summary's compacted content may hold calls (custom summarizers); a later response to
    one pairs with it across the whole history, like a response to any call of the view."""
    call = content_pb2.Part(function_call=content_pb2.FunctionCall(id="c0", name="tool"))
    events = [
        text_event("q", timestamp=1.0),
        _summary(1.0, 1.0, 2.0, content_pb2.Part(text="S"), call),
        _response("c0", 3.0),
        text_event("next", timestamp=4.0),
    ]
    view = _check_every_step(events, adk_options(agent_name="root"))
    kinds = [
        [f for f in ("text", "function_call", "function_response") if p.HasField(f)]
        for c in view.contents
        for p in c.parts
    ]
    assert kinds[:3] == [["text"], ["function_call"], ["function_response"]]


@pytest.mark.parametrize("call_first", [False, True], ids=["call-later", "progress-later"])
def test_tool_branch_with_two_ats_pairs_with_the_call_after_the_last_at(call_first: bool) -> None:
    """A tool's progress on ``<tool>@<x>@<call id>`` is hidden once the call id is known: the run
    id is what follows the *last* '@' (ADK's ``rpartition``), whichever of the two comes first."""
    progress = text_event("50%", author="root", invocation_id="i1")
    progress.branch = "tool@x@c5"
    call = [_call("c5", 0.0), _response("c5", 0.0)]  # answered: the view has no open call
    events = [
        text_event("q", invocation_id="i1"),
        *([*call, progress] if call_first else [progress, *call]),
    ]
    events.append(text_event("next", invocation_id="i2"))
    for timestamp, event in enumerate(events, start=1):
        event.timestamp = float(timestamp)
    view = _check_every_step(events, adk_options(agent_name="root"))
    assert "50%" not in _texts(view.contents)


def _idless(
    kind: str, name: str, timestamp: float, *, also: event_pb2.Event | None = None
) -> event_pb2.Event:
    event = also if also is not None else event_pb2.Event(author="root", invocation_id="i1")
    event.timestamp = timestamp
    event.content.role = event.content.role or ("model" if kind == "call" else "user")
    part = event.content.parts.add()
    (part.function_call if kind == "call" else part.function_response).name = name
    return event


def test_idless_response_pairs_with_an_idless_call_of_another_name() -> None:
    """ADK's async-history step pairs a response without id with the nearest call event before
    it whose call has no id, whatever the names (calls in events that also hold a response are
    never indexed): a new id-less response may belong to an id-less call of the view."""
    events = [
        text_event("q", invocation_id="i1", timestamp=1.0),
        _idless("call", "f", 2.0),
        _idless("response", "f", 3.0),
        _call("c9", 4.0),
        _idless("call", "g", 5.0, also=_response("c9", 0.0)),
        _idless("response", "g", 6.0),
        text_event("next", invocation_id="i2", timestamp=7.0),
    ]
    _check_every_step(events, adk_options(agent_name="root"))


def test_idless_call_may_own_an_idless_response_of_the_view() -> None:
    """A response without id and no indexed call before it goes to the first id-less call
    event, even a later one: a new id-less call may take a response of the view."""
    events = [
        text_event("q", invocation_id="i1", timestamp=1.0),
        _call("c9", 2.0),
        _idless("call", "f", 3.0, also=_response("c9", 0.0)),
        _idless("response", "f", 4.0),
        _idless("call", "g", 5.0),
        text_event("next", invocation_id="i2", timestamp=6.0),
    ]
    _check_every_step(events, adk_options(agent_name="root"))


@pytest.mark.parametrize("where", ["in-view", "appended"])
def test_nan_timestamps_next_to_a_summary_are_rebuilt(where: str) -> None:
    """A summary re-sorts the history by timestamp; a NaN timestamp has no place in that order
    (the service rejects them; the pure functions must still not extend across one)."""
    nan = float("nan")
    events = [
        text_event("q", timestamp=1.0),
        _summary(0.0, 0.5, 2.0, content_pb2.Part(text="S")),
        text_event("a", author="root", timestamp=nan if where == "in-view" else 3.0),
        text_event("b", timestamp=nan if where == "appended" else 4.0),
        text_event("c", author="root", timestamp=5.0),
    ]
    options = adk_options(agent_name="root")
    view: View | None = None
    for cut in range(1, len(events) + 1):
        view = materialize(events[:cut], options, COUNTER, view)
        assert view.contents == build_contents(events[:cut], options), f"after {cut} events"
