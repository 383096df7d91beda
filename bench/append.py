"""Appending events: google-adk's ``SqliteSessionService`` against this sidecar over gRPC.

Every workload appends the same kind of events (a tool-using conversation: the user's question,
the model's function call, the tool's response, the model's answer; about half of them change
state), on the same machine, in the same run:

* ``ADK SqliteSessionService``: google-adk 2.13's ``append_event``, in-process, one session in a
  temporary SQLite file, each call awaited before the next. It uses SQLite's defaults (rollback
  journal, ``synchronous=FULL``) and opens a connection per call, as shipped.
* ``engine sequential``: the sidecar as a separate process (``python -m contextengine serve``),
  one ``ContextEngineClient``, each ``AppendEvent`` awaited before the next.
* ``engine 16 clients, AppendEvent``: 16 clients, each on its own channel, appending their own
  events to one session at the same time (the issue's concurrency target).
* ``engine 16 clients, AppendEvents of 10``: the same with atomic batches, which shows what the
  store sustains once the per-call cost of gRPC is shared by several events.
* ``gRPC floor``: ``grpc.health.v1`` ``Check`` calls on the same sidecar. They touch no store,
  so they bound what any unary call can reach on this machine.

The engine rows run with ``--durability normal`` (the default: survives a crash of the process)
and ``--durability full`` (also survives power loss, like ADK's ``synchronous=FULL``).

Afterwards every acknowledged event is looked up in the log (``ListEvents`` / ``get_session``):
each exactly once, sequences 1..n without gaps, nothing stored that was not acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.adk.events import Event as AdkEvent, EventActions
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types as genai_types
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench import DataCheckError, Measurement, Options, Report, Target, load_average
from bench.sidecar import Durability, Sidecar, profile_summary
from contextengine.client import ContextEngineClient
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, event_pb2

APP = "bench"
USER = "user-1"
AGENT = "weather_agent"
CITIES = ("Paris", "Tokyo", "Lima", "Oslo", "Nairobi", "Hanoi", "Quebec", "Perth")

#: the issue's targets for the default durability
SEQUENTIAL_VS_ADK_TARGET = 2.0
CONCURRENT_EVENTS_PER_SECOND_TARGET = 5000.0


@dataclass(frozen=True)
class Sizes:
    adk_events: int
    sequential_events: int
    clients: int
    events_per_client: int
    #: events per AppendEvents call in the batched workload
    batch_size: int
    warmup_events: int


FULL_SIZES = Sizes(
    adk_events=2000,
    sequential_events=2000,
    clients=16,
    events_per_client=400,
    batch_size=10,
    warmup_events=64,
)
QUICK_SIZES = Sizes(
    adk_events=200,
    sequential_events=200,
    clients=16,
    events_per_client=25,
    batch_size=5,
    warmup_events=16,
)


# The workload ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventSpec:
    """One event, described once and built both as an ADK event and as the proto."""

    id: str
    invocation_id: str
    author: str
    role: str
    text: str | None = None
    #: (call id, function name, arguments)
    function_call: tuple[str, str, dict[str, Any]] | None = None
    #: (call id, function name, response)
    function_response: tuple[str, str, dict[str, Any]] | None = None
    state_delta: dict[str, Any] | None = None


def workload(prefix: str, count: int) -> list[EventSpec]:
    """``count`` events of a tool-using conversation, ids ``<prefix>-<n>``."""
    specs: list[EventSpec] = []
    for n in range(count):
        turn, step = divmod(n, 4)
        city = CITIES[turn % len(CITIES)]
        event_id = f"{prefix}-{n}"
        invocation = f"{prefix}-inv-{turn}"
        call_id = f"{prefix}-call-{turn}"
        if step == 0:
            spec = EventSpec(
                event_id,
                invocation,
                "user",
                "user",
                text=(
                    f"What is the weather like in {city} today? I am planning a long walk this "
                    "afternoon and wonder whether I should take an umbrella."
                ),
            )
        elif step == 1:
            spec = EventSpec(
                event_id,
                invocation,
                AGENT,
                "model",
                function_call=(call_id, "get_weather", {"city": city, "units": "metric"}),
                state_delta={"last_tool": "get_weather", "tool_calls": turn + 1},
            )
        elif step == 2:
            spec = EventSpec(
                event_id,
                invocation,
                AGENT,
                "user",
                function_response=(
                    call_id,
                    "get_weather",
                    {
                        "city": city,
                        "temperature_c": 8 + turn % 17,
                        "conditions": "light rain",
                        "humidity": 0.81,
                        "wind_kph": 14,
                    },
                ),
            )
        else:
            spec = EventSpec(
                event_id,
                invocation,
                AGENT,
                "model",
                text=(
                    f"It is {8 + turn % 17} °C in {city} with light rain and a moderate wind, "
                    "so yes: take an umbrella and a light jacket for your walk."
                ),
                state_delta=(
                    {"turns": turn + 1, "user:last_city": city} if turn % 2 == 0 else None
                ),
            )
        specs.append(spec)
    return specs


def to_adk(spec: EventSpec) -> AdkEvent:
    if spec.function_call is not None:
        call_id, name, args = spec.function_call
        part = genai_types.Part(
            function_call=genai_types.FunctionCall(id=call_id, name=name, args=args)
        )
    elif spec.function_response is not None:
        call_id, name, response = spec.function_response
        part = genai_types.Part(
            function_response=genai_types.FunctionResponse(id=call_id, name=name, response=response)
        )
    else:
        part = genai_types.Part(text=spec.text)
    return AdkEvent(
        id=spec.id,
        invocation_id=spec.invocation_id,
        author=spec.author,
        content=genai_types.Content(role=spec.role, parts=[part]),
        actions=EventActions(state_delta=dict(spec.state_delta or {})),
    )


def to_proto(spec: EventSpec) -> event_pb2.Event:
    part = content_pb2.Part()
    if spec.function_call is not None:
        call_id, name, args = spec.function_call
        part.function_call.id = call_id
        part.function_call.name = name
        part.function_call.args.CopyFrom(dict_to_struct(args))
    elif spec.function_response is not None:
        call_id, name, response = spec.function_response
        part.function_response.id = call_id
        part.function_response.name = name
        part.function_response.response.CopyFrom(dict_to_struct(response))
    else:
        part.text = spec.text or ""
    event = event_pb2.Event(
        id=spec.id,
        invocation_id=spec.invocation_id,
        author=spec.author,
        content=content_pb2.Content(role=spec.role, parts=[part]),
    )
    if spec.state_delta:
        event.actions.state_delta.CopyFrom(dict_to_struct(spec.state_delta))
    return event


# Measurements ------------------------------------------------------------------------------


class _Meter:
    """Wall time and CPU time (of this process, and of the sidecar by thread) around a workload."""

    def __init__(self, server: Sidecar | None = None) -> None:
        self._server = server
        self._wall = self._cpu = 0.0
        self._server_cpu: float | None = None
        self._server_threads: dict[str, float] = {}
        self.seconds = self.client_cpu = 0.0
        self.server_cpu: float | None = None
        self.server_threads: tuple[tuple[str, float], ...] = ()

    def __enter__(self) -> _Meter:
        if self._server is not None:
            self._server_cpu = self._server.cpu_seconds()
            self._server_threads = self._server.thread_cpu_seconds()
        self._cpu = time.process_time()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._wall
        self.client_cpu = time.process_time() - self._cpu
        if self._server is None:
            return
        after = self._server.cpu_seconds()
        if after is not None and self._server_cpu is not None:
            self.server_cpu = after - self._server_cpu
        threads = self._server.thread_cpu_seconds()
        self.server_threads = tuple(
            (kind, max(0.0, threads[kind] - self._server_threads.get(kind, 0.0)))
            for kind in threads
        )

    def measurement(
        self,
        name: str,
        events: int,
        latencies: Sequence[float],
        baseline_events_per_second: float | None,
    ) -> Measurement:
        return Measurement(
            name,
            events,
            self.seconds,
            tuple(latencies),
            client_cpu_seconds=self.client_cpu,
            server_cpu_seconds=self.server_cpu,
            baseline_events_per_second=baseline_events_per_second,
            server_threads=self.server_threads,
        )


async def bench_adk(workdir: Path, count: int) -> tuple[Measurement, str]:
    """ADK's ``append_event``, in-process, one call after the other."""
    service = SqliteSessionService(str(workdir / "adk.db"))
    try:
        session = await service.create_session(app_name=APP, user_id=USER, session_id="adk")
        events = [to_adk(spec) for spec in workload("adk", count)]
        latencies: list[float] = []
        with _Meter() as meter:
            for event in events:
                started = time.perf_counter()
                await service.append_event(session, event)
                latencies.append((time.perf_counter() - started) * 1000)
        stored = await service.get_session(app_name=APP, user_id=USER, session_id="adk")
    finally:
        await service.close()
    if stored is None:
        raise DataCheckError("ADK lost its session")
    ids = [event.id for event in stored.events]
    _check_ids("ADK session", ids, [event.id for event in events])
    measurement = meter.measurement("ADK SqliteSessionService (in-process)", count, latencies, None)
    return measurement, f"ADK: {count} appended = {len(ids)} stored, each once"


