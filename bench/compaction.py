"""Compaction: how big the contexts stay, how often summaries are written, and who waits for them.

Workload: a generated (seeded) agent session of 500 invocations (``--quick``: 150) of a travel
agent with tools: the user's message, 0-3 tool rounds (a model call that emits one to three
function calls, sometimes with a short text, then the tool results: flight and hotel searches,
bookings, forecasts, some of them long), the agent's answer. Every model call is preceded by
building its context; the fake model then reports a ``prompt_token_count`` of that context
(ADK's ``chars // 4`` count of the contents, plus ``SYSTEM_PROMPT_TOKENS`` for the instruction
and the tool declarations) in the event's usage metadata, as a real model would.

The session is replayed in two compaction modes: a sliding window (``compaction_interval=10``,
``overlap_size=2``) and a token threshold (``token_threshold=8000``, ``event_retention_size=12``),
through

* **ADK**: google-adk 2.13 in this process: an ``App`` with the mode's
  ``EventsCompactionConfig`` and an ``LlmEventSummarizer`` over a fake, instant ``BaseLlm``; before
  each model call ADK's in-flow token check (``_run_compaction_for_token_threshold_config`` with the
  agent's name, as its ``CompactionRequestProcessor`` does) and ``_get_contents``; after each
  invocation the runner's post-invocation compaction (``_run_compaction_for_sliding_window``,
  token threshold first). Context size: ``chars // 4`` of the contents (ADK's own estimate).
* **engine**: this sidecar as a child process over gRPC, with its default (extractive)
  summarizer: AppendEvent per event, BuildContext before each model call (which runs the in-flow
  token check itself), EndInvocation after each invocation, then GetCompactionStatus polled until
  the background compaction is over (so that the replay is deterministic and comparable with
  ADK's inline compaction). Context size: BuildContext's ``token_estimate`` (tiktoken
  cl100k_base), and ``chars // 4`` of the same contents for the comparison with ADK.
* **engine, slow summarizer**: an in-process server (its own thread and event loop) whose
  summarizer is the extractive one behind an injected delay of ``SLOW_SUMMARY_SECONDS``, with
  nothing waited for after EndInvocation. The latencies of AppendEvent and BuildContext are
  split by whether the call overlapped a running summarizer call and, in token mode, whether the
  last reported prompt had already reached the threshold (then BuildContext has to wait for the
  summary: ADK's in-flow rule). Appends never wait, nor do contexts below the threshold.

The two engines' summaries differ (ADK's fake model writes a deterministic extract of the prompt,
the engine's extractive summarizer its own), so after the first summary the sessions diverge
slightly. Data checks: up to the first summary, both engines' contexts have the same size for every
request; every replay compacted at least once; the engine's status counts as many summaries as its
log holds. The plot of context tokens per request is written next to the JSON results.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import tempfile
import threading
import time
import warnings
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.compaction import (
    _count_chars_in_content,
    _run_compaction_for_sliding_window,
    _run_compaction_for_token_threshold_config,
)
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event as AdkEvent
from google.adk.flows.llm_flows.context._contents import _get_contents
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions.session import Session as AdkSession
from google.genai import types
from pydantic import PrivateAttr

from bench import DataCheckError, Options, Report, number, table
from bench.context import percentile, random_text
from bench.peers.adk_compaction import AppendOnlySessionService
from bench.sidecar import Sidecar
from contextengine.client import ContextEngineClient
from contextengine.compaction.summarizers.factory import summarizer_from_config
from contextengine.compaction.summarizers.gemini import GeminiSettings
from contextengine.compaction.summarizers.summarizer import Summarizer, Summary, SummaryInput
from contextengine.core.structs import dict_to_struct, struct_to_dict
from contextengine.testing import start_local_server
from contextengine.v1 import config_pb2, content_pb2, event_pb2

APP = "bench_compaction"
USER = "user-1"
AGENT = "travel_agent"
SEED = 20_260_412

INVOCATIONS = 500
QUICK_INVOCATIONS = 150

#: added to a context's chars // 4 for the prompt token count the fake model reports
SYSTEM_PROMPT_TOKENS = 400
#: the delay of the slow summarizer variant
SLOW_SUMMARY_SECONDS = 0.2
#: the fake ADK summarizer's budget (the extractive summarizer's default is 2000 too)
FAKE_SUMMARY_CHARS = 2000

START_TIMEOUT_SECONDS = 30.0
CALL_TIMEOUT_SECONDS = 60.0
COMPACTION_WAIT_SECONDS = 60.0

ModeName = Literal["sliding", "token"]


@dataclass(frozen=True)
class Mode:
    name: ModeName
    compaction_interval: int | None = None
    overlap_size: int | None = None
    token_threshold: int | None = None
    event_retention_size: int | None = None

    @property
    def label(self) -> str:
        if self.name == "sliding":
            return (
                f"sliding window (interval {self.compaction_interval}, overlap {self.overlap_size})"
            )
        return (
            f"token threshold ({self.token_threshold} tokens, "
            f"retention {self.event_retention_size} events)"
        )

    def proto(self) -> config_pb2.EventsCompactionConfig:
        config = config_pb2.EventsCompactionConfig()
        if self.compaction_interval is not None and self.overlap_size is not None:
            config.compaction_interval = self.compaction_interval
            config.overlap_size = self.overlap_size
        if self.token_threshold is not None and self.event_retention_size is not None:
            config.token_threshold = self.token_threshold
            config.event_retention_size = self.event_retention_size
        return config


MODES = (
    Mode("sliding", compaction_interval=10, overlap_size=2),
    Mode("token", token_threshold=8_000, event_retention_size=12),
)


# The workload ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolUse:
    call_id: str
    name: str
    args: dict[str, Any]
    result: dict[str, Any]


@dataclass(frozen=True)
class ToolRound:
    text: str | None
    calls: tuple[ToolUse, ...]


@dataclass(frozen=True)
class InvocationSpec:
    invocation_id: str
    user: str
    rounds: tuple[ToolRound, ...]
    answer: str


CITIES = ("Paris", "Tokyo", "Lisbon", "Montreal", "Nairobi", "Seoul", "Lima", "Oslo", "Cairo")
AIRLINES = ("AF", "NH", "LH", "TP", "AC", "KQ", "KE", "LA", "SK", "MS")


def _tool(rng: random.Random, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Arguments and a result for one call of ``name``; searches return long lists."""
    city, other = rng.sample(CITIES, 2)
    day = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if name == "search_flights":
        args: dict[str, Any] = {"origin": city, "destination": other, "date": day}
        if rng.random() < 0.5:
            args["passengers"] = rng.randint(1, 4)
        flights = [
            {
                "flight": f"{rng.choice(AIRLINES)}{rng.randint(10, 9999)}",
                "depart": f"{rng.randint(0, 23):02d}:{rng.choice((0, 15, 30, 45)):02d}",
                "stops": rng.choice((0, 0, 1, 2)),
                "price_eur": round(rng.uniform(90, 2400), 2),
                "note": random_text(rng, 20, 80),
            }
            for _ in range(rng.randint(2, 8))
        ]
        return args, {"flights": flights}
    if name == "search_hotels":
        args = {"city": other, "check_in": day, "nights": rng.randint(1, 9)}
        hotels = [
            {
                "name": f"Hotel {random_text(rng, 5, 20).rstrip('.')}",
                "price_eur": round(rng.uniform(40, 600), 2),
                "rating": round(rng.uniform(2.5, 5.0), 1),
                "summary": random_text(rng, 40, 160),
            }
            for _ in range(rng.randint(2, 6))
        ]
        return args, {"hotels": hotels}
    if name == "get_weather":
        args = {"city": other, "date": day}
        return args, {
            "high_c": rng.randint(-5, 38),
            "low_c": rng.randint(-15, 25),
            "rain_pct": rng.randint(0, 100),
        }
    if name == "book":
        args = {"item": f"{rng.choice(AIRLINES)}{rng.randint(10, 9999)}", "travellers": 2}
        return args, {
            "status": rng.choice(("confirmed", "confirmed", "waitlisted")),
            "reference": f"PNR-{rng.getrandbits(24):06X}",
            "total_eur": round(rng.uniform(90, 4800), 2),
        }
    args = {"query": random_text(rng, 10, 60)}
    return args, {"answer": random_text(rng, 60, 400)}


