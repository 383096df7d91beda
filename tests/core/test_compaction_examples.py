"""The worked examples of the ADK compaction spec (``adk-semantics.md`` sections 3 and 4), as
named tests of the pure planner (``contextengine.core.compaction``).

Logs are written by hand with :class:`Log`: one event per timestamp (1, 2, 3, ...), an
invocation ``invN`` is a user event and an agent event, and a planned summary is appended at the
next timestamp (so later raw timestamps shift by one), as ADK's runner does. Summaries read
``S[start-end]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from contextengine.core.compaction import (
    CompactionPlan,
    PlanResult,
    latest_prompt_token_count,
    longest_self_contained_prefix,
    plan_after_invocation,
    plan_sliding_window,
    plan_token_threshold,
    render_events,
    safe_split_index,
    summary_event,
)
from contextengine.core.context import ContextOptions, build_contents
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import config_pb2, content_pb2, event_pb2
from tests.core.context.builders import describe

pytestmark = pytest.mark.unit

# ----------------------------------------------------------------------------------- harness


def sliding(interval: int, overlap: int) -> config_pb2.EventsCompactionConfig:
    return config_pb2.EventsCompactionConfig(compaction_interval=interval, overlap_size=overlap)


def token(threshold: int, retention: int) -> config_pb2.EventsCompactionConfig:
    return config_pb2.EventsCompactionConfig(
        token_threshold=threshold, event_retention_size=retention
    )


def text(value: str, *, thought: bool = False) -> content_pb2.Part:
    part = content_pb2.Part(text=value)
    if thought:
        part.thought = True
    return part


def fc(call_id: str, name: str = "tool", **args: Any) -> content_pb2.Part:
    part = content_pb2.Part()
    part.function_call.id = call_id
    part.function_call.name = name
    part.function_call.args.CopyFrom(dict_to_struct(args))
    return part


def fr(call_id: str, name: str = "tool", **response: Any) -> content_pb2.Part:
    part = content_pb2.Part()
    part.function_response.id = call_id
    part.function_response.name = name
    part.function_response.response.CopyFrom(dict_to_struct(response))
    return part


class Log:
    """A session log written by hand (timestamps 1, 2, 3, ... unless given)."""

    def __init__(self, config: config_pb2.EventsCompactionConfig | None = None) -> None:
        self.config = config or config_pb2.EventsCompactionConfig()
        self.events: list[event_pb2.Event] = []
        self.clock = 0.0

    def add(
        self,
        author: str,
        *parts: content_pb2.Part,
        inv: str,
        ts: float | None = None,
        tokens: int | None = None,
        long_running: Iterable[str] = (),
        confirm: Iterable[str] = (),
        auth: Iterable[str] = (),
        branch: str | None = None,
        scope: str | None = None,
        pinned: bool = False,
    ) -> event_pb2.Event:
        self.clock = self.clock + 1.0 if ts is None else ts
        event = event_pb2.Event(
            id=f"e{len(self.events) + 1}",
            author=author,
            invocation_id=inv,
            timestamp=self.clock,
            sequence=len(self.events) + 1,
            pinned=pinned,
        )
        if parts:
            responses_only = all(part.HasField("function_response") for part in parts)
            role = "user" if author == "user" or responses_only else "model"
            event.content.CopyFrom(content_pb2.Content(role=role, parts=list(parts)))
        if tokens is not None:
            event.usage_metadata.prompt_token_count = tokens
        event.long_running_tool_ids.extend(long_running)
        for call_id in confirm:
            event.actions.requested_tool_confirmations[call_id].hint = "approve?"
        for call_id in auth:
            event.actions.requested_auth_configs[call_id].CopyFrom(
                dict_to_struct({"auth_scheme": {"type_": "http", "scheme": "bearer"}})
            )
        if branch is not None:
            event.branch = branch
        if scope is not None:
            event.isolation_scope = scope
        self.events.append(event)
        return event

    def turn(self, n: int, size: int = 200, *, tokens: int | None = None) -> None:
        """Invocation ``inv<n>``: a user event and an agent event, ``size`` characters each."""
        self.add("user", text(f"inv{n} user ".ljust(size, "u")), inv=f"inv{n}")
        self.add("agent", text(f"inv{n} agent ".ljust(size, "a")), inv=f"inv{n}", tokens=tokens)

    def summary(self, start: float, end: float, summary_text: str | None = None) -> None:
        """An imported summary of ``[start, end]`` appended now (not planned)."""
        self.clock += 1.0
        event = event_pb2.Event(
            id=f"e{len(self.events) + 1}",
            author="user",
            invocation_id=f"sum{len(self.events) + 1}",
            timestamp=self.clock,
            sequence=len(self.events) + 1,
        )
        compaction = event.actions.compaction
        compaction.start_timestamp = start
        compaction.end_timestamp = end
        compaction.compacted_content.role = "model"
        compaction.compacted_content.parts.add(text=summary_text or f"S[{start:g}-{end:g}]")
        self.events.append(event)

    def append(self, result: PlanResult, summary_text: str | None = None) -> CompactionPlan | None:
        """Appends the summary of ``result``'s plan at the next timestamp; returns the plan."""
        plan = result.plan
        if plan is None:
            return None
        self.clock += 1.0
        label = f"S[{plan.start_timestamp:g}-{plan.end_timestamp:g}]"
        event = summary_event(
            plan,
            content_pb2.Content(parts=[text(summary_text or label)]),
            event_id=f"e{len(self.events) + 1}",
            invocation_id=f"sum{len(self.events) + 1}",
            timestamp=self.clock,
        )
        event.sequence = len(self.events) + 1
        self.events.append(event)
        return plan

    def after_invocation(self, summary_text: str | None = None) -> CompactionPlan | None:
        return self.append(plan_after_invocation(self.events, self.config), summary_text)

    def contents(self, agent: str = "agent") -> list[str]:
        return describe(build_contents(self.events, ContextOptions(agent_name=agent)))


