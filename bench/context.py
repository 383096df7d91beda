"""BuildContext: this sidecar over gRPC against google-adk's ``_get_contents``, on the same sessions.

The issue: ADK rebuilds the model contents from the whole event list on every model call
(``google.adk.flows.llm_flows.context._contents._get_contents``, in-process, events already in
memory), so the cost of a call grows with the history. The engine keeps a materialized view per
session and extends it with what was appended since the last call.

Workload: a deterministic (seeded) stream of realistic ADK invocations: the user's message, 0-3
tool rounds (a function-call event, some with parallel calls and a short text, then the
function-response event), the agent's final answer, sometimes another agent's reply; texts of about
50-300 characters, ADK-style ids (``e-<uuid>`` invocations, ``adk-<uuid>`` calls), increasing
timestamps. "With compaction" adds what ADK's sliding-window compaction appends
(``compaction_interval=20``, ``overlap_size=2``): after every 20th new invocation, an event
carrying ``actions.compaction`` whose range starts 2 invocations before the first new one and ends
with the last one, with a summary text. Every event is an ADK ``Event``; the engine receives
``json_format.Parse(event.model_dump_json(exclude_none=True), event_pb2.Event())`` of it.

One session per mode grows through the checkpoints (1k, 10k ... 50k events). At each checkpoint:

* ``ADK``: ``_get_contents(None, events, 'agent')`` in this process, a few repetitions (p50).
* ``cold`` (table sizes only): the sidecar is restarted on the same database, so the first
  BuildContext reads the log from SQLite and materializes it in full (p50 of ``cold_repeats``
  restarts). The token counts of the contents come from the store (``content_measures``): the
  previous process measured the appended events in the background. ``cold, none kept``: once
  more with that table emptied first (a database the previous version wrote), so every content
  is tokenized again.
* ``warm``: BuildContext with nothing appended since the previous call.
* ``steady``: {append the stream's next invocation (AppendEvents); BuildContext} repeated. This is
  the cost of a model call in a running agent, and what must not grow with the history.
* ``catch-up`` (curve sizes only): the first BuildContext after the bulk append that grew the
  session from the previous checkpoint (its cost should follow what was appended).

Engine latencies are measured in this process around ``ContextEngineClient.build_context``: the
sidecar's work, gRPC both ways and the parsing of the response. The sidecar runs with
``--log-level INFO`` so that its own handler time per call (``ms=`` in its log) is reported next
to it ("server" columns): the difference is transport and (de)serialization, which grows with the
size of the context returned.

Data checks (a fast BuildContext that computes something else is worthless): the engine returns
as many contents as ADK for the same events after the cold call and after the steady rounds (equal
contents, compared as JSON modulo int/float, for every content at sizes up to ``full_compare_up_to``
and for the first and last ``COMPARE_EDGE`` contents above it); every warm and steady response
reflects the whole log (``last_sequence``); appends are acknowledged in order.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import random
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.adk.events.event import Event as AdkEvent
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.flows.llm_flows.context._contents import _get_contents
from google.adk.flows.llm_flows.context._fencing import OTHER_AGENT_CONTEXT_PREAMBLE
from google.genai import types
from google.protobuf import json_format

from bench import (
    DataCheckError,
    Options,
    Report,
    RowsReport,
    Target,
    load_average,
    number,
    table,
)
from bench.sidecar import Sidecar, profile_summary
from contextengine.client import ContextEngineClient
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as cpb, event_pb2

APP = "bench"
USER = "user-1"
SESSION = "context"
AGENT = "agent"
OTHER_AGENTS = ("researcher", "reviewer")
MODEL_VERSION = "gemini-2.5-flash"
SEED = 20_251_130

#: ADK sliding-window compaction settings the "with compaction" sessions follow
COMPACTION_INTERVAL = 20
COMPACTION_OVERLAP = 2

#: the issue's target: BuildContext at 10,000 events at least this many times faster than ADK
SPEEDUP_TARGET = 10.0
TARGET_EVENTS = 10_000

#: issue #22: the first BuildContext after a restart at 10,000 events no slower than ADK
COLD_TARGET = 1.0

#: steady-state p50 at the smallest curve size / at the largest: at least this (with 5x the
#: history, the cost of a call may grow by half, not with the history)
FLATNESS_TARGET = 0.67

#: above full_compare_up_to, this many contents at each end are compared in full
COMPARE_EDGE = 200

START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 30.0
CALL_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class Sizes:
    #: history lengths with a full table row (ADK, cold, warm, steady)
    table: tuple[int, ...]
    #: history lengths of the steady-state curve (one growing session)
    curve: tuple[int, ...]
    warm_calls: int
    steady_rounds: int
    batch_size: int
    full_compare_up_to: int
    #: restarts of the sidecar, each followed by one (cold) BuildContext
    cold_repeats: int = 3

    def adk_repetitions(self, events: int) -> int:
        if events <= 2_000:
            return 10
        if events <= 20_000:
            return 5
        return 3


FULL_SIZES = Sizes(
    table=(1_000, 10_000, 50_000),
    curve=(10_000, 20_000, 30_000, 40_000, 50_000),
    warm_calls=50,
    steady_rounds=50,
    batch_size=500,
    full_compare_up_to=1_000,
)
QUICK_SIZES = Sizes(
    table=(1_000, 10_000),
    curve=(1_000, 2_000, 4_000),
    warm_calls=10,
    steady_rounds=10,
    batch_size=500,
    full_compare_up_to=1_000,
)


# The workload ------------------------------------------------------------------------------

_VOCABULARY = (
    "the order shipment invoice customer account weather forecast report meeting schedule "
    "flight hotel budget estimate delivery warehouse ticket priority status update summary "
    "question answer review document section table figure analysis result error retry request "
    "response latency service database migration deploy release branch commit test coverage "
    "incident outage alert metric dashboard query filter region cluster node capacity storage "
    "network policy access token refund payment currency exchange rate total tax discount "
    "please could you check whether and then also for with from about after before today "
    "tomorrow last week next month available pending confirmed cancelled approved rejected"
)
WORDS = tuple(_VOCABULARY.split())
TOOLS = ("get_weather", "search_docs", "lookup_order", "convert_currency", "create_ticket")


@dataclass(frozen=True)
class Invocation:
    """One invocation's events, as ADK events and as the protos the engine receives."""

    adk: tuple[AdkEvent, ...]
    protos: tuple[event_pb2.Event, ...]

    @property
    def first_timestamp(self) -> float:
        return self.adk[0].timestamp

    @property
    def last_timestamp(self) -> float:
        return self.adk[-1].timestamp