TOOLS = ("search_flights", "search_hotels", "get_weather", "book", "lookup_policy")


def _integral(value: Any) -> Any:
    """``value`` with integral floats as ints: a Struct holds every number as a double, and the
    engine's side reads integral ones back as ints, so both sides print the same JSON."""
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def generate(seed: int, invocations: int) -> list[InvocationSpec]:
    rng = random.Random(seed)
    out: list[InvocationSpec] = []
    calls = 0
    for index in range(invocations):
        rounds: list[ToolRound] = []
        for _ in range(rng.choices((0, 1, 2, 3), weights=(3, 4, 2, 1))[0]):
            uses: list[ToolUse] = []
            for name in rng.sample(TOOLS, rng.choices((1, 2, 3), weights=(8, 2, 1))[0]):
                calls += 1
                args, result = _tool(rng, name)
                uses.append(ToolUse(f"call-{calls}", name, _integral(args), _integral(result)))
            text = random_text(rng, 40, 160) if rng.random() < 0.25 else None
            rounds.append(ToolRound(text, tuple(uses)))
        out.append(
            InvocationSpec(
                f"inv-{index + 1:04d}", random_text(rng), tuple(rounds), random_text(rng, 60, 400)
            )
        )
    return out


# Events, for both engines ------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One event of the replay, before it becomes an ADK event or a proto."""

    author: str
    role: str
    texts: tuple[str, ...] = ()
    calls: tuple[ToolUse, ...] = ()
    responses: tuple[ToolUse, ...] = ()
    prompt_tokens: int | None = None


class Clock:
    """Wall-clock timestamps (the engine stamps its summaries with its own wall clock), strictly
    increasing."""

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self) -> float:
        self._last = max(time.time(), self._last + 1e-6)
        return self._last


def to_adk(message: Message, event_id: str, invocation_id: str, ts: float) -> AdkEvent:
    parts = [types.Part(text=text) for text in message.texts]
    parts.extend(
        types.Part(function_call=types.FunctionCall(id=use.call_id, name=use.name, args=use.args))
        for use in message.calls
    )
    parts.extend(
        types.Part(
            function_response=types.FunctionResponse(
                id=use.call_id, name=use.name, response=use.result
            )
        )
        for use in message.responses
    )
    usage = None
    if message.prompt_tokens is not None:
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=message.prompt_tokens, candidates_token_count=50
        )
    return AdkEvent(
        id=event_id,
        invocation_id=invocation_id,
        author=message.author,
        timestamp=ts,
        content=types.Content(role=message.role, parts=parts),
        usage_metadata=usage,
    )