def span(plan: CompactionPlan | None) -> tuple[float, float] | None:
    return None if plan is None else (plan.start_timestamp, plan.end_timestamp)


def stamps(events: Sequence[event_pb2.Event]) -> list[float]:
    return [event.timestamp for event in events]


def user(n: int, size: int = 200) -> str:
    return "user: " + f"inv{n} user ".ljust(size, "u")


def agent(n: int, size: int = 200) -> str:
    return "model: " + f"inv{n} agent ".ljust(size, "a")


# ------------------------------------------------------------------- 3.5 / 3.6 sliding window


def test_example_a_interval_3_overlap_1() -> None:
    """3.5: summaries after inv3, inv6 and inv9, each reaching one invocation back."""
    log = Log(sliding(3, 1))
    expected = {3: ((1, 6), 7), 6: ((5, 13), 14), 9: ((12, 20), 21)}
    for n in range(1, 11):
        log.turn(n)
        plan = log.after_invocation()
        if n in expected:
            (start, end), appended_at = expected[n]
            assert span(plan) == (start, end), n
            assert log.events[-1].timestamp == appended_at
        else:
            assert plan is None, n
    # inv6's window: inv3 (5, 6) to inv6 (12, 13), without the summary at 7
    second = plan_sliding_window(log.events[:13], sliding(3, 1)).plan
    assert second is not None
    assert stamps(second.window) == [5, 6, 8, 9, 10, 11, 12, 13]
    # all three summaries survive (they only partly overlap), then inv10
    assert log.contents() == [
        "model: S[1-6]",
        "model: S[5-13]",
        "model: S[12-20]",
        user(10),
        agent(10),
    ]


@pytest.mark.parametrize(
    ("interval", "overlap", "expected"),
    [
        # 3.6: inv2 -> [1,4]@5, inv4 -> [3,9]@10, inv6 -> [8,14]@15, inv8 -> [13,19]@20
        pytest.param(2, 1, {2: (1, 4), 4: (3, 9), 6: (8, 14), 8: (13, 19)}, id="overlap-1"),
        # overlap 0: disjoint ranges
        pytest.param(2, 0, {2: (1, 4), 4: (6, 9), 6: (11, 14), 8: (16, 19)}, id="overlap-0"),
        # interval 1, overlap 0: one summary per invocation
        pytest.param(
            1,
            0,
            {n: (3 * n - 2, 3 * n - 1) for n in range(1, 9)},
            id="interval-1",
        ),
    ],
)
def test_example_b_interval_2(
    interval: int, overlap: int, expected: dict[int, tuple[float, float]]
) -> None:
    log = Log(sliding(interval, overlap))
    for n in range(1, 9):
        log.turn(n)
        plan = log.after_invocation()
        assert span(plan) == expected.get(n), n
    # afterwards: the summaries only, in order, no raw events
    assert log.contents() == [f"model: S[{s:g}-{e:g}]" for s, e in expected.values()]


