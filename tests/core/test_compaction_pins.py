"""Pinned events (this engine's extension of ADK's compaction, ``_planner`` module docstring).

A pinned event is never inside a planned range, under either rule: the range is cut at pins and
the first stretch that can be summarised is planned; a range that starts after a pin does not
roll the previous summary in. Summaries hide raw events by timestamp, so the tests also check
that a pinned event is still in the contents after the summary is appended. Without pins, the
plans are google-adk's (checked against ADK's own code on generated sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Sequence

import pytest
from bench.peers.adk_compaction import (
    AdkCompaction,
    Stamp,
    run_post_invocation,
    run_token_threshold,
)
from google.adk.events.event import Event
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.core.compaction import (
    CompactionPlan,
    PlanResult,
    plan_after_invocation,
    plan_sliding_window,
    plan_token_threshold,
    summary_event,
)
from contextengine.core.context import ContextOptions, build_contents
from contextengine.core.context._compaction_view import compaction_ranges
from contextengine.core.context._rewind import apply_rewinds
from contextengine.v1 import config_pb2, content_pb2, event_pb2
from tests.compaction.compaction_engine import (
    EngineCompaction,
    engine_post_invocation,
    engine_token_threshold,
    one_key_payloads,
    to_adk_config,
    to_proto_config,
    to_proto_event,
)
from tests.core.context.builders import describe
from tests.core.context.context_strategies import Session, sessions
from tests.core.test_compaction_examples import (
    Log,
    fc,
    fr,
    sliding,
    span,
    stamps,
    text,
    token,
)

pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings(
        # AuthConfig.__init__ calls its own deprecated get_credential_key() (auth/auth_tool.py).
        r"ignore:This method is deprecated\. Use credential_key instead\.:DeprecationWarning"
    ),
]


def _visible(log: Log, agent_name: str = "agent") -> list[str]:
    return describe(build_contents(log.events, ContextOptions(agent_name=agent_name)))


# ------------------------------------------------------------------------- sliding window


def test_pin_cuts_the_sliding_window() -> None:
    """The stretch before the pin is planned; the pinned event and what follows stay."""
    log = Log(sliding(2, 0))
    log.turn(1)
    log.add("user", text("keep this verbatim"), inv="inv2", pinned=True)
    log.add("agent", text("ok " * 50), inv="inv2")
    plan = log.after_invocation()
    assert span(plan) == (1, 2)
    assert _visible(log) == ["model: S[1-2]", "user: keep this verbatim", "model: " + "ok " * 50]


def test_pin_at_window_start_plans_after_it() -> None:
    log = Log(sliding(2, 0))
    log.add("user", text("keep this verbatim"), inv="inv1", pinned=True)
    log.add("agent", text("a1 " * 50), inv="inv1")
    log.turn(2)
    plan = log.after_invocation()
    assert span(plan) == (2, 4)
    assert _visible(log) == ["user: keep this verbatim", "model: S[2-4]"]


def test_blocked_first_stretch_plans_the_next() -> None:
    """A stretch whose prefix is empty (a call the newest invocation still waits for... here a
    protected long-running call at its start) is skipped for the next stretch."""
    log = Log(sliding(1, 0))
    log.add("agent", fc("c1", "long_job"), inv="inv1", long_running=["c1"])
    log.add("user", text("keep"), inv="inv1", pinned=True)
    log.turn(2)
    plan = log.after_invocation()
    assert span(plan) == (3, 4)


def test_every_stretch_pinned_plans_nothing() -> None:
    log = Log(sliding(1, 0))
    log.add("user", text("a " * 100), inv="inv1", pinned=True)
    log.add("agent", text("b " * 100), inv="inv1", pinned=True)
    result = plan_sliding_window(log.events, log.config)
    assert result.plan is None
    assert result.skipped == "nothing_to_compact"


def test_overlap_before_a_pin_does_not_stall_the_sliding_window() -> None:
    """The summary before a pin ends at the event before it; the next window reaches back over
    the overlap into that summary. The stretch before the pin is then all summarised already
    (not worth compacting again), so the stretch after the pin is planned, not nothing forever."""
    log = Log(sliding(2, 1))
    log.turn(1)
    log.add("user", text("inv2 user " * 20), inv="inv2")
    log.add("agent", text("pinned answer"), inv="inv2", pinned=True)
    assert span(log.after_invocation()) == (1, 3)
    log.turn(3)
    log.turn(4)
    plan = log.after_invocation()
    assert span(plan) == (6, 9)
    assert _visible(log) == ["model: S[1-3]", "model: pinned answer", "model: S[6-9]"]


# ------------------------------------------------------------------------ token threshold


def test_pin_cuts_the_token_range_and_keeps_the_seed() -> None:
    log = Log()
    for n in range(1, 3):
        log.turn(n, size=100)
    first = log.append(plan_token_threshold(log.events, token(100, 1), ignore_trigger=True))
    assert span(first) == (1, 3)
    log.add("user", text("u6 " * 40), inv="inv3")
    log.add("user", text("keep"), inv="inv3", pinned=True)
    log.add("agent", text("a8 " * 40), inv="inv3", tokens=500)
    plan = plan_token_threshold(log.events, token(100, 0)).plan
    assert plan is not None
    assert plan.rolls_up is log.events[4]
    assert stamps(plan.window) == [1, 4, 6]
    assert stamps(plan.covered) == [4, 6]
    log.append(PlanResult(plan))
    assert _visible(log) == ["model: S[1-6]", "user: keep", "model: " + "a8 " * 40]


def test_pin_at_token_range_start_drops_the_seed() -> None:
    """A range that starts after a pin cannot reach back across it: no rolling seed, and the
    summaries on both sides of the pin stay."""
    log = Log()
    log.turn(1, size=100)
    first = log.append(plan_token_threshold(log.events, token(100, 0), ignore_trigger=True))
    assert span(first) == (1, 2)
    log.add("user", text("keep"), inv="inv2", pinned=True)
    log.add("agent", text("a5 " * 40), inv="inv2")
    log.add("user", text("u6 " * 40), inv="inv3")
    log.add("agent", text("a7 " * 40), inv="inv3", tokens=500)
    plan = plan_token_threshold(log.events, token(100, 1)).plan
    assert plan is not None
    assert plan.rolls_up is None
    assert stamps(plan.window) == [5, 6]
    log.append(PlanResult(plan))
    assert _visible(log) == ["model: S[1-2]", "user: keep", "model: S[5-6]", "model: " + "a7 " * 40]


def test_stretch_not_worth_compacting_does_not_stall_the_token_threshold() -> None:
    """A stretch not worth a summary (a state change: nothing to remove) must not block the
    stretch after the pin; it would be first again at every model call."""
    log = Log()
    log.add("agent", inv="inv1").actions.state_delta.update({"step": 1})
    log.add("agent", text("keep"), inv="inv1", pinned=True)
    log.add("user", text("u3 " * 60), inv="inv2")
    log.add("agent", text("a4 " * 60), inv="inv2")
    log.add("user", text("u5"), inv="inv3")
    log.add("agent", text("a6"), inv="inv3", tokens=900)
    plan = plan_token_threshold(log.events, token(500, 2)).plan
    assert plan is not None
    assert plan.rolls_up is None
    assert stamps(plan.covered) == [3, 4]


def test_after_invocation_honours_pins_for_both_rules() -> None:
    config = config_pb2.EventsCompactionConfig(
        compaction_interval=1, overlap_size=0, token_threshold=100, event_retention_size=0
    )
    log = Log(config)
    log.add("user", text("u1 " * 50), inv="inv1")
    log.add("agent", text("keep"), inv="inv1", pinned=True, tokens=150)
    log.add("agent", text("a3 " * 50), inv="inv1")
    plan = log.after_invocation()
    assert plan is not None
    assert plan.trigger == "token_threshold"
    assert span(plan) == (1, 1)
    assert _visible(log) == ["model: S[1-1]", "model: keep", "model: " + "a3 " * 50]


# --------------------------------------------------------------------------- clock skew


def test_pin_with_an_earlier_timestamp_than_its_predecessor_stays_visible() -> None:
    """Summaries hide by timestamp: a pinned event whose clock is behind the event before it
    must not fall inside the range that ends at that event."""
    log = Log(sliding(1, 0))
    log.add("user", text("u1 " * 50), inv="inv1", ts=1)
    log.add("agent", text("a2 " * 50), inv="inv1", ts=3)
    log.add("agent", text("keep"), inv="inv1", ts=2, pinned=True)
    log.add("agent", text("a4 " * 50), inv="inv1", ts=4)
    log.clock = 4
    plan = log.after_invocation()
    assert plan is not None
    assert not plan.start_timestamp <= 2 <= plan.end_timestamp
    assert "model: keep" in _visible(log)


def test_pin_after_the_window_with_a_timestamp_inside_it_stays_visible() -> None:
    """A pinned event written later with a clock behind (another writer): the range must not
    reach over its timestamp either."""
    log = Log(sliding(2, 0))
    log.add("user", text("u1 " * 50), inv="inv1", ts=1)
    log.add("agent", fc("c1", "search", q="x"), inv="inv1", ts=2)
    log.add("agent", text("a3 " * 50), inv="inv1", ts=3)
    log.add("agent", text("a4 " * 50), inv="inv1", ts=4)
    log.add("agent", fr("c1", "search", result="r"), inv="inv1", ts=5)
    log.add("agent", text("keep"), inv="inv2", ts=2.5, pinned=True)
    log.add("user", text("u6 " * 50), inv="inv2", ts=6)
    log.clock = 6
    # inv1 is balanced only at its end: [1, 5] would hide the pin; [1, 1] is what is left
    plan = log.after_invocation()
    assert span(plan) == (1, 1)
    assert "model: keep" in _visible(log)


# ------------------------------------------------------------------------ property tests

_CONFIGS = st.one_of(
    st.builds(sliding, st.integers(1, 3), st.integers(0, 2)),
    st.builds(token, st.sampled_from((1, 50, 500)), st.integers(0, 3)),
    st.builds(
        lambda i, o, t, r: config_pb2.EventsCompactionConfig(
            compaction_interval=i, overlap_size=o, token_threshold=t, event_retention_size=r
        ),
        st.integers(1, 3),
        st.integers(0, 2),
        st.sampled_from((1, 50, 500)),
        st.integers(0, 3),
    ),
)
#: Generated ADK sessions: tool calls (obligations), odd summaries, everything.
_SESSIONS = sessions("tools") | sessions("compaction") | sessions("mixed")


def _scoped(log: Sequence[event_pb2.Event], scope: str | None) -> list[event_pb2.Event]:
    return [
        event
        for event in apply_rewinds(log)
        if (event.isolation_scope if event.HasField("isolation_scope") else None) == scope
    ]


def _plans(
    log: Sequence[event_pb2.Event], config: config_pb2.EventsCompactionConfig, scope: str | None
) -> list[CompactionPlan]:
    results = [plan_after_invocation(log, config)]
    for ignore_trigger in (False, True):
        results.append(plan_sliding_window(log, config, ignore_trigger=ignore_trigger))
        results.append(
            plan_token_threshold(
                log, config, agent_name="root", isolation_scope=scope, ignore_trigger=ignore_trigger
            )
        )
    return [result.plan for result in results if result.plan is not None]


def _summary(plan: CompactionPlan, log: Sequence[event_pb2.Event]) -> event_pb2.Event:
    event = summary_event(
        plan,
        content_pb2.Content(parts=[content_pb2.Part(text="S")]),
        event_id="summary",
        invocation_id="summary-inv",
        timestamp=max(event.timestamp for event in log) + 1.0,
    )
    event.sequence = len(log) + 1
    return event


def _hidden(log: Sequence[event_pb2.Event], scope: str | None) -> set[int]:
    """Sequences of the scope's raw events a surviving summary hides (by timestamp)."""
    scoped = _scoped(log, scope)
    ranges = [r for r in compaction_ranges(scoped) if r.start <= r.end]
    return {
        event.sequence
        for event in scoped
        if not event.actions.HasField("compaction")
        and any(r.start <= event.timestamp <= r.end for r in ranges)
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=_SESSIONS, config=_CONFIGS, data=st.data())
def test_pinned_events_are_never_inside_a_range(
    session: Session, config: config_pb2.EventsCompactionConfig, data: st.DataObject
) -> None:
    """Any plan (after an invocation, either rule, trigger or not) leaves every pinned event
    out of its window and its timestamp out of its range (clocks out of order, equal
    timestamps), and once appended, the summary hides no pinned event."""
    log = [to_proto_event(event, n) for n, event in enumerate(session.events, start=1)]
    if not log:
        return
    for index in data.draw(st.sets(st.integers(0, len(log) - 1), max_size=4), label="pinned"):
        log[index].pinned = True
    scope = data.draw(st.sampled_from((None, *session.scopes)), label="scope")
    for plan in _plans(log, config, scope):
        assert not any(event.pinned for event in plan.window)
        start, end = plan.start_timestamp, plan.end_timestamp
        for event in _scoped(log, plan.isolation_scope):
            if event.pinned and not event.actions.HasField("compaction"):
                assert not start <= event.timestamp <= end, (event.sequence, start, end)
        before = _hidden(log, plan.isolation_scope)
        after = _hidden([*log, _summary(plan, log)], plan.isolation_scope)
        assert {sequence for sequence in after - before if log[sequence - 1].pinned} == set()