def to_proto(message: Message, event_id: str, invocation_id: str, ts: float) -> event_pb2.Event:
    parts = [content_pb2.Part(text=text) for text in message.texts]
    parts.extend(
        content_pb2.Part(
            function_call=content_pb2.FunctionCall(
                id=use.call_id, name=use.name, args=dict_to_struct(use.args)
            )
        )
        for use in message.calls
    )
    parts.extend(
        content_pb2.Part(
            function_response=content_pb2.FunctionResponse(
                id=use.call_id, name=use.name, response=dict_to_struct(use.result)
            )
        )
        for use in message.responses
    )
    event = event_pb2.Event(
        id=event_id,
        invocation_id=invocation_id,
        author=message.author,
        timestamp=ts,
        content=content_pb2.Content(role=message.role, parts=parts),
    )
    if message.prompt_tokens is not None:
        event.usage_metadata.prompt_token_count = message.prompt_tokens
        event.usage_metadata.candidates_token_count = 50
    return event


def proto_chars(content: content_pb2.Content) -> int:
    """ADK's ``_count_chars_in_content`` for a proto content (integral numbers as ints, as
    they were before the Struct made them doubles)."""
    total = 0
    for part in content.parts:
        total += len(part.text)
        if part.HasField("function_call"):
            call = part.function_call
            total += len(call.name)
            if call.args.fields:
                total += len(json.dumps(struct_to_dict(call.args, "args")))
        if part.HasField("function_response"):
            response = part.function_response
            total += len(response.name)
            if response.response.fields:
                total += len(json.dumps(struct_to_dict(response.response, "response")))
    return total


def adk_chars(content: types.Content | None) -> int:
    return _count_chars_in_content(content)


# Replay ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One model call's context."""

    invocation: int
    #: the engine's size measure (tiktoken for the engine; chars // 4 for ADK)
    tokens: int
    chars: int
    contents: int
    #: chars // 4 of every raw event so far: the context without any compaction
    uncompacted: int
    #: a summary had been appended before this request
    after_summary: bool


@dataclass(frozen=True)
class Call:
    """One timed engine call."""

    kind: Literal["AppendEvent", "BuildContext"]
    start: float
    end: float
    #: the last prompt token count reported before the call, and when it was reported
    last_prompt: int
    last_prompt_at: float

    @property
    def ms(self) -> float:
        return (self.end - self.start) * 1000.0


@dataclass
class Run:
    engine: str
    mode: Mode
    requests: list[Request] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    summarizer_calls: int = 0
    summaries: int = 0
    #: summaries appended by the in-flow token check (before a model call)
    inflow_summaries: int = 0
    seconds: float = 0.0
    #: ADK only: time of its steps, ms
    contents_ms: list[float] = field(default_factory=list)
    inflow_ms: list[float] = field(default_factory=list)
    post_invocation_ms: list[float] = field(default_factory=list)
    #: engine only: time from EndInvocation to the end of the background compaction, ms
    settle_ms: list[float] = field(default_factory=list)
    #: slow variant: the summarizer calls (start, end), perf_counter
    summarizing: list[tuple[float, float]] = field(default_factory=list)

    def series(self, attribute: str) -> list[int]:
        return [int(getattr(request, attribute)) for request in self.requests]


class Backend(Protocol):
    run: Run

    async def append(self, message: Message, invocation: int, invocation_id: str) -> None: ...

    async def model_call(self, invocation: int) -> int:
        """Builds the next context; returns its chars // 4."""
        ...

    async def end_invocation(self, invocation: int, invocation_id: str) -> None: ...


async def replay(workload: Sequence[InvocationSpec], backend: Backend) -> None:
    started = time.perf_counter()
    for index, spec in enumerate(workload):
        await backend.append(Message("user", "user", (spec.user,)), index, spec.invocation_id)
        for round_ in spec.rounds:
            prompt = await backend.model_call(index) + SYSTEM_PROMPT_TOKENS
            texts = (round_.text,) if round_.text else ()
            await backend.append(
                Message(AGENT, "model", texts, calls=round_.calls, prompt_tokens=prompt),
                index,
                spec.invocation_id,
            )
            await backend.append(
                Message(AGENT, "user", responses=round_.calls), index, spec.invocation_id
            )
        prompt = await backend.model_call(index) + SYSTEM_PROMPT_TOKENS
        await backend.append(
            Message(AGENT, "model", (spec.answer,), prompt_tokens=prompt), index, spec.invocation_id
        )
        await backend.end_invocation(index, spec.invocation_id)
    backend.run.seconds = time.perf_counter() - started


# ADK ---------------------------------------------------------------------------------------


