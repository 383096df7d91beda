"""What auth, metrics and tracing cost: AppendEvent and BuildContext latency (p50/p99) on sidecars
that differ only in those settings, in the same run (issue #19's "Number to report").

Five sidecars (``python -m contextengine serve``, each its own process on its own SQLite file):

* ``off``: the defaults (no token, no operations port, no traces);
* ``auth``: ``--auth-token`` (every call carries and is checked against a bearer token);
* ``metrics``: ``--ops-listen`` (Prometheus metrics kept; scraped at the end);
* ``tracing``: ``--tracing-otlp-endpoint`` to an OTLP/gRPC collector run by the benchmark
  (it accepts and counts the spans), every trace sampled;
* ``all``: the three together.

The calls alternate between the sidecars in rounds (a round: ``calls_per_round`` sequential
calls on each), so a slow phase of the shared machine lands on all of them alike. The client has
no span of its own (no ``traceparent``): each RPC is a root span on the sidecar, the cost a
sidecar pays per traced call. Data checks: every sidecar stored every event; ``metrics`` and
``all`` count exactly the calls made; the collector received at least one span per traced call.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
from opentelemetry.proto.collector.trace.v1 import (
    trace_service_pb2,
    trace_service_pb2_grpc,
)
from prometheus_client.parser import text_string_to_metric_families

from bench import DataCheckError, Measurement, Options, Report, free_port
from bench.sidecar import Sidecar
from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, event_pb2

APP, USER = "bench-ops", "u1"
TOKEN = "bench-ops-token-0123456789"
CONFIGS = ("off", "auth", "metrics", "tracing", "all")


def text_event(text: str, *, author: str = "user", invocation_id: str = "i") -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    content = content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)])
    return event_pb2.Event(author=author, invocation_id=invocation_id, content=content)


@dataclass(frozen=True)
class Sizes:
    rounds: int
    calls_per_round: int
    #: events in the BuildContext session before timing
    history: int


FULL = Sizes(rounds=50, calls_per_round=20, history=40)
QUICK = Sizes(rounds=4, calls_per_round=10, history=10)


@dataclass(eq=False)
class _Configured(Sidecar):
    """A bench sidecar with extra ``serve`` flags."""

    extra: tuple[str, ...] = ()

    def command(self, profile_file: Path | None = None) -> list[str]:
        return [*super().command(profile_file), *self.extra]


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace collector that keeps only the number of spans it received."""

    def __init__(self) -> None:
        self.spans = 0
        #: how many spans ``enough`` waits for
        self.wanted = 0
        self.enough = asyncio.Event()

    async def Export(self, request: Any, context: Any) -> Any:
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.spans += len(scope.spans)
        if self.wanted and self.spans >= self.wanted:
            self.enough.set()
        return trace_service_pb2.ExportTraceServiceResponse()


@dataclass
class _Target:
    name: str
    sidecar: _Configured
    client: ContextEngineClient | None = None
    ops_port: int = 0
    appends: list[float] = field(default_factory=list)
    builds: list[float] = field(default_factory=list)
    #: the sidecar's CPU seconds while its appends / builds ran
    append_cpu: float = 0.0
    build_cpu: float = 0.0


def _flags(config: str, collector_port: int, ops_port: int) -> tuple[str, ...]:
    auth = ("--auth-token", TOKEN)
    metrics = ("--ops-listen", f"127.0.0.1:{ops_port}")
    tracing = ("--tracing-otlp-endpoint", f"http://127.0.0.1:{collector_port}")
    return {
        "off": (),
        "auth": auth,
        "metrics": metrics,
        "tracing": tracing,
        "all": (*auth, *metrics, *tracing),
    }[config]


async def _scrape(port: int) -> dict[tuple[str, str], float]:
    async with httpx.AsyncClient() as http:
        body = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    counts: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "contextengine_rpcs_handled_total":
                counts[(sample.labels["method"], sample.labels["code"])] = sample.value
    return counts


async def run(options: Options) -> Report:
    sizes = QUICK if options.quick else FULL
    collector = _Collector()
    otlp = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        collector, otlp
    )
    collector_port = otlp.add_insecure_port("127.0.0.1:0")
    await otlp.start()
    report = Report(
        "ops",
        {
            "rounds": sizes.rounds,
            "calls_per_round": sizes.calls_per_round,
            "history_events": sizes.history,
            "configs": list(CONFIGS),
        },
    )
    with tempfile.TemporaryDirectory(prefix="bench-ops-") as tmp:
        targets = []
        for name in CONFIGS:
            ops_port = free_port() if name in ("metrics", "all") else 0
            flags = _flags(name, collector_port, ops_port)
            sidecar = _Configured(Path(tmp), name, check_health=True, extra=flags)
            targets.append(_Target(name, sidecar, ops_port=ops_port))
        try:
            await _measure(targets, sizes)
            await _check(targets, sizes, collector, report)
        finally:
            for target in targets:
                if target.client is not None:
                    await target.client.close()
                await target.sidecar.stop()
            await otlp.stop(0)
    calls = sizes.rounds * sizes.calls_per_round
    for label, pick in (("AppendEvent", "appends"), ("BuildContext", "builds")):
        for target in targets:
            latencies: list[float] = getattr(target, pick)
            report.measurements.append(
                Measurement(
                    f"{label}, {target.name}",
                    calls,
                    sum(latencies) / 1000.0,
                    latencies_ms=tuple(latencies),
                    server_cpu_seconds=getattr(target, f"{pick[:-1]}_cpu"),
                )
            )
    report.notes.extend(_cost_notes(targets))
    report.notes.append(
        "auth: --auth-token (one admin token); metrics: --ops-listen; tracing: OTLP/gRPC export "
        "to a collector in the benchmark process, every trace sampled; calls sequential, one "
        "client per sidecar, sidecars alternating in rounds (each round starting with the next); sidecar CPU from /proc around each sidecar's share of a round (the OTLP export thread's included where it ran)"
    )
    return report


