"""Differential proof that the engine compacts exactly like google-adk 2.13.

Hypothesis draws a compaction configuration (sliding window, token threshold, or both) and a
multi-invocation session built step by step with ``context_strategies``' session builder: users,
several agents on their branches, tool calls with ids and responses, long-running calls, HITL
confirmation and auth requests, calls that are never answered (dead once their invocation is
over), rewinds, isolated task agents, imported summaries with odd ranges, recorded prompt token
counts on model events (or none: the cold-start estimate), and big and small texts so the
"worth compacting" gate goes both ways. While the session is drawn, google-adk's own code runs
where ADK runs it (``bench.peers.adk_compaction``):

* after every invocation, the post-invocation compaction (token threshold first, then the
  sliding window);
* before a model call, now and then, the in-flow token-threshold compaction for the calling
  agent (its name, branch and isolation scope).

A summary ADK produces is appended at the next timestamp (max + 1), and the session continues
after it. The test then replays the same points on the engine's side (``compaction_engine``: the
pure planner, ADK's prompt template over ``render_events``, ``summary_event``) and asserts at
every point: the same decision, the prompt byte for byte, and the same summary event (range,
author, content role, isolation scope; everything ADK has). Then, after every event of both logs
(each with its own summaries), the contexts for a few views are identical: ADK's ``_get_contents``
on the prefix, the engine's incremental view grown one event at a time, and a fresh
``build_contents`` (``context_compare.grow``).

Known deviations the generator avoids (both come from the proto contract, not the planner):

* every payload dict (call arguments, responses, at any depth) has at most one key: a
  ``google.protobuf.Struct`` keeps no key order, and ADK's summarizer prints payloads with
  ``str(dict)`` in insertion order;
* payloads hold no integral floats (``context_strategies`` already draws none): ``1.0`` comes
  back from the proto as ``1``, and ``str`` prints them differently.

Run: ``.venv/bin/pytest tests/compaction/test_compaction_differential.py``
(``HYPOTHESIS_PROFILE=explore`` to hunt with fresh examples).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import logging
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from bench.peers.adk_compaction import (
    AdkCompaction,
    Reply,
    Stamp,
    adk_config,
    run_post_invocation,
    run_token_threshold,
)
from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event
from google.genai import types
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from contextengine.core.adk_json import event_to_adk_dict
from contextengine.v1 import event_pb2
from tests.core.context.context_compare import (
    ENGINES,
    adk_outcome,
    describe_events,
    describe_view,
    grow,
    options_for,
)
from tests.core.context.context_strategies import (
    _BRANCH_LAYOUTS,
    T0,
    Draw,
    Session,
    View,
    _SessionBuilder,
    views,
)

from .compaction_engine import (
    EngineCompaction,
    engine_post_invocation,
    engine_token_threshold,
    one_key_payloads,
    to_proto_config,
    to_proto_event,
)

pytestmark = [
    pytest.mark.parity,
    # AuthConfig.__init__ calls its own deprecated get_credential_key() (auth/auth_tool.py).
    pytest.mark.filterwarnings(
        r"ignore:This method is deprecated\. Use credential_key instead\.:DeprecationWarning"
    ),
]

AFTER_INVOCATION = "after_invocation"
MODEL_CALL = "model_call"

#: Texts big enough to be worth compacting on their own (and a 2,500-character one).
_BIG_TEXTS = (
    "lorem ipsum dolor sit amet " * 30,
    "café ☕ naïve «quoted» 'single' \"double\" " * 12,
    "x" * 2500,
)
#: Recorded prompt token counts (0 is a recorded count, not a missing one).
_TOKEN_COUNTS = (0, 5, 60, 250, 600, 1200, 4000)
#: Summary sizes (characters of padding after "S<digest>"): the previous summary's size is what
#: the gate compares the next range with.
_PADS = (0, 0, 40, 400, 1500)


def make_reply(pads: Sequence[int]) -> Reply:
    """The fake summarizer: a pure function of the prompt, so both sides write the same
    summary for the same prompt."""

    def reply(prompt: str) -> str:
        digest = zlib.crc32(prompt.encode())
        return f"S{digest % 10_000}" + "~" * pads[digest % len(pads)]

    return reply


# ---------------------------------------------------------------------------------- generation


@contextlib.contextmanager
def _quiet_adk_logs() -> Iterator[None]:
    """ADK logs a warning for every orphan response it drops; generated sessions have many."""
    logger = logging.getLogger("google_adk")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@dataclass(frozen=True)
class Checkpoint:
    """A point where ADK ran compaction, and what it did."""

    kind: str
    #: events in the session when it ran (the summary, if any, is the event at this index)
    size: int
    stamp: Stamp
    adk: AdkCompaction
    agent_name: str = ""
    branch: str | None = None
    isolation_scope: str | None = None

    def describe(self) -> str:
        where = f"after event [{self.size - 1}]"
        if self.kind == MODEL_CALL:
            who = (
                f"model call of {self.agent_name!r} branch={self.branch!r}"
                f" scope={self.isolation_scope!r}"
            )
        else:
            who = "after the invocation"
        done = "nothing"
        if self.adk.event is not None:
            compaction = self.adk.event.actions.compaction
            assert compaction is not None
            done = (
                f"summary [+{compaction.start_timestamp - T0:g}..+{compaction.end_timestamp - T0:g}]"
                f" at +{self.stamp.timestamp - T0:g}"
            )
        return f"{who}, {where}: {done}"


@dataclass(frozen=True)
class Simulation:
    #: the session as ADK has it at the end (raw events and ADK's summaries)
    session: Session
    config: EventsCompactionConfig
    pads: tuple[int, ...]
    checkpoints: tuple[Checkpoint, ...]
    views: tuple[View, ...]

    def __repr__(self) -> str:
        config = self.config.model_dump(exclude_none=True, exclude={"summarizer"})
        lines = [
            f"config={config} pads={self.pads}",
            describe_events(self.session.events),
            "checkpoints:",
            *(f"  {checkpoint.describe()}" for checkpoint in self.checkpoints),
        ]
        return "\n".join(lines)


class _CompactingBuilder(_SessionBuilder):
    """``context_strategies``' builder, with ADK's compaction run where ADK runs it, bigger
    texts and responses, recorded prompt token counts, and one-key payloads."""

    def __init__(
        self,
        draw: Draw,
        layout: dict[str, str | None],
        config: EventsCompactionConfig,
        reply: Reply,
        runner: asyncio.Runner,
    ) -> None:
        super().__init__(draw, layout)
        self.config = config
        self.reply = reply
        self.runner = runner
        self.checkpoints: list[Checkpoint] = []

    # ----------------------------------------------------------------------- compaction points

    def _stamp(self) -> Stamp:
        number = len(self.checkpoints) + 1
        latest = max((event.timestamp for event in self.events), default=T0 + self.clock)
        return Stamp(latest + 1.0, f"summary-{number}", f"summary-inv-{number}")

    def _record(self, checkpoint: Checkpoint) -> None:
        self.checkpoints.append(checkpoint)
        event = checkpoint.adk.event
        if event is None:
            return
        assert len(self.events) == checkpoint.size
        self.events.append(event)
        self.clock = event.timestamp - T0
        if event.isolation_scope is not None:
            self.scopes.add(event.isolation_scope)

    def after_invocation(self) -> None:
        stamp = self._stamp()
        adk = self.runner.run(
            run_post_invocation(self.events, self.config, reply=self.reply, stamp=stamp)
        )
        self._record(Checkpoint(AFTER_INVOCATION, len(self.events), stamp, adk))

    def model_call(self) -> None:
        stamp = self._stamp()
        adk = self.runner.run(
            run_token_threshold(
                self.events,
                self.config,
                agent_name=self.agent,
                branch=self.branch,
                isolation_scope=self.scope,
                reply=self.reply,
                stamp=stamp,
            )
        )
        self._record(
            Checkpoint(
                MODEL_CALL, len(self.events), stamp, adk, self.agent, self.branch, self.scope
            )
        )

    # ------------------------------------------------------------------------------ overrides

    def new_invocation(self) -> str:
        if self.invocation:
            self.after_invocation()  # the previous invocation is complete
        return super().new_invocation()

    def model_metadata(self) -> dict[str, Any]:
        if self.config.token_threshold is not None and self.draw(st.integers(0, 2)) > 0:
            self.model_call()
        kind = self.draw(st.sampled_from(("count", "count", "none", "no_count")))
        if kind == "none":
            return {}
        count = self.draw(st.sampled_from(_TOKEN_COUNTS)) if kind == "count" else None
        return {
            "usage_metadata": types.GenerateContentResponseUsageMetadata(
                prompt_token_count=count, candidates_token_count=12
            )
        }

    def text(self) -> str:
        if self.draw(st.integers(0, 3)) == 3:
            return str(self.draw(st.sampled_from(_BIG_TEXTS)))
        return super().text()

    def response_part(self, call: Any, response: Any = None, *, streaming: bool = False) -> Any:
        if response is None and self.draw(st.integers(0, 5)) == 5:
            response = {"result": "r" * 2100}  # cut at 2,000 characters in the prompt
        return super().response_part(call, response, streaming=streaming)

    def emit(self, *, same_time: bool = False, **kwargs: Any) -> Event:
        content = kwargs.get("content")
        if content is not None:
            kwargs["content"] = one_key_payloads(content)
        return super().emit(same_time=same_time, **kwargs)


#: Step weights of each kind of simulation.
_WEIGHTS: dict[str, dict[str, int]] = {
    # plain turns: the sliding window's invocation counting and the size gate
    "conversation": {
        "user_turn": 6,
        "agent_text": 6,
        "tool_round": 2,
        "answer_pending": 1,
        "switch_agent": 1,
        "rewind": 1,
        "noise": 1,
    },
    # obligations: pending, long-running, dead and HITL calls, split points
    "tools": {
        "user_turn": 4,
        "agent_text": 2,
        "tool_round": 5,
        "answer_pending": 4,
        "lr_progress": 2,
        "compacted_lr": 1,
        "batch_results": 1,
        "orphan": 1,
        "confirmation": 2,
        "auth": 2,
        "rewind": 1,
        "compaction": 1,
    },
    # several agents, branches, isolated task agents (in-flow compaction in their scope)
    "agents": {
        "user_turn": 4,
        "agent_text": 4,
        "tool_round": 2,
        "answer_pending": 1,
        "switch_agent": 3,
        "transfer": 2,
        "tool_progress": 1,
        "task": 3,
        "transcription": 1,
        "rewind": 1,
        "compaction": 1,
        "noise": 1,
    },
}


@st.composite
def configs(draw: Draw) -> EventsCompactionConfig:
    kind = draw(st.sampled_from(("sliding", "token", "both")))
    kwargs: dict[str, int] = {}
    if kind != "token":
        kwargs["compaction_interval"] = draw(st.integers(1, 4))
        kwargs["overlap_size"] = draw(st.integers(0, 2))
    if kind != "sliding":
        kwargs["token_threshold"] = draw(st.sampled_from((1, 40, 150, 500, 1500)))
        kwargs["event_retention_size"] = draw(st.integers(0, 4))
    return adk_config(**kwargs)


@st.composite
def simulations(draw: Draw, kind: str, max_steps: int = 24) -> Simulation:
    config = draw(configs())
    pads = tuple(draw(st.lists(st.sampled_from(_PADS), min_size=1, max_size=3)))
    weights = _WEIGHTS[kind]
    menu = [step for step, weight in weights.items() for _ in range(weight)]
    with _quiet_adk_logs(), asyncio.Runner() as runner:
        builder = _CompactingBuilder(
            draw, draw(st.sampled_from(_BRANCH_LAYOUTS)), config, make_reply(pads), runner
        )
        builder.user_turn()
        steps = 0
        while steps < 3 or (steps < max_steps and draw(st.integers(0, 11)) > 0):
            getattr(builder, draw(st.sampled_from(menu)))()
            steps += 1
        if builder.invocation:
            builder.after_invocation()  # the last invocation is complete too
    session = Session(
        events=tuple(builder.events),
        branches=tuple(sorted(builder.branches)),
        scopes=tuple(sorted(builder.scopes)),
        homes=tuple(builder.layout.items()),
    )
    drawn_views = draw(st.lists(views(session, "default"), min_size=1, max_size=3))
    return Simulation(session, config, pads, tuple(builder.checkpoints), tuple(drawn_views))


# ------------------------------------------------------------------------------------ checking


def _prompt_diff(expected: Sequence[str], actual: Sequence[str]) -> str:
    if len(expected) != 1 or len(actual) != 1:
        return f"ADK prompts: {list(expected)!r}\nour prompts: {list(actual)!r}"
    lines = difflib.unified_diff(
        expected[0].splitlines(), actual[0].splitlines(), "ADK", "ours", lineterm="", n=1
    )
    return "prompt diff:\n" + "\n".join(lines)


def _ours_as_adk(event: event_pb2.Event) -> Event:
    return Event.model_validate(event_to_adk_dict(event))


def _check_checkpoint(
    simulation: Simulation, checkpoint: Checkpoint, ours: EngineCompaction, test: str
) -> None:
    events = simulation.session.events
    expected = checkpoint.adk.prompts
    actual = () if ours.prompt is None else (ours.prompt,)

    def fail(what: str, detail: str) -> None:
        raise AssertionError(
            f"{test}: {what} at {checkpoint.describe()}\n"
            f"engine plan: {ours.result.plan is not None} ({ours.result.skipped or 'planned'})\n"
            f"{detail}\n"
            f"session ({len(events)} events):\n{simulation!r}"
        )

    if (checkpoint.adk.event is None) != (ours.event is None):
        fail("different decision", _prompt_diff(expected, actual))
    if expected != actual:
        fail("different prompt", _prompt_diff(expected, actual))
    if checkpoint.adk.event is None or ours.event is None:
        return
    theirs, mine = checkpoint.adk.event, _ours_as_adk(ours.event)
    assert theirs.actions.compaction is not None
    assert mine.actions.compaction is not None
    assert theirs.actions.compaction.compacted_content is not None
    assert mine.actions.compaction.compacted_content is not None
    pairs = {
        "range": (
            (theirs.actions.compaction.start_timestamp, theirs.actions.compaction.end_timestamp),
            (mine.actions.compaction.start_timestamp, mine.actions.compaction.end_timestamp),
        ),
        "author": (theirs.author, mine.author),
        "role": (
            theirs.actions.compaction.compacted_content.role,
            mine.actions.compaction.compacted_content.role,
        ),
        "isolation scope": (theirs.isolation_scope, mine.isolation_scope),
        "event": (theirs, mine),
    }
    for what, (adk_value, our_value) in pairs.items():
        if adk_value != our_value:
            fail(f"different summary {what}", f"ADK:  {adk_value!r}\nours: {our_value!r}")


def _check_contexts(simulation: Simulation, log: Sequence[event_pb2.Event], test: str) -> None:
    """After every event of the log (ADK's summaries in ADK's, ours in ours, at the same
    places), the pure engine's incremental view and a fresh build equal ADK's context."""
    events = simulation.session.events
    drawn = list(simulation.views)
    options = [options_for(view) for view in drawn]
    with _quiet_adk_logs():
        for step, answers in enumerate(grow(ENGINES[0], log, options), start=1):
            prefix = events[:step]
            for view, view_answers in zip(drawn, answers, strict=True):
                expected = adk_outcome(prefix, view)
                for how, actual in view_answers:
                    if expected.error is None and actual == expected:
                        continue
                    if expected.error is not None and actual.error is not None:
                        continue  # ADK fails on this session; so does the engine
                    raise AssertionError(
                        f"{test}: contexts differ ({how}) after event [{step - 1}]"
                        f" ({step} of {len(events)})\nview: {describe_view(view)}\n"
                        f"ADK:\n{expected}\nours:\n{actual}\nsession:\n{simulation!r}"
                    )


def check(simulation: Simulation, test: str) -> None:
    """Replays ``simulation`` on the engine's side and compares every step with ADK's."""
    events = simulation.session.events
    config = to_proto_config(simulation.config)
    reply = make_reply(simulation.pads)
    log: list[event_pb2.Event] = []
    memo: dict[int, int] = {}

    def sync(size: int) -> None:
        while len(log) < size:
            log.append(to_proto_event(events[len(log)], len(log) + 1))

    for checkpoint in simulation.checkpoints:
        sync(checkpoint.size)
        with _quiet_adk_logs():
            if checkpoint.kind == AFTER_INVOCATION:
                ours = engine_post_invocation(
                    log, config, reply=reply, stamp=checkpoint.stamp, memo=memo
                )
            else:
                ours = engine_token_threshold(
                    log,
                    config,
                    agent_name=checkpoint.agent_name,
                    branch=checkpoint.branch,
                    isolation_scope=checkpoint.isolation_scope,
                    reply=reply,
                    stamp=checkpoint.stamp,
                    memo=memo,
                )
        _check_checkpoint(simulation, checkpoint, ours, test)
        if ours.event is not None:
            assert events[checkpoint.size] is checkpoint.adk.event
            log.append(ours.event)
    sync(len(events))
    _check_contexts(simulation, log, test)


def _settings(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        print_blob=True,
        # no Phase.explain: on Python 3.11 it traces every line and a failing run then takes minutes
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ------------------------------------------------------------------------------ property tests


@_settings(90)
@given(simulation=simulations("conversation"))
def test_conversations_compact_like_adk(simulation: Simulation) -> None:
    """Plain turns with big and small texts and summaries: invocation counting, overlap, the
    size gate, token thresholds with and without recorded counts."""
    check(simulation, "test_conversations_compact_like_adk")


@_settings(120)
@given(simulation=simulations("tools"))
def test_tool_sessions_compact_like_adk(simulation: Simulation) -> None:
    """Pending, long-running, dead and HITL calls: self-contained prefixes and split points."""
    check(simulation, "test_tool_sessions_compact_like_adk")


@_settings(90)
@given(simulation=simulations("agents"))
def test_multi_agent_sessions_compact_like_adk(simulation: Simulation) -> None:
    """Several agents and branches, isolated task agents compacting in their own scope,
    imported summaries with odd ranges, rewinds."""
    check(simulation, "test_multi_agent_sessions_compact_like_adk")