# ------------------------------------------------------------------- no pins: ADK's plans


@contextlib.contextmanager
def _quiet_adk_logs() -> Iterator[None]:
    """ADK logs a warning for every orphan it drops while estimating tokens."""
    logger = logging.getLogger("google_adk")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _one_key_event(event: Event) -> Event:
    """The known deviation (``compaction_engine.one_key_payloads``) kept out of the prompts."""
    if event.content is None:
        return event
    return event.model_copy(update={"content": one_key_payloads(event.content)})


def _reply(prompt: str) -> str:
    return f"S{len(prompt)}"


def _same(theirs: AdkCompaction, ours: EngineCompaction) -> None:
    assert theirs.prompts == (() if ours.prompt is None else (ours.prompt,))
    if theirs.event is None or ours.event is None:
        assert theirs.event is None
        assert ours.event is None
        return
    compaction = theirs.event.actions.compaction
    assert compaction is not None
    ours_range = ours.event.actions.compaction
    assert (compaction.start_timestamp, compaction.end_timestamp) == (
        ours_range.start_timestamp,
        ours_range.end_timestamp,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=_SESSIONS, config=_CONFIGS, data=st.data())
def test_without_pins_plans_are_adks(
    session: Session, config: config_pb2.EventsCompactionConfig, data: st.DataObject
) -> None:
    """With every pin cleared, the plans are google-adk's (the same prompt, hence the same
    events, and the same range), after an invocation and before an agent's model call."""
    events = [_one_key_event(event) for event in session.events]
    log = [to_proto_event(event, n) for n, event in enumerate(events, start=1)]
    for index in data.draw(st.sets(st.integers(0, len(log)), max_size=3), label="pinned"):
        if index < len(log):
            log[index].pinned = True
    for event in log:
        event.ClearField("pinned")
    adk = to_adk_config(config)
    assert to_proto_config(adk) == config
    stamp = Stamp(1e10, "summary", "summary-inv")
    scope = data.draw(st.sampled_from((None, *session.scopes)), label="scope")
    agent_name = data.draw(st.sampled_from(("root", "planner", "coder")), label="agent")
    branch = dict(session.homes).get(agent_name)
    with _quiet_adk_logs(), asyncio.Runner() as runner:
        theirs = runner.run(run_post_invocation(events, adk, reply=_reply, stamp=stamp))
        _same(theirs, engine_post_invocation(log, config, reply=_reply, stamp=stamp))
        if not config.HasField("token_threshold"):
            return
        theirs = runner.run(
            run_token_threshold(
                events,
                adk,
                agent_name=agent_name,
                branch=branch,
                isolation_scope=scope,
                reply=_reply,
                stamp=stamp,
            )
        )
        ours = engine_token_threshold(
            log,
            config,
            agent_name=agent_name,
            branch=branch,
            isolation_scope=scope,
            reply=_reply,
            stamp=stamp,
        )
        _same(theirs, ours)