def fake_summary(prompt: str) -> str:
    """What the fake summarizer model answers: a deterministic extract of the prompt's history
    (earlier summary, user requests, tools, the agent's latest statements), at most
    ``FAKE_SUMMARY_CHARS`` characters."""
    history = prompt.split("\n\n", 1)[-1]
    earlier: list[str] = []
    requests: list[str] = []
    facts: list[str] = []
    tools: Counter[str] = Counter()
    current: list[str] | None = None
    for line in history.splitlines():
        if line.startswith("model: "):
            current = earlier
            earlier.append(line.removeprefix("model: "))
        elif line.startswith("user: "):
            current = None
            requests.append(line.removeprefix("user: "))
        elif f"{AGENT} called tool: " in line:
            current = None
            tools[line.split("called tool: ", 1)[1].split("(", 1)[0]] += 1
        elif line.startswith(f"{AGENT}: "):
            current = None
            facts.append(line.removeprefix(f"{AGENT}: "))
        elif line.startswith("Tool response from "):
            current = None
        elif current is not None:
            current.append(line)

    def block(title: str, lines: Sequence[str], budget: int, latest: bool) -> str:
        chosen: list[str] = []
        used = len(title)
        for line in reversed(lines) if latest else lines:
            cost = min(len(line), 200) + 3
            if used + cost > budget:
                break
            chosen.append(line[:200])
            used += cost
        if latest:
            chosen.reverse()
        return "\n".join([title, *(f"- {line}" for line in chosen)]) if chosen else ""

    tool_line = "Tools called: " + ", ".join(f"{name} ({n})" for name, n in tools.items())
    parts = [
        block("Earlier summary:", earlier, FAKE_SUMMARY_CHARS * 3 // 10, latest=False),
        block("User requests:", requests, FAKE_SUMMARY_CHARS * 3 // 10, latest=True),
        tool_line[: FAKE_SUMMARY_CHARS // 4] if tools else "",
    ]
    used = sum(len(part) + 1 for part in parts)
    parts.append(block("Key facts:", facts, FAKE_SUMMARY_CHARS - used, latest=True))
    return "\n".join(part for part in parts if part)[:FAKE_SUMMARY_CHARS] or "Nothing to report."


class FakeSummaryLlm(BaseLlm):
    """An instant summarizer model: answers :func:`fake_summary` of the prompt; counts calls."""

    model: str = "fake-summarizer"
    _calls: int = PrivateAttr(default=0)

    @property
    def calls(self) -> int:
        return self._calls

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._calls += 1
        parts = (llm_request.contents[0].parts or []) if llm_request.contents else []
        prompt = "".join(part.text or "" for part in parts)
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=fake_summary(prompt))])
        )


@contextlib.contextmanager
def _experimental_warnings_ignored() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
        yield


class AdkBackend:
    def __init__(self, mode: Mode) -> None:
        self.run = Run("ADK", mode)
        self.llm = FakeSummaryLlm()
        with _experimental_warnings_ignored():
            summarizer = LlmEventSummarizer(llm=self.llm)
            self.config = EventsCompactionConfig(
                compaction_interval=mode.compaction_interval,
                overlap_size=mode.overlap_size,
                token_threshold=mode.token_threshold,
                event_retention_size=mode.event_retention_size,
                summarizer=summarizer,
            )
            self.agent = LlmAgent(name=AGENT, model=self.llm)
            self.app = App(name=APP, root_agent=self.agent, events_compaction_config=self.config)
        self.session = AdkSession(id="session", app_name=APP, user_id=USER, events=[])
        self.service = AppendOnlySessionService()
        self.clock = Clock()
        self.raw_chars = 0
        self.count = 0

    def _summaries(self) -> int:
        return sum(1 for event in self.session.events if event.actions.compaction)

    async def append(self, message: Message, invocation: int, invocation_id: str) -> None:
        self.count += 1
        event = to_adk(message, f"e-{self.count}", invocation_id, self.clock())
        self.raw_chars += adk_chars(event.content)
        await self.service.append_event(session=self.session, event=event)

    async def model_call(self, invocation: int) -> int:
        run = self.run
        if run.mode.token_threshold is not None:
            before = self._summaries()
            started = time.perf_counter()
            with _experimental_warnings_ignored():
                await _run_compaction_for_token_threshold_config(
                    config=self.config,
                    session=self.session,
                    session_service=self.service,
                    agent=self.agent,
                    agent_name=AGENT,
                    current_branch=None,
                    isolation_scope=None,
                )
            run.inflow_ms.append((time.perf_counter() - started) * 1000.0)
            run.inflow_summaries += self._summaries() - before
        started = time.perf_counter()
        contents = _get_contents(None, self.session.events, AGENT)
        run.contents_ms.append((time.perf_counter() - started) * 1000.0)
        chars = sum(adk_chars(content) for content in contents)
        run.requests.append(
            Request(
                invocation,
                chars // 4,
                chars,
                len(contents),
                self.raw_chars // 4,
                self._summaries() > 0,
            )
        )
        return chars // 4

    async def end_invocation(self, invocation: int, invocation_id: str) -> None:
        started = time.perf_counter()
        with _experimental_warnings_ignored():
            async with contextlib.aclosing(
                _run_compaction_for_sliding_window(self.app, self.session, self.service)
            ) as events:
                async for event in events:  # what the runner does with the yielded event
                    await self.service.append_event(session=self.session, event=event)
        self.run.post_invocation_ms.append((time.perf_counter() - started) * 1000.0)

    def finish(self) -> None:
        self.run.summarizer_calls = self.llm.calls
        self.run.summaries = self._summaries()