def to_proto(event: AdkEvent) -> event_pb2.Event:
    return json_format.Parse(event.model_dump_json(exclude_none=True), event_pb2.Event())


class Conversation:
    """A deterministic (seeded) stream of ADK invocations, generated on demand and kept, so that
    the sessions with and without compaction hold the very same invocations.

    Consecutive invocations are at least 5 s apart (a compaction event fits in between)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._clock = 1_760_000_000.0 + self._rng.random()
        self.invocations: list[Invocation] = []

    def __getitem__(self, index: int) -> Invocation:
        while len(self.invocations) <= index:
            self.invocations.append(self._invocation())
        return self.invocations[index]

    def _tick(self, low: float, high: float) -> float:
        self._clock = round(self._clock + self._rng.uniform(low, high), 6)
        return self._clock

    def _args(self, tool: str) -> dict[str, Any]:
        rng = self._rng
        args: dict[str, Any] = {"query": random_text(rng, 10, 60)}
        if tool in ("lookup_order", "create_ticket"):
            args["id"] = rng.randint(10_000, 99_999)
        if rng.random() < 0.4:
            args["limit"] = rng.choice((5, 10, 20))
        return args

    def _result(self, tool: str) -> dict[str, Any]:
        rng = self._rng
        result: dict[str, Any] = {"status": rng.choice(("ok", "ok", "ok", "partial"))}
        if tool == "search_docs":
            result["hits"] = [random_text(rng, 30, 90) for _ in range(rng.randint(1, 3))]
        else:
            result["detail"] = random_text(rng, 40, 200)
            result["value"] = round(rng.uniform(0, 500), 2)
            result["count"] = rng.randint(0, 40)
        return result

    def _event(
        self,
        invocation_id: str,
        author: str,
        timestamp: float,
        content: types.Content,
        **extra: Any,
    ) -> AdkEvent:
        return AdkEvent(
            id=new_uuid(self._rng),
            invocation_id=invocation_id,
            author=author,
            timestamp=timestamp,
            content=content,
            **extra,
        )

    def _model_event(
        self,
        invocation_id: str,
        author: str,
        timestamp: float,
        parts: list[types.Part],
        state_delta: dict[str, Any] | None = None,
    ) -> AdkEvent:
        rng = self._rng
        prompt_tokens = rng.randint(500, 30_000)
        answer_tokens = rng.randint(10, 400)
        return self._event(
            invocation_id,
            author,
            timestamp,
            types.Content(role="model", parts=parts),
            model_version=MODEL_VERSION,
            finish_reason=types.FinishReason.STOP,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt_tokens,
                candidates_token_count=answer_tokens,
                total_token_count=prompt_tokens + answer_tokens,
            ),
            actions=EventActions(state_delta=state_delta or {}),
        )

    def _invocation(self) -> Invocation:
        """The user's message, 0-3 tool rounds, the answer, sometimes another agent's reply."""
        rng = self._rng
        invocation_id = f"e-{new_uuid(rng)}"
        user = types.Content(role="user", parts=[types.Part(text=random_text(rng))])
        events = [self._event(invocation_id, "user", self._tick(5.0, 600.0), user)]
        rounds = rng.choices((0, 1, 2, 3), weights=(3, 4, 2, 1))[0]
        for _ in range(rounds):
            width = rng.choices((1, 2, 3), weights=(8, 2, 1))[0]
            calls = [
                types.FunctionCall(id=f"adk-{new_uuid(rng)}", name=tool, args=self._args(tool))
                for tool in rng.sample(TOOLS, width)
            ]
            parts = [types.Part(text=random_text(rng, 40, 160))] if rng.random() < 0.25 else []
            parts.extend(types.Part(function_call=call) for call in calls)
            events.append(self._model_event(invocation_id, AGENT, self._tick(0.4, 6.0), parts))
            responses = [
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call.id, name=call.name, response=self._result(call.name or "")
                    )
                )
                for call in calls
            ]
            events.append(
                self._event(
                    invocation_id,
                    AGENT,
                    self._tick(0.05, 3.0),
                    types.Content(role="user", parts=responses),
                )
            )
        state = {"turns": len(self.invocations) + 1} if rng.random() < 0.3 else None
        answer = [types.Part(text=random_text(rng))]
        events.append(self._model_event(invocation_id, AGENT, self._tick(0.5, 8.0), answer, state))
        if rng.random() < 0.08:
            reply = [types.Part(text=random_text(rng))]
            author = rng.choice(OTHER_AGENTS)
            events.append(self._model_event(invocation_id, author, self._tick(0.5, 8.0), reply))
        return Invocation(tuple(events), tuple(to_proto(event) for event in events))


def new_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def random_text(rng: random.Random, low: int = 50, high: int = 300) -> str:
    """A sentence of ``low`` to ``high`` characters."""
    length = rng.randint(low, high)
    words: list[str] = []
    size = -1
    while size < length:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    text = " ".join(words)[:length].rstrip()
    return text[0].upper() + text[1:] + "."


class Session:
    """A session of the conversation's invocations, in order; with ``compaction``, plus the
    events ADK's sliding-window compaction appends (own random stream, same seed each run)."""

    def __init__(self, conversation: Conversation, *, compaction: bool, seed: int) -> None:
        self.conversation = conversation
        self.compaction = compaction
        self.adk: list[AdkEvent] = []
        self.protos: list[event_pb2.Event] = []
        self.invocations = 0
        self.compactions = 0
        self._rng = random.Random(seed)
        #: index of the first invocation after the last compaction's range
        self._first_uncompacted = 0

    def next_invocation(self) -> list[event_pb2.Event]:
        """Adds the next invocation (and the compaction event it triggers); returns its protos."""
        invocation = self.conversation[self.invocations]
        self.invocations += 1
        adk = list(invocation.adk)
        protos = list(invocation.protos)
        if self.compaction and self.invocations - self._first_uncompacted >= COMPACTION_INTERVAL:
            event = self._compaction_event()
            adk.append(event)
            protos.append(to_proto(event))
        self.adk.extend(adk)
        self.protos.extend(protos)
        return protos

    def grow(self, events: int) -> None:
        """Whole invocations until the session holds at least ``events`` events."""
        while len(self.adk) < events:
            self.next_invocation()

    def _compaction_event(self) -> AdkEvent:
        """What ADK's sliding window appends after the invocation that completes an interval:
        a summary of the new invocations and the ``COMPACTION_OVERLAP`` before them."""
        first = max(0, self._first_uncompacted - COMPACTION_OVERLAP)
        start = self.conversation[first].first_timestamp
        end = self.conversation[self.invocations - 1].last_timestamp
        self._first_uncompacted = self.invocations
        self.compactions += 1
        rng = self._rng
        summary = types.Content(role="model", parts=[types.Part(text=random_text(rng, 300, 900))])
        return AdkEvent(
            id=new_uuid(rng),
            invocation_id=new_uuid(rng),
            author="user",
            timestamp=round(end + rng.uniform(0.5, 4.5), 6),
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=start, end_timestamp=end, compacted_content=summary
                )
            ),
        )


