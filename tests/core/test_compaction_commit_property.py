"""Property: whatever the planner proposes, CommitCompaction's validator accepts, unchanged.

Issue 13, item 9: PlanCompaction applied ADK's dead-call rule and the commit check did not, so a
client summarizer could never commit the engine's own plan over a crashed invocation's call or an
abandoned confirmation. This test makes that class of bug impossible to reintroduce: on generated
sessions, after every appended event, every plan the pure planner makes (post-invocation pass,
sliding window, token threshold for several agents and scopes, with and without the trigger) is
committed through :func:`client_plan` (what CommitCompaction runs) with exactly the fields
PlanCompaction returns, and must be accepted and give the same summary event. Now and then a plan
is committed and its summary appended, so later steps plan over the engine's own summaries
(rolled-up ones included).

Sessions come from two generators: ``context_strategies``' ADK-shaped builder (tool rounds,
long-running calls, confirmations and auth requests, pending and orphaned calls, rewinds,
imported summaries, isolated tasks) and ``random_sessions``' odd shapes (reused and empty call
ids, summaries over arbitrary ranges, stray long-running ids and confirmation requests). Some
events are pinned. The example budget is fixed (``make test`` runs the repeatable profile).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from google.adk.events.event import Event
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.core.compaction import (
    CompactionPlan,
    client_plan,
    open_obligations,
    plan_after_invocation,
    plan_sliding_window,
    plan_token_threshold,
    summary_event,
)
from contextengine.core.errors import ContextEngineError
from contextengine.v1 import config_pb2, content_pb2, event_pb2
from tests.compaction.compaction_engine import to_proto_event
from tests.core.context.context_strategies import Session, sessions
from tests.core.context.random_sessions import random_session

__all__ = [
    "compaction_configs",
    "proposals",
    "proto_events",
    "views_of",
]

pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings(
        # AuthConfig.__init__ calls its own deprecated get_credential_key() (auth/auth_tool.py).
        r"ignore:This method is deprecated\. Use credential_key instead\.:DeprecationWarning"
    ),
]

_THRESHOLDS = (1, 40, 150, 500, 1500, 20_000)


@st.composite
def compaction_configs(draw: st.DrawFn) -> config_pb2.EventsCompactionConfig:
    """A valid EventsCompactionConfig: a sliding window, a token threshold, or both."""
    kind = draw(st.sampled_from(("sliding", "token", "both")))
    config = config_pb2.EventsCompactionConfig()
    if kind != "token":
        config.compaction_interval = draw(st.integers(1, 3))
        config.overlap_size = draw(st.integers(0, 2))
    if kind != "sliding":
        config.token_threshold = draw(st.sampled_from(_THRESHOLDS))
        config.event_retention_size = draw(st.integers(0, 4))
    return config


def proto_events(events: Sequence[Event], rng: random.Random) -> list[event_pb2.Event]:
    """ADK events as protos (sequences left for the log to assign); about one raw event in
    eight pinned."""
    converted = []
    for event in events:
        message = to_proto_event(event, 0)
        if not message.actions.HasField("compaction") and rng.random() < 1 / 8:
            message.pinned = True
        converted.append(message)
    return converted


@dataclass(frozen=True)
class Proposal:
    what: str
    plan: CompactionPlan


def views_of(log: Sequence[event_pb2.Event]) -> list[tuple[str, str | None]]:
    """(agent name, isolation scope) pairs worth planning a token threshold for."""
    agents = sorted({event.author for event in log if event.author != "user"})[:3]
    scopes = sorted({event.isolation_scope for event in log if event.HasField("isolation_scope")})
    views: list[tuple[str, str | None]] = [("", None), *((agent, None) for agent in agents)]
    views += [("", scope) for scope in scopes]
    return views


def proposals(
    log: Sequence[event_pb2.Event], config: config_pb2.EventsCompactionConfig
) -> Iterator[Proposal]:
    """Every plan the planner makes over ``log`` now."""
    sliding = config.HasField("compaction_interval")
    token = config.HasField("token_threshold")
    for ignore in (False, True):
        result = plan_after_invocation(log, config, ignore_trigger=ignore)
        if result.plan is not None:
            yield Proposal(f"after_invocation ignore={ignore}", result.plan)
        if sliding:
            result = plan_sliding_window(log, config, ignore_trigger=ignore)
            if result.plan is not None:
                yield Proposal(f"sliding_window ignore={ignore}", result.plan)
        if token:
            for agent, scope in views_of(log):
                result = plan_token_threshold(
                    log, config, agent_name=agent, isolation_scope=scope, ignore_trigger=ignore
                )
                if result.plan is not None:
                    yield Proposal(
                        f"token_threshold agent={agent!r} scope={scope!r} ignore={ignore}",
                        result.plan,
                    )


_SUMMARY = content_pb2.Content(role="model", parts=[content_pb2.Part(text="Client summary.")])


def _summary(plan: CompactionPlan, timestamp: float) -> event_pb2.Event:
    return summary_event(
        plan, _SUMMARY, event_id="summary", invocation_id="summary-inv", timestamp=timestamp
    )


def _describe(log: Sequence[event_pb2.Event]) -> str:
    lines = []
    for event in log:
        parts = []
        for part in event.content.parts:
            if part.HasField("function_call"):
                parts.append(f"call {part.function_call.name}#{part.function_call.id}")
            elif part.HasField("function_response"):
                parts.append(f"resp {part.function_response.name}#{part.function_response.id}")
            elif part.text:
                parts.append("text")
        actions = event.actions
        extra = [
            f"lr={list(event.long_running_tool_ids)}" if event.long_running_tool_ids else "",
            f"confirm={sorted(actions.requested_tool_confirmations)}"
            if actions.requested_tool_confirmations
            else "",
            f"auth={sorted(actions.requested_auth_configs)}"
            if actions.requested_auth_configs
            else "",
            f"rewind<{actions.rewind_before_invocation_id}"
            if actions.rewind_before_invocation_id
            else "",
            f"summary[{actions.compaction.start_timestamp}..{actions.compaction.end_timestamp}]"
            if actions.HasField("compaction")
            else "",
            f"scope={event.isolation_scope!r}" if event.HasField("isolation_scope") else "",
            "PINNED" if event.pinned else "",
        ]
        lines.append(
            f"  {event.sequence:>3} t={event.timestamp:<14} {event.invocation_id:<12} "
            f"{event.author:<8} {' '.join(parts)} {' '.join(x for x in extra if x)}"
        )
    return "\n".join(lines)


def check_accepted(
    log: Sequence[event_pb2.Event], proposal: Proposal, config: config_pb2.EventsCompactionConfig
) -> None:
    """``proposal`` committed as PlanCompaction reports it is accepted, with the same summary."""
    plan = proposal.plan
    try:
        committed = client_plan(
            log,
            first_sequence=plan.covered[0].sequence,
            last_sequence=plan.covered[-1].sequence,
            rolls_up_sequence=plan.rolls_up.sequence if plan.rolls_up is not None else 0,
            isolation_scope=plan.isolation_scope,
            based_on_sequence=plan.based_on_sequence,
        )
    except Exception as error:
        raise AssertionError(
            f"{proposal.what} [{plan.trigger}]: the commit of the engine's own plan "
            f"{plan.covered[0].sequence}..{plan.covered[-1].sequence} (rolls up "
            f"{plan.rolls_up.sequence if plan.rolls_up is not None else 0}) was refused: "
            f"{error}\nconfig: {config}\nlog:\n{_describe(log)}"
        ) from error
    assert _summary(committed, 0.0) == _summary(plan, 0.0), proposal.what
    assert committed.window[0].timestamp == plan.window[0].timestamp, proposal.what


@dataclass
class Tally:
    sessions: int = 0
    steps: int = 0
    plans: int = 0
    dead_call_plans: int = 0


#: what the test saw, for the report in ``-s`` / the final assertion that it saw plans at all
TALLY = Tally()


def _leaves_open(plan: CompactionPlan) -> bool:
    """Whether the plan's range holds an obligation it does not close (a dead call)."""
    return bool(open_obligations(plan.covered))