# The engine --------------------------------------------------------------------------------


class EngineBackend:
    def __init__(
        self, client: ContextEngineClient, session_id: str, mode: Mode, engine: str, *, wait: bool
    ) -> None:
        self.run = Run(engine, mode)
        self.client = client
        self.session_id = session_id
        self.wait = wait
        self.clock = Clock()
        self.raw_chars = 0
        self.count = 0
        self.last_prompt = 0
        self.last_prompt_at = 0.0
        self.summary_seen = False

    def _record(self, kind: Literal["AppendEvent", "BuildContext"], start: float) -> None:
        self.run.calls.append(
            Call(kind, start, time.perf_counter(), self.last_prompt, self.last_prompt_at)
        )

    async def append(self, message: Message, invocation: int, invocation_id: str) -> None:
        self.count += 1
        event = to_proto(message, f"e-{self.count}", invocation_id, self.clock())
        self.raw_chars += proto_chars(event.content)
        started = time.perf_counter()
        await self.client.append_event(APP, USER, self.session_id, event)
        self._record("AppendEvent", started)
        if message.prompt_tokens is not None:
            self.last_prompt = message.prompt_tokens
            self.last_prompt_at = time.perf_counter()

    async def model_call(self, invocation: int) -> int:
        started = time.perf_counter()
        response = await self.client.build_context(APP, USER, self.session_id, agent_name=AGENT)
        self._record("BuildContext", started)
        if response.compaction_sequence:
            self.run.inflow_summaries += 1
        chars = sum(proto_chars(content) for content in response.contents)
        # a summary in the context: the first content of a compacted context is a summary
        self.summary_seen = self.summary_seen or bool(response.compaction_sequence)
        self.run.requests.append(
            Request(
                invocation,
                response.token_estimate.tokens,
                chars,
                len(response.contents),
                self.raw_chars // 4,
                self.summary_seen,
            )
        )
        return chars // 4

    async def end_invocation(self, invocation: int, invocation_id: str) -> None:
        started = time.perf_counter()
        scheduled = await self.client.end_invocation(APP, USER, self.session_id, invocation_id)
        if not (scheduled and self.wait):
            return
        await self.settle()
        self.run.settle_ms.append((time.perf_counter() - started) * 1000.0)

    async def settle(self) -> None:
        deadline = time.monotonic() + COMPACTION_WAIT_SECONDS
        while True:
            status = await self.client.compaction_status(APP, USER, self.session_id)
            if not status.running:
                if status.summaries:
                    self.summary_seen = True
                return
            if time.monotonic() > deadline:
                raise DataCheckError(f"a compaction still runs after {COMPACTION_WAIT_SECONDS} s")
            await asyncio.sleep(0.002)

    async def finish(self) -> None:
        await self.settle()
        status = await self.client.compaction_status(APP, USER, self.session_id)
        self.run.summarizer_calls = status.attempts
        self.run.summaries = status.summaries
        in_log = 0
        async for event in self.client.list_events(APP, USER, self.session_id):
            in_log += event.actions.HasField("compaction")
        if in_log != status.summaries:
            raise DataCheckError(
                f"{self.run.engine}, {self.run.mode.name}: GetCompactionStatus counts "
                f"{status.summaries} summaries, the log holds {in_log}"
            )


async def _engine_session(
    client: ContextEngineClient,
    mode: Mode,
    workload: Sequence[InvocationSpec],
    engine: str,
    wait: bool,
) -> EngineBackend:
    await client.update_app_config(
        config_pb2.AppConfig(app_name=APP, events_compaction_config=mode.proto())
    )
    session = await client.create_session(APP, USER, f"{engine}-{mode.name}".replace(" ", "-"))
    backend = EngineBackend(client, session.id, mode, engine, wait=wait)
    await replay(workload, backend)
    await backend.finish()
    return backend


class SlowSummarizer:
    """The default (extractive) summarizer behind a delay; records when it ran."""

    def __init__(self, inner: Summarizer, delay: float, log: list[tuple[float, float]]) -> None:
        self.inner = inner
        self.delay = delay
        self.log = log
        self.name = f"{inner.name}+{delay:g}s"

    async def summarize(self, request: SummaryInput) -> Summary | None:
        started = time.perf_counter()
        await asyncio.sleep(self.delay)
        try:
            return await self.inner.summarize(request)
        finally:
            self.log.append((started, time.perf_counter()))


class ThreadedServer:
    """``start_local_server`` on its own thread and event loop (so that the benchmark's client
    does not share a loop with it), with the slow summarizer."""

    def __init__(
        self,
        db: str,
        summarizers: Callable[[config_pb2.SummarizerConfig | None], Summarizer | None],
    ) -> None:
        self.db = db
        self.summarizers = summarizers
        self.target = ""
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="bench-server", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:  # reported by start()
            self._error = error
            self._ready.set()

    async def _serve(self) -> None:
        async with start_local_server(self.db, summarizers=self.summarizers) as server:
            self.target = server.target
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()

    async def __aenter__(self) -> ThreadedServer:
        self._thread.start()
        await asyncio.to_thread(self._ready.wait, START_TIMEOUT_SECONDS)
        if self._error is not None or not self.target:
            raise RuntimeError(f"the in-process server did not start: {self._error!r}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        await asyncio.to_thread(self._thread.join, START_TIMEOUT_SECONDS)


# Analysis ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    kind: str
    label: str
    latencies_ms: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.kind,
            "group": self.label,
            "count": len(self.latencies_ms),
            "p50_ms": percentile(self.latencies_ms, 0.5) if self.latencies_ms else None,
            "p99_ms": percentile(self.latencies_ms, 0.99) if self.latencies_ms else None,
        }