# Comparison with ADK -----------------------------------------------------------------------


def _normalise(value: Any) -> Any:
    """JSON ``value`` with integral floats as ``int`` (protobuf's Struct numbers are doubles)."""
    if isinstance(value, dict):
        return {key: _normalise(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalise(item) for item in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _ours(content: content_pb2.Content) -> Any:
    return _normalise(json_format.MessageToDict(content, preserving_proto_field_name=True))


def _theirs(content: types.Content) -> Any:
    return _normalise(content.model_dump(mode="json", exclude_none=True))


def check_contents(
    what: str,
    ours: Sequence[content_pb2.Content],
    adk: Sequence[types.Content],
    *,
    full: bool,
) -> str:
    """Raises DataCheckError unless ``ours`` are ADK's contents; returns what was checked."""
    if len(ours) != len(adk):
        raise DataCheckError(f"{what}: the engine returned {len(ours)} contents, ADK {len(adk)}")
    if full or len(adk) <= 2 * COMPARE_EDGE:
        indices: Sequence[int] = range(len(adk))
        how = "all equal"
    else:
        indices = [*range(COMPARE_EDGE), *range(len(adk) - COMPARE_EDGE, len(adk))]
        how = f"first and last {COMPARE_EDGE} equal"
    for index in indices:
        mine, theirs = _ours(ours[index]), _theirs(adk[index])
        if mine != theirs:
            raise DataCheckError(
                f"{what}: content {index} differs:\n  engine {mine!r:.400}\n  ADK    {theirs!r:.400}"
            )
    return f"{what}: {len(adk)} contents, as many as ADK's, {how}"


# Measurements ------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (with 50 samples, p99 is the slowest one)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


@dataclass
class Calls:
    """Latencies of a series of BuildContext calls: in this process, and in the sidecar."""

    client_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)

    def p(self, fraction: float, *, server: bool = False) -> float:
        return percentile(self.server_ms if server else self.client_ms, fraction)

    def to_json(self) -> dict[str, Any]:
        return {
            "p50_ms": self.p(0.5),
            "p99_ms": self.p(0.99),
            "server_p50_ms": self.p(0.5, server=True),
            "server_p99_ms": self.p(0.99, server=True),
            "client_ms": self.client_ms,
            "server_ms": self.server_ms,
        }


@dataclass
class Steady:
    """{append one invocation; BuildContext} rounds from ``history_start`` events on."""

    history_start: int
    history_end: int = 0
    calls: Calls = field(default_factory=Calls)
    #: events appended before each call
    appended: list[int] = field(default_factory=list)
    #: indices of the rounds whose invocation ended with a compaction event
    compaction_rounds: list[int] = field(default_factory=list)
    contents: int = 0
    response_bytes: int = 0
    #: parsing the last response (BuildContextResponse.FromString) in this process
    parse_ms: float = 0.0

    def compaction_ms(self) -> list[float]:
        return [self.calls.client_ms[i] for i in self.compaction_rounds]

    def to_json(self) -> dict[str, Any]:
        return {
            "history_start": self.history_start,
            "history_end": self.history_end,
            **self.calls.to_json(),
            "appended_events": self.appended,
            "compaction_rounds": self.compaction_rounds,
            "contents": self.contents,
            "response_bytes": self.response_bytes,
            "client_parse_ms": self.parse_ms,
        }


@dataclass
class Row:
    """One table row: a session of ``events`` events, with or without compaction."""

    compaction: bool
    events: int
    adk_ms: list[float]
    adk_contents: int
    cold: Calls
    warm: Calls
    steady: Steady
    #: cold, with the kept token measures deleted first
    cold_unkept: Calls = field(default_factory=Calls)

    @property
    def adk_p50(self) -> float:
        return percentile(self.adk_ms, 0.5)

    def ratio(self, calls_p50: float) -> float:
        return self.adk_p50 / calls_p50 if calls_p50 > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "compaction": self.compaction,
            "events": self.events,
            "adk_p50_ms": self.adk_p50,
            "adk_ms": self.adk_ms,
            "adk_contents": self.adk_contents,
            "engine_cold": self.cold.to_json(),
            "engine_warm": self.warm.to_json(),
            "engine_steady": self.steady.to_json(),
            "ratio_adk_vs_steady_p50": self.ratio(self.steady.calls.p(0.5)),
            "ratio_adk_vs_warm_p50": self.ratio(self.warm.p(0.5)),
            "ratio_adk_vs_cold": self.ratio(self.cold.p(0.5)),
            "engine_cold_none_kept": self.cold_unkept.to_json(),
            "ratio_adk_vs_cold_none_kept": self.ratio(self.cold_unkept.p(0.5)),
        }