def test_long_previous_summary_delays_the_next_compaction() -> None:
    """3.4: with interval 2, the second summary comes after inv4; after a 900-character first
    summary, two 150-character invocations (723 removable characters) are not worth it, so it
    comes after inv5 (covering inv3 to inv5)."""
    for first_summary, compacts_after in ((None, 4), ("s" * 900, 5)):
        log = Log(sliding(2, 0))
        decided: list[tuple[int, tuple[float, float] | None]] = []
        for n in range(1, 6):
            log.turn(n, size=150)
            decided.append((n, span(log.after_invocation(first_summary if n == 2 else None))))
        assert [(n, s) for n, s in decided if s is not None and n <= 2] == [(2, (1, 4))]
        assert [n for n, s in decided if s is not None and n > 2] == [compacts_after]
    assert decided[-1] == (5, (6, 11))


def test_window_spans_interleaved_events_of_other_invocations() -> None:
    """3.2 step 6: the window is an index span, with whatever else lies inside it."""
    log = Log(sliding(2, 0))
    log.turn(1)
    log.add("planner", text("p" * 100), inv="")  # no invocation id
    log.add("agent", text("late reply " * 10), inv="inv9")
    log.turn(2)
    plan = plan_sliding_window(log.events, log.config).plan
    assert plan is not None
    assert [e.invocation_id for e in plan.window] == ["inv1", "inv1", "", "inv9", "inv2", "inv2"]


# ----------------------------------------------------------------------------- 3.7 edge rules


def test_window_trimmed_at_open_call_resummarises_later() -> None:
    """3.7: a call still open in the newest invocation ends the window at the last balanced
    event; its invocation counts as new again next time."""
    log = Log(sliding(2, 0))
    log.turn(1)
    log.add("user", text("look it up " * 20), inv="inv2")
    log.add("agent", fc("c1", "search", q="x"), inv="inv2")
    assert span(log.after_invocation()) == (1, 3)  # inv1 and inv2's user event
    log.add("user", fr("c1", "search", result="found " * 30), inv="inv3")
    log.add("agent", text("done " * 40), inv="inv3")
    plan = log.after_invocation()
    # inv2 (latest event at 4 > 3) is new again: its whole span is summarised
    assert span(plan) == (3, 7)
    assert plan is not None
    assert [e.invocation_id for e in plan.window] == ["inv2", "inv2", "inv3", "inv3"]


def test_unanswered_long_running_call_at_window_start_blocks_forever() -> None:
    """3.7 / 4.5: a long-running call is protected, so a window starting with it never
    compacts; an ordinary call left open in an older invocation is dead and does not block."""
    for long_running, expected in ((True, None), (False, (1, 3))):
        log = Log(sliding(1, 0))
        log.add(
            "agent", fc("c1", "long_job"), inv="inv1", long_running=["c1"] if long_running else []
        )
        assert log.after_invocation() is None  # newest invocation: never dead
        log.turn(2)
        assert span(log.after_invocation()) == expected
        log.turn(3)
        plan = log.after_invocation()
        assert (plan is None) is long_running


def test_token_summary_with_smaller_end_becomes_the_sliding_boundary() -> None:
    """3.7: the last summary in log order is the sliding window's boundary, even when its end
    is before another summary's: invocations inside [15, 20] count as new again."""
    log = Log(sliding(3, 0))
    pairs = ((1, 2), (3, 4), (5, 6), (15, 16), (17, 18), (19, 20), (23, 24))
    for n, (a, b) in enumerate(pairs, 1):
        log.add("user", text(f"u{n} " * 30), inv=f"inv{n}", ts=a)
        log.add("agent", text(f"a{n} " * 30), inv=f"inv{n}", ts=b)
        if b == 20:
            log.summary(15, 20)  # at 21
            log.summary(1, 4)  # at 22, after [15, 20] in log order
            log.clock = 22.0
    log.events[-1].usage_metadata.prompt_token_count = 1000
    token_plan = log.append(plan_token_threshold(log.events, token(500, 5)))
    # seed [1, 4] (the latest surviving summary), then 5, 6, 15, 16, 17 (5 events are kept)
    assert span(token_plan) == (1, 17)
    plan = plan_sliding_window(log.events, log.config).plan
    assert plan is not None
    # new: inv5 (18), inv6 (20), inv7 (24), although [15, 20] covers inv5 and inv6
    assert stamps(plan.window) == [17, 18, 19, 20, 23, 24]