NOT_RUNNING = "no compaction running"
RUNNING = "compaction running, below threshold"
RUNNING_OVER = "compaction running, threshold reached"


def split_calls(run: Run) -> list[Group]:
    """The calls of ``run`` by whether a summarizer call overlapped them and whether the last
    prompt had reached the token threshold (and no summary was written since)."""
    threshold = run.mode.token_threshold
    groups: dict[tuple[str, str], list[float]] = {}
    for call in run.calls:
        overlapping = any(s < call.end and e > call.start for s, e in run.summarizing)
        over = (
            threshold is not None
            and call.last_prompt >= threshold
            and not any(call.last_prompt_at < e <= call.start for _, e in run.summarizing)
        )
        label = NOT_RUNNING if not overlapping else RUNNING_OVER if over else RUNNING
        groups.setdefault((call.kind, label), []).append(call.ms)
    order = {NOT_RUNNING: 0, RUNNING: 1, RUNNING_OVER: 2}
    return [
        Group(kind, label, tuple(values))
        for (kind, label), values in sorted(
            groups.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])
        )
    ]


def _mean(values: Sequence[int]) -> float:
    return sum(values) / len(values) if values else float("nan")


def first_divergence(adk: Run, engine: Run) -> tuple[int, int]:
    """Checks that both engines' contexts have the same size and length up to the first request
    made after a summary in either; returns (requests compared, index of that request)."""
    compared = 0
    for index, (a, b) in enumerate(zip(adk.requests, engine.requests, strict=False)):
        if a.after_summary or b.after_summary:
            return compared, index
        if (a.chars, a.contents) != (b.chars, b.contents):
            raise DataCheckError(
                f"{adk.mode.name}, request {index} (invocation {a.invocation + 1}), before any "
                f"summary: ADK's context has {a.contents} contents and {a.chars} chars, "
                f"the engine's {b.contents} and {b.chars}"
            )
        compared += 1
    return compared, compared


# The plot ----------------------------------------------------------------------------------

Series = tuple[str, list[int], str, str]  # label, values, colour, dash