@dataclass
class CurvePoint:
    compaction: bool
    #: events in the session before the bulk append that reached this point
    previous_events: int
    #: first BuildContext after that bulk append (None when the sidecar was restarted: cold)
    catch_up: Calls | None
    steady: Steady

    def to_json(self) -> dict[str, Any]:
        return {
            "compaction": self.compaction,
            "previous_events": self.previous_events,
            "catch_up": None if self.catch_up is None else self.catch_up.to_json(),
            "steady": self.steady.to_json(),
        }


# The engine side ---------------------------------------------------------------------------


class Engine:
    """A client of the sidecar holding one session, which it appends to and builds from."""

    def __init__(self, sidecar: Sidecar, sizes: Sizes) -> None:
        self.sidecar = sidecar
        self.sizes = sizes
        self.appended = 0
        self._client: ContextEngineClient | None = None
        #: BuildContext log lines of the sidecar's current process already collected
        self._seen_calls = 0

    @property
    def client(self) -> ContextEngineClient:
        assert self._client is not None
        return self._client

    async def connect(self) -> None:
        self._client = ContextEngineClient(
            self.sidecar.target, attempts=1, timeout=CALL_TIMEOUT_SECONDS
        )
        await self._client.wait_ready(START_TIMEOUT_SECONDS)

    async def restart(self, *, forget_measures: bool = False) -> None:
        """Stops the sidecar and starts it again on the same database; with
        ``forget_measures``, deletes the token measures it kept in between."""
        await self.close()
        await self.sidecar.stop()
        if forget_measures:
            with contextlib.closing(sqlite3.connect(self.sidecar.db)) as db, db:
                db.execute("DELETE FROM content_measures")
        await self.sidecar.start()
        self._seen_calls = 0  # a new process, a new log
        await self.connect()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def append(self, events: Sequence[event_pb2.Event]) -> None:
        """AppendEvents in batches; checks each batch is recorded in order right after the log."""
        batch_size = self.sizes.batch_size
        for start in range(0, len(events), batch_size):
            batch = events[start : start + batch_size]
            response = await self.client.append_events(
                APP, USER, SESSION, batch, expected_last_sequence=self.appended
            )
            recorded = list(response.events)
            if [e.id for e in recorded] != [e.id for e in batch] or [
                e.sequence for e in recorded
            ] != list(range(self.appended + 1, self.appended + len(batch) + 1)):
                raise DataCheckError(f"batch from {batch[0].id}: not recorded in order")
            self.appended += len(batch)

    async def build(self, calls: Calls) -> cpb.BuildContextResponse:
        started = time.perf_counter()
        response = await self.client.build_context(APP, USER, SESSION, agent_name=AGENT)
        calls.client_ms.append((time.perf_counter() - started) * 1000.0)
        if response.last_sequence != self.appended:
            raise DataCheckError(
                f"BuildContext reflects the log up to {response.last_sequence}, "
                f"{self.appended} events were appended"
            )
        return response

    def new_build_context_ms(self) -> list[float]:
        """The handler times the sidecar logged for the BuildContext calls since the last call
        of this method or the last restart (in call order: the benchmark makes one call at a
        time)."""
        times: list[float] = []
        for line in self.sidecar.log().splitlines():
            if " method=contextengine.v1.ContextService.BuildContext " not in line:
                continue
            times.append(float(line.split(" ms=", 1)[1].split()[0]))
        new, self._seen_calls = times[self._seen_calls :], len(times)
        return new

    def collect_server_ms(self, calls: Calls) -> None:
        calls.server_ms.extend(self.new_build_context_ms())

    async def steady(self, session: Session) -> tuple[Steady, cpb.BuildContextResponse]:
        result = Steady(history_start=len(session.protos))
        self.new_build_context_ms()  # skip calls made before
        response = cpb.BuildContextResponse()
        for round_ in range(self.sizes.steady_rounds):
            new = session.next_invocation()
            await self.append(new)
            response = await self.build(result.calls)
            result.appended.append(len(new))
            if new[-1].actions.HasField("compaction"):
                result.compaction_rounds.append(round_)
        self.collect_server_ms(result.calls)
        result.history_end = len(session.protos)
        result.contents = len(response.contents)
        data = response.SerializeToString()
        result.response_bytes = len(data)
        started = time.perf_counter()
        cpb.BuildContextResponse.FromString(data)
        result.parse_ms = (time.perf_counter() - started) * 1000.0
        return result, response