# ------------------------------------------------------------------ 4.3 / 4.4 token threshold


def _six(tokens: int = 1000) -> Log:
    """4.7: e1..e6 at 1..6, alternating user / agent, 50 characters; e6 read ``tokens``."""
    log = Log()
    for i in range(1, 7):
        author = "user" if i % 2 else "agent"
        log.add(author, text(f"e{i} ".ljust(50, "x")), inv=f"inv{(i + 1) // 2}")
    log.events[-1].usage_metadata.prompt_token_count = tokens
    return log


def test_token_example_threshold_500_compacts_all_but_two() -> None:
    """4.7: threshold 500, retention 2 -> the summarizer gets e1..e4, range [1, 4]."""
    log = _six()
    plan = plan_token_threshold(log.events, token(500, 2)).plan
    assert plan is not None
    assert stamps(plan.window) == [1, 2, 3, 4]
    assert plan.rolls_up is None


def test_token_example_threshold_1001_does_nothing() -> None:
    result = plan_token_threshold(_six().events, token(1001, 2))
    assert result.plan is None
    assert result.skipped == "below_threshold"


def test_token_count_equal_to_threshold_triggers() -> None:
    assert plan_token_threshold(_six(1000).events, token(1000, 2)).plan is not None
    assert plan_token_threshold(_six(999).events, token(1000, 2)).plan is None


def test_token_example_rolling_seed() -> None:
    """4.7: a summary [1, 4] at 7, e8, e9 (900 tokens), retention 1: the summarizer gets the
    old summary (as "model", at its start), e5, e6 and e8; range [1, 8]; the prompt then is the
    new summary and e9."""
    log = _six()
    first = log.append(plan_token_threshold(log.events, token(500, 2)))
    assert span(first) == (1, 4)
    assert log.events[-1].timestamp == 7
    log.add("user", text("e8 ".ljust(50, "x")), inv="inv4")
    log.add("agent", text("e9 ".ljust(50, "x")), inv="inv4", tokens=900)
    plan = plan_token_threshold(log.events, token(500, 1)).plan
    assert plan is not None
    assert plan.rolls_up is log.events[6]
    assert stamps(plan.window) == [1, 5, 6, 8]
    assert stamps(plan.covered) == [5, 6, 8]
    assert render_events(plan.window).splitlines() == [
        "model: S[1-4]",
        "user: " + "e5 ".ljust(50, "x"),
        "agent: " + "e6 ".ljust(50, "x"),
        "user: " + "e8 ".ljust(50, "x"),
    ]
    log.append(PlanResult(plan))
    assert log.contents() == ["model: S[1-8]", "model: " + "e9 ".ljust(50, "x")]


def test_uses_latest_ordered_seed() -> None:
    """4.4 step 2: with [15, 20] appended before [1, 5], the latest surviving summary is
    [1, 5] (log order), so L = 5 and the events at 15 and 20 are compacted again."""
    log = Log()
    for ts in (1, 2, 3, 4, 5, 15, 16, 17, 18, 19, 20):
        log.add("user" if ts % 2 else "agent", text(f"t{ts} " * 20), inv=f"inv{ts}", ts=ts)
    log.summary(15, 20)
    log.summary(1, 5)
    log.add("user", text("t23 " * 20), inv="inv23")
    log.add("agent", text("t24 " * 20), inv="inv24", tokens=800)
    plan = plan_token_threshold(log.events, token(500, 1)).plan
    assert plan is not None
    assert plan.rolls_up is log.events[12]
    assert stamps(plan.covered) == [15, 16, 17, 18, 19, 20, 23]
    assert span(plan) == (1, 23)


def test_zero_prompt_token_count_is_a_reading() -> None:
    """4.3: a recorded 0 is returned as 0 (below any threshold), not replaced by the estimate."""
    log = Log()
    for n in range(1, 5):
        log.turn(n, size=400)
    # no recorded count: the estimate (3,200 characters / 4) triggers
    reading = latest_prompt_token_count(log.events)
    assert (reading.tokens, reading.source) == (800, "estimate")
    assert plan_token_threshold(log.events, token(500, 2)).plan is not None
    log.events[-1].usage_metadata.prompt_token_count = 0
    assert latest_prompt_token_count(log.events).tokens == 0
    assert plan_token_threshold(log.events, token(500, 2)).skipped == "below_threshold"


