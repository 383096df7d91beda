"""Compaction masking (section 6.4), checked against ADK."""

from __future__ import annotations

import math

import pytest
from google.adk.apps.compaction import _get_compaction_ranges, _latest_compaction_event
from google.adk.events.event import Event

from contextengine.core.context import IncludeContents
from contextengine.core.context._compaction_view import (
    compaction_ranges,
    latest_non_subsumed_compaction,
    surviving_ranges,
)
from tests.core.context.adk_compare import (
    adk_as_json,
    adk_options,
    as_json,
    assert_matches_adk,
    ours,
    run_adk,
    to_proto,
)
from tests.core.context.builders import call, compaction, describe, event, response, text

pytestmark = pytest.mark.unit

AGENT = adk_options(agent_name="agent")


def _turns(*stamps: float) -> list[Event]:
    """e<ts> at each stamp, alternating user / agent."""
    return [
        event(ts, "user" if i % 2 == 0 else "agent", text(f"e{ts:g}"))
        for i, ts in enumerate(stamps)
    ]


def _ranges_as_adk(events: list[Event]) -> list[tuple[int, float, float]]:
    ours_ = [(r.position, r.start, r.end) for r in compaction_ranges(to_proto(events))]
    theirs = _get_compaction_ranges(events)
    assert ours_ == theirs
    return ours_


def test_compaction_spec_example_two_disjoint_summaries() -> None:
    # e1..e4, C[1-4], e5, e6..e9, C[6-9], e10 -> S1-4, e5, S6-9, e10
    events = [
        *_turns(1, 2, 3, 4),
        compaction(4.5, 1, 4, "S1-4"),
        *_turns(5),
        *_turns(6, 7, 8, 9),
        compaction(9.5, 6, 9, "S6-9"),
        *_turns(10),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "model: S1-4",
        "user: e5",
        "model: S6-9",
        "user: e10",
    ]


def test_compaction_spec_example_subsumed_summary() -> None:
    # C[1-1]@5 then C[1-3]@8 -> only S1-3 survives, then e4, e6, e7, e9
    events = [
        *_turns(1, 2, 3, 4),
        compaction(5, 1, 1, "S1-1"),
        *_turns(6, 7),
        compaction(8, 1, 3, "S1-3"),
        *_turns(9),
    ]
    assert _ranges_as_adk(events) == [(7, 1, 3)]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "model: S1-3",
        "model: e4",
        "user: e6",
        "model: e7",
        "user: e9",
    ]


def test_compaction_spec_example_late_summary() -> None:
    # summary appended late (C[1-3]@6 after e4, e5) -> S1-3, e4, e5
    events = [*_turns(1, 2, 3, 4, 5), compaction(6, 1, 3, "S1-3")]
    assert describe(assert_matches_adk(events, AGENT)) == ["model: S1-3", "model: e4", "user: e5"]


def test_compaction_spec_example_long_running_call_compacted_with_placeholder() -> None:
    # LR call compacted with its placeholder, final result posted later -> SUM, hi, yo, FC, FR
    events = [
        event(1, "user", text("start"), inv="i1"),
        event(2, "agent", call("lr", "c1"), inv="i1", long_running_tool_ids={"c1"}),
        event(3, "agent", response("lr", "c1", status="pending"), inv="i1"),
        compaction(3.5, 1, 3, "SUM"),
        event(4, "user", text("hi"), inv="i2"),
        event(5, "agent", text("yo"), inv="i2"),
        event(6, "user", response("lr", "c1", status="done"), inv="i3"),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "model: SUM",
        "user: hi",
        "model: yo",
        "model: FC lr({})#c1",
        "user: FR lr={'status': 'done'}#c1",
    ]


def test_recovery_brings_back_compacted_sibling_responses() -> None:
    # a parallel call of two tools; both responses compacted, one answered again later
    events = [
        event(1, "user", text("go")),
        event(2, "agent", call("a", "ca"), call("b", "cb"), long_running_tool_ids={"ca"}),
        event(3, "agent", response("a", "ca", s="pending"), response("b", "cb", s="b done")),
        compaction(3.5, 1, 3, "SUM"),
        event(4, "user", text("next")),
        event(5, "user", response("a", "ca", s="a done")),
    ]
    contents = assert_matches_adk(events, AGENT)
    assert describe(contents)[:2] == ["model: SUM", "user: next"]
    assert "model: FC a({})#ca | FC b({})#cb" in describe(contents)


def test_identical_ranges_keep_the_latest_summary() -> None:
    events = [*_turns(1, 2), compaction(3, 1, 2, "old"), compaction(4, 1, 2, "new"), *_turns(5)]
    assert _ranges_as_adk(events) == [(3, 1, 2)]
    assert describe(assert_matches_adk(events, AGENT)) == ["model: new", "user: e5"]