def time_adk(events: list[AdkEvent], repetitions: int) -> tuple[list[float], list[types.Content]]:
    """ADK's ``_get_contents`` for ``agent`` (no branch), in-process; latencies in ms."""
    latencies: list[float] = []
    contents: list[types.Content] = []
    for _ in range(repetitions):
        started = time.perf_counter()
        contents = _get_contents(None, events, AGENT)
        latencies.append((time.perf_counter() - started) * 1000.0)
    return latencies, contents


def _settle() -> None:
    """Collect garbage and move what survives out of the collector's sight, so that the large,
    long-lived session lists do not make later collections (and the timings) slow."""
    gc.collect()
    gc.freeze()


@dataclass
class ModeResult:
    rows: list[Row] = field(default_factory=list)
    curve: list[CurvePoint] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    profile: str = ""
    generated: dict[str, int] = field(default_factory=dict)


async def bench_mode(
    workdir: Path, conversation: Conversation, sizes: Sizes, compaction: bool, profile: bool
) -> ModeResult:
    mode = "compaction" if compaction else "no compaction"
    result = ModeResult()
    session = Session(conversation, compaction=compaction, seed=SEED + 1)
    sidecar = Sidecar(
        workdir,
        "compaction" if compaction else "plain",
        # INFO: one log line per call, with the handler time the "srv" columns report
        log_level="INFO",
        profile=profile,
        start_timeout=START_TIMEOUT_SECONDS,
        stop_timeout=STOP_TIMEOUT_SECONDS,
    )
    engine = Engine(sidecar, sizes)
    checkpoints = sorted({*sizes.table, *sizes.curve})
    try:
        await sidecar.start()
        await engine.connect()
        # The engine's default framing of other agents' turns is its own text; ADK's is set here
        # (as an app would) so that the contents can be compared with ADK's.
        await engine.client.update_app_config(
            config_pb2.AppConfig(app_name=APP, other_agent_preamble=OTHER_AGENT_CONTEXT_PREAMBLE)
        )
        await engine.client.create_session(APP, USER, SESSION)
        for checkpoint in checkpoints:
            previous = len(session.protos)
            session.grow(checkpoint)
            await engine.append(session.protos[previous:])
            events = len(session.protos)
            _settle()
            label = f"{mode}, {events} events"
            if checkpoint in sizes.table:
                adk_ms, adk_contents = time_adk(session.adk, sizes.adk_repetitions(events))
                full = checkpoint <= sizes.full_compare_up_to
                cold = Calls()
                for _ in range(sizes.cold_repeats):
                    await engine.restart()
                    response = await engine.build(cold)
                    engine.collect_server_ms(cold)
                    result.checks.append(
                        check_contents(f"cold, {label}", response.contents, adk_contents, full=full)
                    )
                cold_unkept = Calls()
                await engine.restart(forget_measures=True)
                unkept = await engine.build(cold_unkept)
                engine.collect_server_ms(cold_unkept)
                if unkept.token_estimate != response.token_estimate:
                    raise DataCheckError(
                        f"cold, {label}: {unkept.token_estimate.tokens} tokens counted again, "
                        f"{response.token_estimate.tokens} from the kept measures"
                    )
                result.checks.append(
                    check_contents(
                        f"cold (none kept), {label}", unkept.contents, adk_contents, full=full
                    )
                )
                warm = Calls()
                for _ in range(sizes.warm_calls):
                    again = await engine.build(warm)
                    if len(again.contents) != len(response.contents):
                        raise DataCheckError(f"warm, {label}: the contents changed")
                engine.collect_server_ms(warm)
                steady, response = await engine.steady(session)
                _, final = time_adk(session.adk, 1)
                result.checks.append(
                    check_contents(
                        f"after {sizes.steady_rounds} steady rounds, {mode}, "
                        f"{len(session.protos)} events",
                        response.contents,
                        final,
                        full=full,
                    )
                )
                result.rows.append(
                    Row(
                        compaction,
                        events,
                        adk_ms,
                        len(adk_contents),
                        cold,
                        warm,
                        steady,
                        cold_unkept,
                    )
                )
                catch_up: Calls | None = None
            else:
                catch_up = Calls()
                await engine.build(catch_up)
                engine.collect_server_ms(catch_up)
                steady, _ = await engine.steady(session)
            if checkpoint in sizes.curve:
                result.curve.append(CurvePoint(compaction, previous, catch_up, steady))
            gc.unfreeze()
        result.generated = {
            "events": len(session.protos),
            "invocations": session.invocations,
            "compaction_events": session.compactions,
        }
        ids = [event.id for event in session.protos]
        if len(set(ids)) != len(ids):
            raise DataCheckError(f"{mode}: the generator repeated an event id")
        timestamps = [event.timestamp for event in session.protos]
        if any(b <= a for a, b in itertools.pairwise(timestamps)):
            raise DataCheckError(f"{mode}: the timestamps do not increase")
        result.checks.append(
            f"{mode}: {len(ids)} events ({session.invocations} invocations, "
            f"{session.compactions} compaction events), ids unique, timestamps increasing, "
            "all appended in order"
        )
    finally:
        await engine.close()
        await sidecar.stop()
    result.profile = profile_summary(sidecar.profiles, f"sidecar ({mode})", limit=30)
    return result