def test_counts_older_than_a_summary_are_ignored() -> None:
    """4.3: the scan stops at the newest summary; the estimate is used instead."""
    log = Log()
    log.turn(1, size=40, tokens=5000)
    log.summary(1, 1)
    log.turn(2, size=40)
    reading = latest_prompt_token_count(log.events)
    assert reading.source == "estimate"
    assert plan_token_threshold(log.events, token(1000, 0)).plan is None


def test_in_flow_reads_only_the_calling_agents_counts() -> None:
    """4.3 step 2: counts recorded by another agent's model calls are not this agent's."""
    log = Log()
    log.add("user", text("hi " * 100), inv="inv1")
    log.add("planner", text("plan " * 100), inv="inv1", tokens=100)
    log.add("coder", text("code " * 100), inv="inv1", tokens=5000)
    assert latest_prompt_token_count(log.events, agent_name="planner").tokens == 100
    assert latest_prompt_token_count(log.events).tokens == 5000  # post-invocation: any author
    assert plan_token_threshold(log.events, token(1000, 0), agent_name="planner").plan is None
    assert plan_token_threshold(log.events, token(1000, 0), agent_name="coder").plan is not None


def test_post_invocation_prefers_the_token_threshold() -> None:
    """3.1 / 4.8: when the token threshold plans, the sliding window waits for next time."""
    log = Log(
        config_pb2.EventsCompactionConfig(
            compaction_interval=1, overlap_size=0, token_threshold=100, event_retention_size=1
        )
    )
    log.turn(1, tokens=50)
    first = plan_after_invocation(log.events, log.config)
    assert first.plan is not None
    assert first.plan.trigger == "sliding_window"
    log.turn(2, tokens=150)
    second = plan_after_invocation(log.events, log.config)
    assert second.plan is not None
    assert second.plan.trigger == "token_threshold"
    assert stamps(second.plan.window) == [1, 2, 3]


# ------------------------------------------------------------------------ 4.5 dead calls


def _prefix(
    window: Sequence[event_pb2.Event], all_events: Sequence[event_pb2.Event]
) -> list[float]:
    return stamps(longest_self_contained_prefix(window, all_events=all_events))


def test_dead_call_at_window_start_is_skipped() -> None:
    """4.5: ``[FC dead(inv2), text(inv2), text(inv3)]`` with newest inv4 -> all three."""
    log = Log()
    log.add("agent", fc("c1"), inv="inv2")
    log.add("agent", text("working"), inv="inv2")
    log.add("agent", text("next"), inv="inv3")
    log.add("user", text("newest"), inv="inv4")
    assert _prefix(log.events[:3], log.events) == [1, 2, 3]
    # without the session, only the strict pass: nothing
    assert longest_self_contained_prefix(log.events[:3]) == []


def test_dead_call_after_an_invocation_boundary_stops_there() -> None:
    """4.5: ``[text(inv1), FC dead(inv2), ...]`` -> only inv1 (the stall is at a boundary)."""
    log = Log()
    log.add("user", text("first"), inv="inv1")
    log.add("agent", fc("c1"), inv="inv2")
    log.add("agent", text("working"), inv="inv2")
    log.add("user", text("newest"), inv="inv3")
    assert _prefix(log.events[:3], log.events) == [1]


def test_dead_call_inside_an_invocation_is_skipped() -> None:
    log = Log()
    log.add("user", text("go"), inv="inv1")
    log.add("agent", fc("c1"), inv="inv1")
    log.add("agent", text("gave up"), inv="inv1")
    log.add("user", text("newest"), inv="inv2")
    assert _prefix(log.events[:3], log.events) == [1, 2, 3]


def test_calls_of_the_newest_invocation_are_never_dead() -> None:
    """The newest invocation is the last one with an id that is not a summary's."""
    log = Log()
    log.add("user", text("go"), inv="inv1")
    log.add("agent", fc("c1"), inv="inv1")
    log.add("agent", text("waiting"), inv="inv1")
    assert _prefix(log.events, log.events) == [1]
    log.summary(1, 1)  # a summary appended last does not make inv1 older
    assert _prefix(log.events[:3], log.events) == [1]
    log.add("user", text("newer"), inv="inv2")
    assert _prefix(log.events[:3], log.events) == [1, 2, 3]