def _series(runs: dict[str, Run]) -> list[Series]:
    adk, engine = runs["ADK"], runs["engine"]
    return [
        ("uncompacted (chars/4)", adk.series("uncompacted"), "#999999", "dotted"),
        ("ADK 2.13 (chars/4)", adk.series("tokens"), "#d62728", "solid"),
        ("engine (tiktoken)", engine.series("tokens"), "#1f77b4", "solid"),
        ("engine (chars/4)", [c // 4 for c in engine.series("chars")], "#1f77b4", "dashed"),
    ]


def plot(path: Path, panels: Sequence[tuple[str, list[Series]]]) -> Path:
    """A PNG with matplotlib when it is installed, else a hand-written SVG (same name, .svg)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _plot_svg(path.with_suffix(".svg"), panels)
    figure, axes = plt.subplots(len(panels), 1, figsize=(10, 4.2 * len(panels)))
    for ax, (title, series) in zip(figure.axes, panels, strict=True):
        for label, values, colour, dash in series:
            ax.plot(
                range(1, len(values) + 1), values, label=label, color=colour, linestyle=dash,
                linewidth=1.0,
            )  # fmt: skip
        ax.set_title(title)
        ax.set_xlabel("model request")
        ax.set_ylabel("context tokens")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
    del axes
    figure.tight_layout()
    path = path.with_suffix(".png")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _plot_svg(path: Path, panels: Sequence[tuple[str, list[Series]]]) -> Path:
    width, height, margin = 900, 320, 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height * len(panels)}" font-family="sans-serif" font-size="11">'
    ]
    for n, (title, series) in enumerate(panels):
        top = n * height
        longest = max(len(values) for _, values, _, _ in series) or 1
        peak = max((max(values) for _, values, _, _ in series if values), default=1) or 1
        out.append(f'<text x="{margin}" y="{top + 20}" font-size="13">{title}</text>')
        out.append(
            f'<rect x="{margin}" y="{top + 30}" width="{width - 2 * margin}" '
            f'height="{height - 70}" fill="none" stroke="#ccc"/>'
        )
        out.append(f'<text x="5" y="{top + 40}">{peak:,}</text>')
        out.append(f'<text x="5" y="{top + height - 40}">0</text>')
        for k, (label, values, colour, dash) in enumerate(series):
            points = " ".join(
                f"{margin + i * (width - 2 * margin) / longest:.1f},"
                f"{top + height - 40 - v * (height - 70) / peak:.1f}"
                for i, v in enumerate(values)
            )
            pattern = {"dotted": "2,3", "dashed": "6,4"}.get(dash, "")
            style = f' stroke-dasharray="{pattern}"' if pattern else ""
            out.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1"{style} '
                f'points="{points}"/>'
            )
            out.append(
                f'<text x="{margin + 10}" y="{top + 45 + 13 * k}" fill="{colour}">{label}</text>'
            )
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")
    return path


# The report --------------------------------------------------------------------------------


@dataclass
class ModeResult:
    mode: Mode
    runs: dict[str, Run]
    groups: list[Group]
    compared: int

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode.name,
            "label": self.mode.label,
            "requests_compared_before_first_summary": self.compared,
            "runs": {
                name: {
                    "seconds": run.seconds,
                    "requests": len(run.requests),
                    "summarizer_calls": run.summarizer_calls,
                    "summaries": run.summaries,
                    "inflow_summaries": run.inflow_summaries,
                    "discarded_summaries": run.summarizer_calls - run.summaries,
                    "tokens": run.series("tokens"),
                    "chars": run.series("chars"),
                    "uncompacted_tokens": run.series("uncompacted"),
                    "invocation": run.series("invocation"),
                    "contents_ms_p50": percentile(run.contents_ms, 0.5)
                    if run.contents_ms
                    else None,
                    "post_invocation_ms_p50": (
                        percentile(run.post_invocation_ms, 0.5) if run.post_invocation_ms else None
                    ),
                    "settle_ms_p50": percentile(run.settle_ms, 0.5) if run.settle_ms else None,
                    "calls": [{"call": c.kind, "ms": c.ms} for c in run.calls]
                    if name != "engine, slow summarizer"
                    else [],
                }
                for name, run in self.runs.items()
            },
            "latency_groups": [group.to_json() for group in self.groups],
        }


@dataclass
class CompactionReport(Report):
    results: list[ModeResult] = field(default_factory=list)
    plot_path: str = ""

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data["modes"] = [result.to_json() for result in self.results]
        data["plot"] = self.plot_path
        return data

    def render(self) -> str:
        lines = [f"== {self.benchmark} =="]
        for result in self.results:
            lines.append("")
            lines.append(f"-- {result.mode.label} --")
            header: tuple[str, ...] = (
                "replay", "requests", "summarizer calls", "summaries (in-flow)", "discarded",
                "ctx mean", "ctx max", "ctx last", "ctx/uncompacted last", "seconds",
            )  # fmt: skip
            rows: list[tuple[str, ...]] = []
            for name, run in result.runs.items():
                tokens = run.series("tokens")
                last_raw = run.requests[-1].uncompacted if run.requests else 0
                rows.append(
                    (
                        name + (" (tiktoken)" if name != "ADK" else " (chars/4)"),
                        f"{len(run.requests):,}",
                        f"{run.summarizer_calls}",
                        f"{run.summaries} ({run.inflow_summaries})",
                        f"{run.summarizer_calls - run.summaries}",
                        number(_mean(tokens), 0),
                        f"{max(tokens):,}" if tokens else "",
                        f"{tokens[-1]:,}" if tokens else "",
                        f"{tokens[-1] / last_raw:.3f}" if tokens and last_raw else "",
                        f"{run.seconds:.1f}",
                    )
                )
            lines.extend(table(header, rows))
            adk, engine = result.runs["ADK"], result.runs["engine"]
            engine_chars4 = [c // 4 for c in engine.series("chars")]
            lines.append(
                f"context size, same counter (chars/4): engine mean {_mean(engine_chars4):,.0f} "
                f"vs ADK {_mean(adk.series('tokens')):,.0f} "
                f"(ratio {_mean(engine_chars4) / _mean(adk.series('tokens')):.2f}); "
                f"tiktoken/chars4 on the engine's contexts: "
                f"{_mean(engine.series('tokens')) / _mean(engine_chars4):.2f}; "
                f"equal up to request {result.compared} (first summary)"
            )
            lines.append(
                f"ADK in-process per request: _get_contents p50 {number(percentile(adk.contents_ms, 0.5), 2)} "
                f"ms, p99 {number(percentile(adk.contents_ms, 0.99), 2)} ms"
                + (
                    f"; in-flow token check p50 {number(percentile(adk.inflow_ms, 0.5), 2)} ms, "
                    f"max {number(max(adk.inflow_ms), 1)} ms"
                    if adk.inflow_ms
                    else ""
                )
                + f"; post-invocation compaction p50 {number(percentile(adk.post_invocation_ms, 0.5), 2)} "
                f"ms, max {number(max(adk.post_invocation_ms), 1)} ms (inline: the runner awaits it)"
            )
            lines.append(
                f"engine sidecar: EndInvocation to compaction over p50 "
                f"{number(percentile(engine.settle_ms, 0.5), 2)} ms, max "
                f"{number(max(engine.settle_ms, default=float('nan')), 1)} ms"
            )
            header = ("call latency (ms)", "group", "calls", "p50", "p99")
            rows = []
            for name in ("engine",):
                for kind in ("AppendEvent", "BuildContext"):
                    values = [c.ms for c in result.runs[name].calls if c.kind == kind]
                    rows.append(
                        (
                            f"{kind}, sidecar",
                            "waits for compaction after each invocation",
                            f"{len(values)}",
                            number(percentile(values, 0.5), 2),
                            number(percentile(values, 0.99), 2),
                        )
                    )
            for group in result.groups:
                rows.append(
                    (
                        f"{group.kind}, slow summarizer",
                        group.label,
                        f"{len(group.latencies_ms)}",
                        number(percentile(group.latencies_ms, 0.5), 2),
                        number(percentile(group.latencies_ms, 0.99), 2),
                    )
                )
            lines.extend(table(header, rows))
        if self.plot_path:
            lines.append("")
            lines.append(f"plot: {self.plot_path}")
        lines.extend(self.footer())
        return "\n".join(lines)


# Running -----------------------------------------------------------------------------------


async def bench_mode(
    mode: Mode, workload: Sequence[InvocationSpec], workdir: Path, profile: bool
) -> ModeResult:
    adk = AdkBackend(mode)
    await replay(workload, adk)
    adk.finish()

    async with (
        Sidecar(
            workdir,
            f"compaction-{mode.name}",
            log_level="INFO",
            profile=profile,
            start_timeout=START_TIMEOUT_SECONDS,
            stop_timeout=30.0,
        ) as sidecar,
        ContextEngineClient(sidecar.target, attempts=1, timeout=CALL_TIMEOUT_SECONDS) as client,
    ):
        await client.wait_ready(START_TIMEOUT_SECONDS)
        engine = await _engine_session(client, mode, workload, "engine", wait=True)

    log: list[tuple[float, float]] = []
    gemini = GeminiSettings(api_key=None)

    def slow(config: config_pb2.SummarizerConfig | None) -> Summarizer | None:
        inner = summarizer_from_config(config, gemini)
        return None if inner is None else SlowSummarizer(inner, SLOW_SUMMARY_SECONDS, log)

    async with (
        ThreadedServer(str(workdir / f"slow-{mode.name}.db"), slow) as server,
        ContextEngineClient(server.target, attempts=1, timeout=CALL_TIMEOUT_SECONDS) as client,
    ):
        await client.wait_ready(START_TIMEOUT_SECONDS)
        slow_engine = await _engine_session(client, mode, workload, "engine-slow", wait=False)
    slow_engine.run.summarizing = list(log)
    slow_engine.run.engine = "engine, slow summarizer"

    compared, _ = first_divergence(adk.run, engine.run)
    runs = {"ADK": adk.run, "engine": engine.run, "engine, slow summarizer": slow_engine.run}
    for name, run in runs.items():
        if run.summaries == 0:
            raise DataCheckError(f"{mode.name}: the {name} replay never compacted")
    return ModeResult(mode, runs, split_calls(slow_engine.run), compared)


async def run(options: Options) -> Report:
    invocations = QUICK_INVOCATIONS if options.quick else INVOCATIONS
    workload = generate(SEED, invocations)
    report = CompactionReport(
        "compaction",
        parameters={
            "invocations": invocations,
            "model_calls": sum(len(spec.rounds) + 1 for spec in workload),
            "tool_calls": sum(len(r.calls) for spec in workload for r in spec.rounds),
            "seed": SEED,
            "modes": [mode.label for mode in MODES],
            "system_prompt_tokens": SYSTEM_PROMPT_TOKENS,
            "slow_summary_seconds": SLOW_SUMMARY_SECONDS,
            "quick": options.quick,
        },
    )
    with tempfile.TemporaryDirectory(prefix="ce-bench-compaction-") as tmp:
        for mode in MODES:
            result = await bench_mode(mode, workload, Path(tmp), options.profile)
            report.results.append(result)
            adk, engine = result.runs["ADK"], result.runs["engine"]
            report.checks.append(
                f"{mode.name}: the first {result.compared} requests (before any summary) have "
                "contexts of the same size and length in ADK and in the engine"
            )
            report.checks.append(
                f"{mode.name}: ADK wrote {adk.summaries} summaries, the engine {engine.summaries} "
                f"(its status agrees with its log), the slow-summarizer engine "
                f"{result.runs['engine, slow summarizer'].summaries}"
            )
    panels = [(result.mode.label, _series(result.runs)) for result in report.results]
    path = plot(options.results_dir / "compaction_tokens.png", panels)
    report.plot_path = str(path)
    report.notes.extend(
        [
            "ctx: context tokens per model request: tiktoken cl100k_base (BuildContext's "
            "token_estimate) for the engine, chars // 4 of the contents for ADK (its own "
            "estimate); 'uncompacted' is chars // 4 of every raw event so far.",
            "The fake model reports prompt_token_count = chars // 4 of the context + "
            f"{SYSTEM_PROMPT_TOKENS} for both engines, so the token threshold fires on the same "
            "counts; the summaries differ (ADK: a fake model's extract of the prompt; engine: "
            "the extractive summarizer), so the sessions diverge after the first summary.",
            "sliding window: ADK keeps every summary whose range is not inside a later one, and "
            "overlapping windows never are, so the context grows by one summary per interval.",
            f"slow summarizer: the engine's default summarizer behind a {SLOW_SUMMARY_SECONDS} s "
            "delay, in-process server on its own thread, nothing waited for after EndInvocation; "
            "a call is 'compaction running' when a summarizer call overlapped it, 'threshold "
            "reached' when the last reported prompt was at or above the token threshold and no "
            "summary had been written since (then BuildContext waits for it, as ADK's in-flow "
            "check would; ADK also awaits post-invocation summaries inline).",
            "discarded: summarizer calls whose summary was not appended (a failure, or the log "
            "moved under the plan: see the engine's 'compaction ... discarded' log lines).",
            "percentiles are nearest-rank; groups with few calls have p99 = their slowest call.",
        ]
    )
    return report