# The report --------------------------------------------------------------------------------


@dataclass
class ContextReport(RowsReport[Row]):
    curve: list[CurvePoint] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data["curve"] = [point.to_json() for point in self.curve]
        return data

    def render(self) -> str:
        lines = [f"== {self.benchmark} =="]
        lines.append(
            "BuildContext for agent 'agent' (ms; engine = over gRPC from this process, "
            "'srv' = the sidecar's own handler time)"
        )
        header: tuple[str, ...] = (
            "session",
            "events",
            "contents",
            "ADK p50",
            "cold",
            "warm p50",
            "warm p99",
            "steady p50",
            "steady p99",
            "srv p50",
            "srv p99",
            "ADK/steady",
            "ADK/cold",
        )
        rows: list[tuple[str, ...]] = []
        for row in self.rows:
            s = row.steady.calls
            rows.append(
                (
                    "compaction" if row.compaction else "no compaction",
                    f"{row.events:,}",
                    f"{row.adk_contents:,}",
                    number(row.adk_p50),
                    number(row.cold.p(0.5)),
                    number(row.warm.p(0.5), 2),
                    number(row.warm.p(0.99), 2),
                    number(s.p(0.5), 2),
                    number(s.p(0.99), 2),
                    number(s.p(0.5, server=True), 2),
                    number(s.p(0.99, server=True), 2),
                    f"{row.ratio(s.p(0.5)):,.0f}x",
                    f"{row.ratio(row.cold.p(0.5)):,.1f}x",
                )
            )
        lines.extend(table(header, rows))
        lines.append("")
        lines.extend(self.render_cold())
        lines.append("")
        lines.append(
            "steady-state curve: one session grown through each history length; per round, "
            "append the next invocation, then BuildContext"
        )
        header = (
            "session",
            "history",
            "contents",
            "resp KB",
            "p50",
            "p99",
            "srv p50",
            "srv p99",
            "parse",
            "compaction rounds",
            "catch-up (events)",
        )
        rows = []
        for point in self.curve:
            st = point.steady
            compaction_ms = st.compaction_ms()
            catch_up = point.catch_up
            rows.append(
                (
                    "compaction" if point.compaction else "no compaction",
                    f"{st.history_start:,}-{st.history_end:,}",
                    f"{st.contents:,}",
                    f"{st.response_bytes / 1024:,.0f}",
                    number(st.calls.p(0.5), 2),
                    number(st.calls.p(0.99), 2),
                    number(st.calls.p(0.5, server=True), 2),
                    number(st.calls.p(0.99, server=True), 2),
                    number(st.parse_ms, 2),
                    (
                        f"{len(compaction_ms)}: max {max(compaction_ms):,.1f}"
                        if compaction_ms
                        else "0"
                    ),
                    (
                        f"{catch_up.client_ms[0]:,.1f} ({st.history_start - point.previous_events:,})"
                        if catch_up is not None
                        else "restart"
                    ),
                )
            )
        lines.extend(table(header, rows))
        lines.extend(self.footer())
        return "\n".join(lines)

    def render_cold(self) -> list[str]:
        """The cold-start table: ADK against the first BuildContext after a restart."""
        lines = [
            "cold start: the first BuildContext after restarting the sidecar (ms, p50 of the "
            "restarts; 'none kept': the kept token measures deleted first) against ADK"
        ]
        header = (
            "session",
            "events",
            "contents",
            "ADK p50",
            "cold",
            "cold srv",
            "ADK/cold",
            "none kept",
            "srv",
            "ADK/none kept",
        )
        rows = [
            (
                "compaction" if row.compaction else "no compaction",
                f"{row.events:,}",
                f"{row.adk_contents:,}",
                number(row.adk_p50),
                number(row.cold.p(0.5)),
                number(row.cold.p(0.5, server=True)),
                f"{row.ratio(row.cold.p(0.5)):,.2f}x",
                number(row.cold_unkept.p(0.5)),
                number(row.cold_unkept.p(0.5, server=True)),
                f"{row.ratio(row.cold_unkept.p(0.5)):,.2f}x",
            )
            for row in self.rows
        ]
        lines.extend(table(header, rows))
        return lines

    def target_line(self, target: Target) -> str:
        """As ``Report``'s, with the unit after what is needed too, and no space before an
        empty unit (the flatness targets are ratios without one)."""
        verdict = "met" if target.met else "MISSED"
        unit = f" {target.unit}" if target.unit else ""
        return (
            f"{target.name}: {target.measured:,.2f}{unit} "
            f"(need >= {target.required:,.2f}{unit}) {verdict}"
        )