async def _measure(targets: list[_Target], sizes: Sizes) -> None:
    for target in targets:
        await target.sidecar.start()
        token = TOKEN if target.name in ("auth", "all") else None
        client = target.client = ContextEngineClient(target.sidecar.target, attempts=1, token=token)
        await client.create_session(APP, USER, "appends")
        await client.create_session(APP, USER, "context")
        for n in range(sizes.history):
            author = "user" if n % 2 == 0 else "agent"
            event = text_event(
                f"history {n}: " + "words " * 30, author=author, invocation_id=f"h{n}"
            )
            await client.append_event(APP, USER, "context", event)
        for n in range(5):  # warm-up (connections, caches)
            await client.build_context(APP, USER, "context")
            await client.append_event(APP, USER, "appends", text_event(f"warm {n}"))
    for round_number in range(sizes.rounds):
        # Each round starts with another sidecar: no configuration always comes first.
        shift = round_number % len(targets)
        for target in [*targets[shift:], *targets[:shift]]:
            caller = target.client
            assert caller is not None
            cpu = _cpu(target)
            for n in range(sizes.calls_per_round):
                event = text_event(f"round {round_number} call {n}: " + "text " * 20)
                start = time.perf_counter()
                await caller.append_event(APP, USER, "appends", event)
                target.appends.append((time.perf_counter() - start) * 1000.0)
            after = _cpu(target)
            target.append_cpu += after - cpu
            for _ in range(sizes.calls_per_round):
                start = time.perf_counter()
                await caller.build_context(APP, USER, "context")
                target.builds.append((time.perf_counter() - start) * 1000.0)
            target.build_cpu += _cpu(target) - after


def _cpu(target: _Target) -> float:
    seconds = target.sidecar.cpu_seconds()
    if seconds is None:
        raise DataCheckError(f"no CPU time of the {target.name} sidecar (/proc)")
    return seconds


async def _check(
    targets: list[_Target], sizes: Sizes, collector: _Collector, report: Report
) -> None:
    calls = sizes.rounds * sizes.calls_per_round
    appended = calls + 5
    for target in targets:
        client = target.client
        assert client is not None
        stored = [e async for e in client.list_events(APP, USER, "appends")]
        if len(stored) != appended:
            raise DataCheckError(f"{target.name}: {len(stored)} events stored, {appended} sent")
        if target.ops_port:
            counts = await _scrape(target.ops_port)
            append = counts.get(("contextengine.v1.SessionService/AppendEvent", "OK"), 0)
            build = counts.get(("contextengine.v1.ContextService/BuildContext", "OK"), 0)
            if (append, build) != (appended + sizes.history, calls + 5):
                raise DataCheckError(f"{target.name}: metrics counted {append} / {build} calls")
    report.checks.append(f"every sidecar stored all {appended} timed and warm-up appends")
    report.checks.append("the metrics of 'metrics' and 'all' counted exactly the calls made")
    # The batch processor exports every 5 s or when 512 spans wait: give it its last batch.
    traced = 2 * (2 * (calls + 5) + sizes.history + 2)
    collector.wanted = traced
    if collector.spans >= traced:
        collector.enough.set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(collector.enough.wait(), 15.0)
    if collector.spans < traced:
        raise DataCheckError(f"the collector received {collector.spans} spans, {traced} expected")
    report.checks.append(f"the OTLP collector received {collector.spans} spans ({traced} RPCs)")


def _cost_notes(targets: list[_Target]) -> list[str]:
    """Per workload: each configuration's p50/p99 minus the ``off`` sidecar's."""
    notes: list[str] = []
    off = targets[0]
    for label, pick in (("AppendEvent", "appends"), ("BuildContext", "builds")):
        base: list[float] = getattr(off, pick)
        p50, p99 = _percentiles(base)
        parts = []
        for target in targets[1:]:
            t50, t99 = _percentiles(getattr(target, pick))
            parts.append(f"{target.name} {t50 - p50:+.3f} / {t99 - p99:+.3f}")
        notes.append(f"{label} cost vs off, p50 / p99 ms: " + "; ".join(parts))
        cpu = f"{pick[:-1]}_cpu"
        calls = len(base)
        base_us = getattr(off, cpu) / calls * 1e6
        extra = [
            f"{target.name} {getattr(target, cpu) / calls * 1e6 - base_us:+.0f}"
            for target in targets[1:]
        ]
        notes.append(f"{label} sidecar CPU vs off ({base_us:.0f} us/call): " + "; ".join(extra))
    return notes


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]

    return at(0.50), at(0.99)