def simulate(
    events: Sequence[event_pb2.Event], config: config_pb2.EventsCompactionConfig, seed: int
) -> None:
    """Appends ``events`` one by one; after each, checks every proposal, and commits one now
    and then (its summary is appended, as the client's commit would)."""
    rng = random.Random(seed)
    log: list[event_pb2.Event] = []
    TALLY.sessions += 1
    for event in events:
        copy = event_pb2.Event()
        copy.CopyFrom(event)
        copy.sequence = len(log) + 1
        log.append(copy)
        TALLY.steps += 1
        found = list(proposals(log, config))
        for proposal in found:
            check_accepted(log, proposal, config)
            TALLY.plans += 1
            TALLY.dead_call_plans += _leaves_open(proposal.plan)
        if found and rng.random() < 0.3:
            chosen = rng.choice(found).plan
            summary = _summary(chosen, max(e.timestamp for e in log) + 1.0)
            summary.sequence = len(log) + 1
            log.append(summary)


_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@_SETTINGS
@given(
    session=st.sampled_from(("tools", "compaction", "rewind", "turn", "mixed")).flatmap(sessions),
    config=compaction_configs(),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_plan_of_an_adk_shaped_session_commits(
    session: Session, config: config_pb2.EventsCompactionConfig, seed: int
) -> None:
    rng = random.Random(seed)
    simulate(proto_events(session.events, rng), config, seed)


@_SETTINGS
@given(size=st.integers(5, 45), config=compaction_configs(), seed=st.integers(0, 2**32 - 1))
def test_every_plan_of_an_odd_session_commits(
    size: int, config: config_pb2.EventsCompactionConfig, seed: int
) -> None:
    rng = random.Random(seed)
    simulate(proto_events(random_session(rng, size), rng), config, seed)


# -- the cases the property found ----------------------------------------------------------------


def _event(sequence: int, invocation: str, author: str, timestamp: float) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        sequence=sequence,
        invocation_id=invocation,
        author=author,
        timestamp=timestamp,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text="words " * 40)]),
    )