def test_partially_overlapping_summaries_are_all_kept() -> None:
    events = [
        *_turns(1, 2, 3, 4),
        compaction(5, 1, 3, "S1-3"),
        compaction(6, 2, 4, "S2-4"),
        *_turns(7),
    ]
    assert _ranges_as_adk(events) == [(4, 1, 3), (5, 2, 4)]
    assert describe(assert_matches_adk(events, AGENT)) == ["model: S1-3", "model: S2-4", "user: e7"]


def test_inverted_range_hides_nothing_but_is_materialised() -> None:
    # placed at its end timestamp (1), after e1 which comes first in the log
    events = [*_turns(1, 2, 3), compaction(4, 3, 1, "S3-1")]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: e1",
        "model: S3-1",
        "model: e2",
        "user: e3",
    ]


def test_any_summary_resorts_history_by_timestamp() -> None:
    # out-of-order timestamps stay in log order without a summary...
    events = [*_turns(5, 1), *_turns(20, 21)]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: e5",
        "model: e1",
        "user: e20",
        "model: e21",
    ]
    # ...and are re-sorted by time as soon as one exists (ties keep log order)
    events += [compaction(30, 20, 21, "S")]
    assert describe(assert_matches_adk(events, AGENT)) == ["model: e1", "user: e5", "model: S"]


def test_summaries_of_other_scopes_and_branches() -> None:
    events = [
        *_turns(1, 2),
        compaction(3, 1, 2, "scoped", isolation_scope="t1"),
        compaction(4, 1, 1, "branched", branch="root.x"),
        *_turns(5),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "model: branched",
        "model: e2",
        "user: e5",
    ]
    contents = assert_matches_adk(events, adk_options(agent_name="agent", branch="root.y"))
    assert describe(contents) == ["user: e1", "model: e2", "user: e5"]


def test_summary_reads_as_the_agents_own_turn_even_without_agent_name() -> None:
    events = [*_turns(1, 2), compaction(3, 1, 2, "S")]
    assert describe(assert_matches_adk(events, adk_options())) == ["model: S"]
    assert describe(assert_matches_adk(events, adk_options(agent_name="other"))) == ["model: S"]


def test_nan_bounds_are_always_kept() -> None:
    # NaN does not survive ADK's JSON (pydantic writes null), so the protos get it by hand
    nan = math.nan
    events = [
        *_turns(1, 2),
        compaction(2.5, nan, 2, "Snan-2"),
        *_turns(3),
        compaction(3.5, 1, nan, "S1-nan"),
        event(nan, "agent", text("enan")),
        *_turns(4),
        compaction(5, 1, 1, "S1-1"),
        event(0.5, "user", text("e0.5")),
    ]
    protos = to_proto(events)
    for adk_event, proto in zip(events, protos, strict=True):
        proto.timestamp = adk_event.timestamp
        if adk_event.actions.compaction:
            proto.actions.compaction.start_timestamp = adk_event.actions.compaction.start_timestamp
            proto.actions.compaction.end_timestamp = adk_event.actions.compaction.end_timestamp
    assert as_json(ours(protos, AGENT)) == adk_as_json(run_adk(events, AGENT))
    assert [r.position for r in compaction_ranges(protos)] == [
        i for i, _, _ in _get_compaction_ranges(events)
    ]


def test_latest_non_subsumed_compaction_is_adks() -> None:
    events = [*_turns(1, 2, 3), compaction(4, 1, 3, "big"), compaction(5, 2, 2, "inside")]
    protos = to_proto(events)
    latest = latest_non_subsumed_compaction(protos)
    assert latest is protos[3]
    assert _latest_compaction_event(events) is events[3]
    assert latest_non_subsumed_compaction(to_proto(_turns(1))) is None


def test_summary_without_compacted_content_is_not_a_candidate() -> None:
    protos = to_proto([*_turns(1), compaction(2, 1, 1, "S")])
    protos[1].actions.compaction.ClearField("compacted_content")
    assert compaction_ranges(protos) == []


@pytest.mark.parametrize(
    ("candidates", "kept"),
    [
        ([(0, 1.0, 4.0), (1, 2.0, 3.0)], [0]),
        ([(0, 2.0, 3.0), (1, 1.0, 4.0)], [1]),
        ([(0, 1.0, 2.0), (1, 1.0, 2.0)], [1]),
        ([(0, 1.0, 2.0), (1, 3.0, 4.0)], [0, 1]),
        ([(0, 1.0, 3.0), (1, 2.0, 4.0)], [0, 1]),
        ([(0, 1.0, 3.0), (1, 1.0, 5.0), (2, 4.0, 5.0)], [1]),
    ],
)
def test_surviving_ranges(candidates: list[tuple[int, float, float]], kept: list[int]) -> None:
    assert [r.position for r in surviving_ranges(candidates)] == kept


def test_current_turn_with_a_summary() -> None:
    events = [*_turns(1, 2), compaction(3, 1, 2, "S"), *_turns(4, 5)]
    options = adk_options(agent_name="agent", include_contents=IncludeContents.NONE)
    assert describe(assert_matches_adk(events, options)) == ["user: e4", "model: e5"]