async def _append_one_by_one(
    client: ContextEngineClient,
    session_id: str,
    events: Sequence[event_pb2.Event],
    acknowledged: list[str],
    latencies: list[float],
) -> None:
    """``AppendEvent`` per event, each awaited; records acknowledged ids and latencies."""
    for event in events:
        started = time.perf_counter()
        response = await client.append_event(APP, USER, session_id, event)
        latencies.append((time.perf_counter() - started) * 1000)
        if not response.stored or response.duplicate:
            raise DataCheckError(f"{event.id}: stored={response.stored} dup={response.duplicate}")
        acknowledged.append(response.event.id)


async def _append_in_batches(
    client: ContextEngineClient,
    session_id: str,
    events: Sequence[event_pb2.Event],
    batch_size: int,
    acknowledged: list[str],
    latencies: list[float],
) -> None:
    """``AppendEvents`` of ``batch_size`` events, each awaited; latencies are per call."""
    for start in range(0, len(events), batch_size):
        batch = events[start : start + batch_size]
        started = time.perf_counter()
        response = await client.append_events(APP, USER, session_id, batch)
        latencies.append((time.perf_counter() - started) * 1000)
        recorded = list(response.events)
        first = recorded[0].sequence if recorded else 0
        if [e.id for e in recorded] != [e.id for e in batch] or [
            e.sequence for e in recorded
        ] != list(range(first, first + len(batch))):
            raise DataCheckError(f"batch from {batch[0].id}: not recorded as one block")
        acknowledged.extend(e.id for e in recorded)