def _flatness(points: Sequence[CurvePoint], server: bool) -> str:
    if len(points) < 2:
        return ""
    first, last = points[0].steady, points[-1].steady
    a = first.calls.p(0.5, server=server)
    b = last.calls.p(0.5, server=server)
    return f"{a:.2f} -> {b:.2f} ms ({b / a:.2f}x)" if a > 0 else ""


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = ContextReport(
        "context",
        parameters={
            "table_sizes": list(sizes.table),
            "curve_sizes": list(sizes.curve),
            "warm_calls": sizes.warm_calls,
            "cold_repeats": sizes.cold_repeats,
            "steady_rounds": sizes.steady_rounds,
            "append_batch_size": sizes.batch_size,
            "seed": SEED,
            "compaction_interval": COMPACTION_INTERVAL,
            "compaction_overlap": COMPACTION_OVERLAP,
            "agent_name": AGENT,
            "quick": options.quick,
            "profile": options.profile,
        },
    )
    load_at_start = load_average()
    started = time.perf_counter()
    profiles: list[str] = []
    conversation = Conversation(SEED)
    with tempfile.TemporaryDirectory(prefix="ce-bench-context-") as tmp:
        for compaction in (False, True):
            result = await bench_mode(Path(tmp), conversation, sizes, compaction, options.profile)
            report.rows.extend(result.rows)
            report.curve.extend(result.curve)
            report.checks.extend(result.checks)
            report.parameters["generated_compaction" if compaction else "generated"] = (
                result.generated
            )
            if result.profile:
                profiles.append(result.profile)
    for row in report.rows:
        if row.events >= TARGET_EVENTS and row.events < TARGET_EVENTS * 1.1:
            mode = "compaction" if row.compaction else "no compaction"
            report.targets.append(
                Target(
                    f"ADK / engine steady-state p50 at {row.events:,} events ({mode})",
                    row.ratio(row.steady.calls.p(0.5)),
                    SPEEDUP_TARGET,
                    "x",
                )
            )
    for row in report.rows:
        if TARGET_EVENTS <= row.events < TARGET_EVENTS * 1.1:
            mode = "compaction" if row.compaction else "no compaction"
            report.targets.append(
                Target(
                    f"ADK / engine cold p50 at {row.events:,} events ({mode})",
                    row.ratio(row.cold.p(0.5)),
                    COLD_TARGET,
                    "x",
                )
            )
    for compaction in (False, True):
        points = [p for p in report.curve if p.compaction == compaction]
        mode = "compaction" if compaction else "no compaction"
        if len(points) >= 2:
            first, last = points[0].steady, points[-1].steady
            report.targets.append(
                Target(
                    f"steady-state flatness ({mode}): p50 at {first.history_start:,} events / "
                    f"p50 at {last.history_start:,} (1 = flat)",
                    first.calls.p(0.5) / last.calls.p(0.5),
                    FLATNESS_TARGET,
                    "",
                )
            )
            report.notes.append(
                f"steady p50 from {points[0].steady.history_start:,} to "
                f"{points[-1].steady.history_start:,} events ({mode}): "
                f"client {_flatness(points, False)}, sidecar {_flatness(points, True)}"
            )
    report.notes.extend(
        [
            "ADK: _get_contents(None, events, 'agent') in this process on the ADK Event list "
            "(p50 of 10 runs up to 2k events, 5 up to 20k, 3 above).",
            "cold: first BuildContext after restarting the sidecar on the same database (reads "
            "the log from SQLite, materializes in full). warm: nothing appended since the "
            f"previous call (p50/p99 of {sizes.warm_calls}). steady: {sizes.steady_rounds} "
            "rounds of {AppendEvents(next invocation); BuildContext}; percentiles are "
            "nearest-rank, so with 50 calls p99 is the slowest call.",
            "srv: the sidecar's handler time from its INFO log line (validation, store head "
            "lookup, view extension, response bytes); the rest of the client time is gRPC and "
            "protobuf (de)serialization, which grows with the size of the context returned "
            "('resp KB'; 'parse' = BuildContextResponse.FromString of it in this process).",
            "compaction rounds: steady rounds whose invocation ended with a compaction event "
            "(which re-sorts the history, so the view is rebuilt): how many, and the slowest.",
            f"the benchmark process and the sidecar share {os.cpu_count()} CPU(s); load average "
            f"(1 min) at start {load_at_start}, at end {load_average()}; total "
            f"{time.perf_counter() - started:.0f} s.",
        ]
    )
    for profile in profiles:
        print(profile)
    return report