def test_long_running_call_in_an_older_invocation_is_protected() -> None:
    log = Log()
    log.add("user", text("go"), inv="inv1")
    log.add("agent", fc("c1", "long_job"), inv="inv1", long_running=["c1"])
    log.add("agent", text("started"), inv="inv1")
    log.add("user", text("newest"), inv="inv2")
    assert _prefix(log.events[:3], log.events) == [1]


def test_pending_confirmation_in_an_older_invocation_is_dead() -> None:
    """A tool confirmation never given: the placeholder response closes the call and reopens
    it as a request; the synthetic request call is long-running, but a client call, so in an
    older invocation both are dead. In the newest invocation both are protected."""
    log = Log()
    log.add("user", text("delete it"), inv="inv1")
    log.add("agent", fc("c1", "delete_file"), inv="inv1")
    log.add(
        "agent", fr("c1", "delete_file", error="needs confirmation"), inv="inv1", confirm=["c1"]
    )
    log.add("agent", fc("r1", "adk_request_confirmation"), inv="inv1", long_running=["r1"])
    log.add("agent", text("I need your approval first."), inv="inv1")
    assert _prefix(log.events, log.events) == [1]
    log.add("user", text("never mind"), inv="inv2")
    assert _prefix(log.events[:5], log.events) == [1, 2, 3, 4, 5]


def test_confirmation_answered_then_resumed_is_balanced() -> None:
    """The request is answered and the tool resumed: balanced only after the final result."""
    log = Log()
    log.add("user", text("delete it"), inv="inv1")
    log.add("agent", fc("c1", "delete_file"), inv="inv1")
    log.add(
        "agent", fr("c1", "delete_file", error="needs confirmation"), inv="inv1", confirm=["c1"]
    )
    log.add("agent", fc("r1", "adk_request_confirmation"), inv="inv1", long_running=["r1"])
    log.add("user", fr("r1", "adk_request_confirmation", confirmed=True), inv="inv2")
    log.add("agent", fr("c1", "delete_file", result="deleted"), inv="inv2")
    assert _prefix(log.events[:5], log.events) == [1]
    assert _prefix(log.events, log.events) == [1, 2, 3, 4, 5, 6]


def test_pending_auth_request_blocks_like_a_call() -> None:
    log = Log()
    log.add("user", text("read my mail"), inv="inv1")
    log.add("agent", fc("c1", "mail"), inv="inv1")
    log.add("agent", fr("c1", "mail", pending=True), inv="inv1", auth=["c1"])
    assert _prefix(log.events, log.events) == [1]


# --------------------------------------------------------------------- 4.6 split with retention


def _split_log() -> Log:
    log = Log()
    log.add("user", text("q " * 50), inv="inv1")
    log.add("agent", text("a " * 50), inv="inv1")
    log.add("user", text("q2 " * 50), inv="inv2")
    log.add("agent", fc("c1", "search", q="x"), inv="inv2")
    log.add("agent", fr("c1", "search", result="r"), inv="inv2")
    log.add("agent", text("done " * 50), inv="inv2", tokens=900)
    return log


def test_split_keeps_a_call_with_its_retained_response() -> None:
    """4.6: ``q, a, q2, FC c1, FR c1, done`` with retention 2: the initial split (4) is the
    response; the call moves to the kept tail too -> compact [q, a, q2]."""
    log = _split_log()
    assert safe_split_index(log.events, 2) == 3
    plan = plan_token_threshold(log.events, token(500, 2)).plan
    assert plan is not None
    assert stamps(plan.covered) == [1, 2, 3]


def test_orphan_response_in_the_tail_blocks_the_split() -> None:
    log = Log()
    log.add("user", text("q " * 50), inv="inv1")
    log.add("agent", text("a " * 50), inv="inv1")
    log.add("user", fr("ghost", "search", result="r"), inv="inv2")
    log.add("agent", text("done " * 50), inv="inv2", tokens=900)
    assert safe_split_index(log.events, 2) == 0
    assert plan_token_threshold(log.events, token(500, 2)).skipped == "nothing_to_compact"
    assert safe_split_index(log.events, 1) == 3  # the orphan itself is summarised


def test_retention_at_least_the_candidates_does_nothing() -> None:
    log = _split_log()
    assert plan_token_threshold(log.events, token(500, 6)).skipped == "nothing_to_compact"
    plan = plan_token_threshold(log.events, token(500, 0)).plan
    assert plan is not None
    assert len(plan.covered) == 6