async def _health_checks(stub: health_pb2_grpc.HealthStub, calls: int) -> None:
    request = health_pb2.HealthCheckRequest(service="")
    for _ in range(calls):
        await stub.Check(request, timeout=10.0)


@dataclass
class EngineResult:
    rows: list[Measurement]
    floor: list[Measurement]
    checks: list[str]
    profile: str


async def bench_engine(
    workdir: Path,
    durability: Durability,
    sizes: Sizes,
    options: Options,
    adk_rate: float,
    *,
    measure_floor: bool,
) -> EngineResult:
    """The engine's workloads against one sidecar process (and, with ``measure_floor``, the
    cost of a gRPC call that does nothing, for reference)."""
    label = f"durability={durability}"
    result = EngineResult([], [], [], "")
    async with (
        Sidecar(
            workdir,
            f"engine-{durability}",
            durability=durability,
            profile=options.profile,
            check_health=True,
        ) as server,
        AsyncExitStack() as stack,
    ):
        admin = await stack.enter_async_context(ContextEngineClient(server.target, attempts=1))
        clients = [
            await stack.enter_async_context(ContextEngineClient(server.target, attempts=1))
            for _ in range(sizes.clients)
        ]
        await asyncio.gather(admin.wait_ready(), *(c.wait_ready() for c in clients))
        for session_id in ("warmup", "sequential", "concurrent", "batched"):
            await admin.create_session(APP, USER, session_id)

        # Warm-up: opens the store's connections and every channel's HTTP/2 connection.
        warm = [to_proto(s) for s in workload("warm", sizes.warmup_events)]
        await asyncio.gather(
            *(
                _append_one_by_one(client, "warmup", warm[n :: len(clients)], [], [])
                for n, client in enumerate(clients)
            )
        )

        sequential = [to_proto(s) for s in workload("seq", sizes.sequential_events)]
        seq_acked: list[str] = []
        seq_latencies: list[float] = []
        with _Meter(server) as meter:
            await _append_one_by_one(admin, "sequential", sequential, seq_acked, seq_latencies)
        result.rows.append(
            meter.measurement(
                f"engine sequential, 1 client ({label})", len(sequential), seq_latencies, adk_rate
            )
        )

        for session_id, batch_size in (("concurrent", 1), ("batched", sizes.batch_size)):
            per_client = [
                [to_proto(s) for s in workload(f"{session_id}-{n}", sizes.events_per_client)]
                for n in range(sizes.clients)
            ]
            acked: list[list[str]] = [[] for _ in clients]
            latencies: list[list[float]] = [[] for _ in clients]
            with _Meter(server) as meter:
                await asyncio.gather(
                    *(
                        _append_one_by_one(client, session_id, events, ids, ms)
                        if batch_size == 1
                        else _append_in_batches(client, session_id, events, batch_size, ids, ms)
                        for client, events, ids, ms in zip(
                            clients, per_client, acked, latencies, strict=True
                        )
                    )
                )
            how = "AppendEvent" if batch_size == 1 else f"AppendEvents of {batch_size}"
            result.rows.append(
                meter.measurement(
                    f"engine {sizes.clients} clients, {how} ({label})",
                    sum(len(events) for events in per_client),
                    [ms for client_ms in latencies for ms in client_ms],
                    adk_rate,
                )
            )
            result.checks.append(
                await _verify(admin, session_id, [i for ids in acked for i in ids], label)
            )
        result.checks.insert(0, await _verify(admin, "sequential", seq_acked, label))

        if measure_floor:
            stubs = [health_pb2_grpc.HealthStub(c.channel) for c in clients]
            with _Meter(server) as meter:
                await _health_checks(stubs[0], sizes.sequential_events)
            result.floor.append(
                meter.measurement(
                    "gRPC floor: Health/Check, 1 client", sizes.sequential_events, [], None
                )
            )
            with _Meter(server) as meter:
                await asyncio.gather(*(_health_checks(s, sizes.events_per_client) for s in stubs))
            result.floor.append(
                meter.measurement(
                    f"gRPC floor: Health/Check, {sizes.clients} clients",
                    sizes.events_per_client * sizes.clients,
                    [],
                    None,
                )
            )
    result.profile = profile_summary(server.profiles, f"sidecar ({label})", limit=25)
    return result