def test_a_token_plan_that_skips_an_older_pinned_event_commits() -> None:
    """The token threshold's candidates are the events newer than the surviving summary's end;
    an older one (clocks out of order) between them is not in its range, even pinned. The
    commit reads the range the same way (the sequence span alone would hold event 5)."""
    summary = event_pb2.Event(sequence=3, author="user", invocation_id="s", timestamp=12.0)
    summary.actions.compaction.start_timestamp = 10.0
    summary.actions.compaction.end_timestamp = 11.0
    summary.actions.compaction.compacted_content.parts.add(text="Earlier.")
    pinned = _event(5, "i2", "user", 5.0)
    pinned.pinned = True
    last = _event(8, "i3", "agent", 16.0)
    last.usage_metadata.prompt_token_count = 200
    log = [
        _event(1, "i1", "user", 10.0),
        _event(2, "i1", "agent", 11.0),
        summary,
        _event(4, "i2", "user", 13.0),
        pinned,
        _event(6, "i2", "agent", 14.0),
        _event(7, "i3", "user", 15.0),
        last,
    ]
    config = config_pb2.EventsCompactionConfig(token_threshold=100, event_retention_size=1)
    plan = plan_token_threshold(log, config).plan
    assert plan is not None
    assert [event.sequence for event in plan.covered] == [4, 6, 7]
    assert plan.rolls_up is summary
    check_accepted(log, Proposal("token_threshold", plan), config)
    # A range that starts before the summary's end can only be read whole: event 5 is in it.
    with pytest.raises(ContextEngineError, match="event 5 is pinned"):
        client_plan(
            log,
            first_sequence=1,
            last_sequence=7,
            rolls_up_sequence=0,
            isolation_scope=None,
            based_on_sequence=8,
        )


def _with_parts(event: event_pb2.Event, *parts: content_pb2.Part) -> event_pb2.Event:
    del event.content.parts[:]
    event.content.parts.extend(parts)
    return event


def _call(call_id: str) -> content_pb2.Part:
    return content_pb2.Part(function_call=content_pb2.FunctionCall(id=call_id, name="f"))


def _response(call_id: str) -> content_pb2.Part:
    return content_pb2.Part(function_response=content_pb2.FunctionResponse(id=call_id, name="f"))


def _refusal(log: Sequence[event_pb2.Event], first: int, last: int) -> ContextEngineError:
    with pytest.raises(ContextEngineError) as refused:
        client_plan(
            log,
            first_sequence=first,
            last_sequence=last,
            rolls_up_sequence=0,
            isolation_scope=None,
            based_on_sequence=len(log),
        )
    assert refused.value.reason == "INVALID_COMPACTION_RANGE"
    return refused.value


def test_a_call_answered_only_in_its_own_event_is_described_as_such() -> None:
    """ADK closes responses before an event's calls open: a call and its response in one event
    leave the call open. The message says so (not that the response is elsewhere)."""
    log = [
        _event(1, "i1", "user", 1.0),
        _with_parts(_event(2, "i1", "agent", 2.0), _call("c1"), _response("c1")),
        _event(3, "i2", "user", 3.0),
    ]
    refusal = _refusal(log, 1, 2)
    assert refusal.metadata["call_id"] == "c1"
    assert str(refusal) == (
        "the range 1..2 leaves call 'c1' open: nothing after event 2 answers it (the response "
        "in event 2 does not follow it)"
    )


def test_a_request_whose_call_is_before_the_range_is_described_as_such() -> None:
    """A confirmation request opened in the range for a call made before it: nothing answers it,
    and the dead-call rule only rules on calls made in or after the range."""
    placeholder = _with_parts(_event(2, "i1", "agent", 2.0), _response("c1"))
    placeholder.actions.requested_tool_confirmations["c1"].hint = "Write the file?"
    log = [
        _with_parts(_event(1, "i1", "agent", 1.0), _call("c1")),
        placeholder,
        _event(3, "i2", "user", 3.0),
    ]
    refusal = _refusal(log, 2, 2)
    assert refusal.metadata["call_id"] == "c1"
    assert "nothing answers it" in str(refusal)
    assert "outside" not in str(refusal)
    # From the call on, the call is dead (its invocation is over, nothing answers it): accepted.
    client_plan(
        log,
        first_sequence=1,
        last_sequence=2,
        rolls_up_sequence=0,
        isolation_scope=None,
        based_on_sequence=3,
    )
