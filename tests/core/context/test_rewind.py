"""Rewinds (section 6.1): ``apply_rewinds`` and its effect on contexts, checked against ADK."""

from __future__ import annotations

import pytest
from google.adk.events._rewind_events import _apply_rewinds
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions

from contextengine.core.context._rewind import apply_rewinds, live_indices
from tests.core.context.adk_compare import adk_options, assert_matches_adk, to_proto
from tests.core.context.builders import describe, event, text

pytestmark = pytest.mark.unit

OPTIONS = adk_options(agent_name="agent")


def _rewind(ts: float, target: str) -> Event:
    return event(
        ts, "user", inv=f"r{ts:g}", actions=EventActions(rewind_before_invocation_id=target)
    )


def _same_as_adk(events: list[Event]) -> list[str]:
    """Our surviving event ids, after checking that they are ADK's."""
    ours = [e.id for e in apply_rewinds(to_proto(events))]
    assert ours == [e.id for e in _apply_rewinds(events)]
    return ours


def test_rewind_spec_example_a_b_e() -> None:
    events = [
        event(1, "user", text("a"), inv="i1"),
        event(2, "agent", text("b"), inv="i1"),
        event(3, "user", text("c"), inv="i2"),
        event(4, "agent", text("d"), inv="i2"),
        _rewind(5, "i2"),
        event(6, "user", text("e"), inv="i3"),
    ]
    assert _same_as_adk(events) == ["e1", "e2", "e6"]
    assert describe(assert_matches_adk(events, OPTIONS)) == ["user: a", "model: b", "user: e"]


def test_rewind_of_unknown_invocation_drops_only_itself() -> None:
    events = [
        event(1, "user", text("a"), inv="i1"),
        _rewind(2, "nope"),
        event(3, "user", text("b")),
    ]
    assert _same_as_adk(events) == ["e1", "e3"]
    assert describe(assert_matches_adk(events, OPTIONS)) == ["user: a", "user: b"]


def test_rewind_to_a_later_invocation_drops_only_itself() -> None:
    # the target's first event is after the rewind: not "earlier", so nothing else goes
    events = [
        event(1, "user", text("a"), inv="i1"),
        _rewind(2, "i2"),
        event(3, "user", text("b"), inv="i2"),
    ]
    assert _same_as_adk(events) == ["e1", "e3"]


def test_rewind_targets_the_first_event_of_the_invocation() -> None:
    # i1 appears again after i2: the rewind reaches back to i1's *first* event
    events = [
        event(1, "user", text("a"), inv="i0"),
        event(2, "user", text("b"), inv="i1"),
        event(3, "agent", text("c"), inv="i2"),
        event(4, "agent", text("d"), inv="i1"),
        _rewind(5, "i1"),
        event(6, "user", text("e"), inv="i3"),
    ]
    assert _same_as_adk(events) == ["e1", "e6"]


def test_rewinds_inside_a_rewound_stretch_have_no_effect() -> None:
    events = [
        event(1, "user", text("a"), inv="i1"),
        event(2, "user", text("b"), inv="i2"),
        _rewind(3, "i1"),  # removed by the later rewind below before it can act
        event(4, "user", text("c"), inv="i3"),
        _rewind(5, "i2"),
        event(6, "user", text("d"), inv="i4"),
    ]
    assert _same_as_adk(events) == ["e1", "e6"]
    assert describe(assert_matches_adk(events, OPTIONS)) == ["user: a", "user: d"]


def test_chained_rewinds_walk_backwards() -> None:
    events = [
        event(1, "user", text("a"), inv="i1"),
        event(2, "user", text("b"), inv="i2"),
        _rewind(3, "i2"),
        event(4, "user", text("c"), inv="i3"),
        _rewind(5, "i3"),
        _rewind(6, "i1"),
    ]
    assert _same_as_adk(events) == []
    assert assert_matches_adk(events, OPTIONS) == []


def test_an_empty_rewind_target_is_no_rewind() -> None:
    events = [event(1, "user", text("a"), inv=""), _rewind(2, ""), event(3, "user", text("b"))]
    assert _same_as_adk(events) == ["e1", "e2", "e3"]


def test_apply_rewinds_returns_the_same_objects_and_live_indices_positions() -> None:
    protos = to_proto(
        [
            event(1, "user", text("a"), inv="i1"),
            event(2, "user", text("b"), inv="i2"),
            _rewind(3, "i2"),
        ]
    )
    assert live_indices(protos) == [0]
    assert apply_rewinds(protos)[0] is protos[0]
    assert live_indices([]) == []