async def _verify(
    client: ContextEngineClient, session_id: str, acknowledged: Sequence[str], label: str
) -> str:
    """Every acknowledged event is in the log exactly once, at sequences 1..n."""
    stored = [e async for e in client.list_events(APP, USER, session_id, page_size=1000)]
    sequences = [event.sequence for event in stored]
    if sequences != list(range(1, len(stored) + 1)):
        raise DataCheckError(f"{session_id} ({label}): sequences are not 1..{len(stored)}")
    _check_ids(f"{session_id} ({label})", [event.id for event in stored], acknowledged)
    return (
        f"engine {session_id} ({label}): {len(acknowledged)} acknowledged = {len(stored)} "
        f"stored, each once, sequences 1..{len(stored)}"
    )


def _check_ids(what: str, stored: Sequence[str], acknowledged: Sequence[str]) -> None:
    if len(set(stored)) != len(stored):
        raise DataCheckError(f"{what}: an event id is stored more than once")
    missing = set(acknowledged) - set(stored)
    if missing:
        raise DataCheckError(
            f"{what}: {len(missing)} acknowledged events are missing, e.g. {sorted(missing)[:5]}"
        )
    unexpected = set(stored) - set(acknowledged)
    if unexpected:
        raise DataCheckError(
            f"{what}: {len(unexpected)} stored events were never acknowledged, e.g. "
            f"{sorted(unexpected)[:5]}"
        )


# The benchmark -----------------------------------------------------------------------------


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = Report(
        "append",
        parameters={
            "adk_events": sizes.adk_events,
            "sequential_events": sizes.sequential_events,
            "clients": sizes.clients,
            "events_per_client": sizes.events_per_client,
            "batch_size": sizes.batch_size,
            "quick": options.quick,
            "profile": options.profile,
        },
    )
    load_at_start = load_average()
    floor: list[Measurement] = []
    profiles: list[str] = []
    by_durability: dict[Durability, list[Measurement]] = {}
    with tempfile.TemporaryDirectory(prefix="ce-bench-") as tmp:
        workdir = Path(tmp)
        adk, check = await bench_adk(workdir, sizes.adk_events)
        report.measurements.append(adk)
        report.checks.append(check)
        durability: Durability
        for durability in ("normal", "full"):
            result = await bench_engine(
                workdir,
                durability,
                sizes,
                options,
                adk.events_per_second,
                measure_floor=durability == "normal",
            )
            by_durability[durability] = result.rows
            report.measurements.extend(result.rows)
            report.checks.extend(result.checks)
            floor.extend(result.floor)
            if result.profile:
                profiles.append(result.profile)
    report.measurements.extend(floor)

    sequential, concurrent, _batched = by_durability["normal"]
    report.targets.append(
        Target(
            "sequential (durability=normal) vs ADK",
            sequential.ratio or 0.0,
            SEQUENTIAL_VS_ADK_TARGET,
            "x",
        )
    )
    report.targets.append(
        Target(
            f"{sizes.clients} concurrent clients, AppendEvent (durability=normal)",
            concurrent.events_per_second,
            CONCURRENT_EVENTS_PER_SECOND_TARGET,
            "events/s",
        )
    )
    report.notes.extend(
        [
            "ADK uses SQLite's defaults (rollback journal, synchronous=FULL, a connection per "
            "call); durability=full is the like-for-like comparison for power-loss safety.",
            f"the benchmark process and the sidecar share {os.cpu_count()} CPU(s); 'CPU us/ev' "
            "is CPU time per event (per call for the gRPC floor) in each process.",
            "gRPC floor: grpc.health.v1 Check on the same sidecar, no store involved: the most "
            "calls per second this machine's gRPC stack (grpc.aio on both sides) gives.",
            f"load average (1 min) at start {load_at_start}, at end {load_average()}: anything "
            "else running on the machine skews the numbers, the ratios most of all.",
        ]
    )
    for profile in profiles:
        print(profile)
    return report
