"""The hot paths in one run: the sidecar's CPU per operation against history length, each beside
its floor (issue #22, item 5).

One session (``bench.context``'s conversation of tool-using ADK invocations, no compaction) grows
through the history lengths (1k, 5k, 10k, 50k events; ``--quick``: 1k, 5k, 10k). At each length,
on the same sidecar (``python -m contextengine serve``, ``bench.sidecar``, SQLite, durability
normal, log level WARNING):

* ``AppendEvent``: the conversation's next events, one AppendEvent call each, one after the
  other. Floor: a bare ``grpc.aio`` unary server in its own process (``bench.append_floor``'s
  ``FloorServer``) answering each of the same request bytes with the bytes the sidecar answered.
* ``BuildContext steady``: BuildContext for the agent with nothing appended since the previous
  call (the view is incremental: what is left is the per-request cost). Floor: the same bare
  server answering the same request with the same response bytes.
* ``BuildContext since``: the same with ``since`` naming the whole contents the previous answer
  held (an answer without contents), when the sidecar supports it (its answers carry
  ``contents_digest``; the row is left out otherwise). Floor: as above.
* ``cold start``: the sidecar restarted on the same database, then its first BuildContext (the
  median of ``cold_repeats`` restarts). Floor: ADK's ``_get_contents`` on the same events in
  this process (CPU time, median of 3), the in-process rebuild that the engine's first answer
  after a restart must not be slower than.

Both servers are driven over raw channels with identity serializers, so the client does the same
work for both. Server CPU (all threads, from ``/proc``: ``contextengine.testing.proc``) is read before and after
a block of calls and divided by the calls; the ratio is sidecar / floor from the same run (the
machine's other load weighs on both). Cold start CPU is the sidecar's CPU during that one call.

Writes ``bench/results/hotpaths.json`` and the plot ``bench/results/hotpaths.png`` (CPU per
operation against history length, log axes, floors dashed; matplotlib, from the dev extra).

Data checks: every AppendEvent is acknowledged in order; every BuildContext answer covers the
whole log (``last_sequence``) and the steady answers are the same bytes each time; since answers
hold no contents and the same digest; the cold answers equal the steady answer's contents and
count as many contents as ADK's.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bench import Ceiling, DataCheckError, Options, Report, load_average, number, table
from bench.answer_floor import CHANNEL_OPTIONS, METHOD, FloorServer, identity
from bench.context import (
    AGENT as CONTEXT_AGENT,
    APP,
    FULL_SIZES as CONTEXT_SIZES,
    SEED,
    SESSION,
    USER,
    Conversation,
    Engine,
    Session,
    time_adk,
)
from bench.sidecar import Sidecar
from contextengine.testing import proc
from contextengine.v1 import context_service_pb2 as cpb, session_service_pb2 as spb

#: the floor server's one method (``bench.append_floor``: answers each request with its bytes)
_APPEND_METHOD = "/contextengine.v1.SessionService/AppendEvent"
_BUILD_METHOD = "/contextengine.v1.ContextService/BuildContext"
_CALL_TIMEOUT_SECONDS = 120.0

#: issue #22's ceilings, sidecar CPU / floor CPU (cold start: engine / ADK)
CEILINGS = {
    "AppendEvent": 1.3,
    "BuildContext steady": 1.5,
    "BuildContext since": 1.5,
    "cold start": 1.0,
}

OPERATIONS = tuple(CEILINGS)


@dataclass(frozen=True)
class Sizes:
    histories: tuple[int, ...]
    append_calls: int
    #: BuildContext calls per block: this many bytes of answers at most (the answers grow with
    #: the history), between min_build_calls and max_build_calls
    build_bytes: int
    min_build_calls: int
    max_build_calls: int
    cold_repeats: int

    def build_calls(self, response_bytes: int) -> int:
        fit = self.build_bytes // max(1, response_bytes)
        return max(self.min_build_calls, min(self.max_build_calls, fit))


FULL_SIZES = Sizes(
    histories=(1_000, 5_000, 10_000, 50_000),
    append_calls=300,
    build_bytes=600_000_000,
    min_build_calls=30,
    max_build_calls=300,
    cold_repeats=3,
)
QUICK_SIZES = Sizes(
    histories=(1_000, 5_000, 10_000),
    append_calls=150,
    build_bytes=200_000_000,
    min_build_calls=20,
    max_build_calls=150,
    cold_repeats=2,
)


@dataclass
class Point:
    """One operation at one history length: the sidecar's CPU per call and its floor's."""

    operation: str
    history: int
    calls: int
    sidecar_ms: float
    floor_ms: float
    #: the sidecar's wall time per call as seen from here (ms)
    wall_ms: float = 0.0
    #: bytes of one answer (the last one)
    response_bytes: int = 0
    floor_name: str = ""

    @property
    def ratio(self) -> float:
        return self.sidecar_ms / self.floor_ms if self.floor_ms > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "history": self.history,
            "calls": self.calls,
            "sidecar_cpu_ms_per_call": self.sidecar_ms,
            "floor_cpu_ms_per_call": self.floor_ms,
            "ratio": self.ratio,
            "ceiling": CEILINGS[self.operation],
            "floor": self.floor_name,
            "sidecar_wall_ms_per_call": self.wall_ms,
            "response_bytes": self.response_bytes,
        }


class Caller:
    """Raw unary calls of one method on a channel, with the server's CPU read around blocks."""

    def __init__(self, target: str, method: str, cpu: Callable[[], float | None]) -> None:
        self._channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._call = self._channel.unary_unary(
            method, request_serializer=identity, response_deserializer=identity
        )
        self._cpu = cpu

    async def close(self) -> None:
        await self._channel.close()

    async def one(self, request: bytes) -> bytes:
        answer: bytes = await self._call(request, timeout=_CALL_TIMEOUT_SECONDS)
        return answer

    async def block(self, requests: Sequence[bytes]) -> tuple[list[bytes], float, float]:
        """The answers, the server's CPU seconds and the wall seconds of the calls."""
        before = self._cpu()
        started = time.perf_counter()
        answers = [await self.one(request) for request in requests]
        wall = time.perf_counter() - started
        after = self._cpu()
        if before is None or after is None:
            raise RuntimeError("the server's CPU time could not be read")
        return answers, after - before, wall


def _append_requests(events: Sequence[Any]) -> list[bytes]:
    return [
        spb.AppendEventRequest(
            app_name=APP, user_id=USER, session_id=SESSION, event=event
        ).SerializeToString()
        for event in events
    ]


def _build_request(since: cpb.ContextSince | None = None) -> bytes:
    request = cpb.BuildContextRequest(
        app_name=APP, user_id=USER, session_id=SESSION, agent_name=CONTEXT_AGENT
    )
    if since is not None:
        request.since.CopyFrom(since)
    return request.SerializeToString()


@dataclass
class HotpathsReport(Report):
    points: list[Point] = field(default_factory=list)
    plot: str = ""

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data["points"] = [point.to_json() for point in self.points]
        data["plot"] = self.plot
        return data

    def render(self) -> str:
        lines = [f"== {self.benchmark} =="]
        lines.append(
            "sidecar CPU per call (ms, all threads) beside its floor's, same run; ratio = "
            "sidecar / floor (cold start: engine's first BuildContext after a restart / ADK "
            "_get_contents in-process)"
        )
        header = (
            "operation",
            "history",
            "calls",
            "sidecar ms",
            "floor ms",
            "ratio",
            "ceiling",
            "floor",
            "wall ms",
            "answer KB",
        )
        rows = [
            (
                point.operation,
                f"{point.history:,}",
                f"{point.calls:,}",
                number(point.sidecar_ms, 3),
                number(point.floor_ms, 3),
                f"{point.ratio:,.2f}x",
                f"{CEILINGS[point.operation]:.1f}x",
                point.floor_name,
                number(point.wall_ms, 2),
                f"{point.response_bytes / 1024:,.1f}",
            )
            for point in self.points
        ]
        lines.extend(table(header, rows))
        if self.plot:
            lines.append(f"plot: {self.plot}")
        lines.extend(self.footer())
        return "\n".join(lines)


class Bench:
    def __init__(self, workdir: Path, sizes: Sizes) -> None:
        self.sizes = sizes
        self.sidecar = Sidecar(workdir, "hotpaths", start_timeout=60.0, stop_timeout=60.0)
        self.engine = Engine(self.sidecar, CONTEXT_SIZES)
        self.session = Session(Conversation(SEED), compaction=False, seed=SEED + 1)
        self.floor = FloorServer()
        self.points: list[Point] = []
        self.checks: list[str] = []
        self.since_supported: bool | None = None

    def _sidecar_cpu(self) -> float | None:
        return self.sidecar.cpu_seconds()

    def _floor_cpu(self) -> float | None:
        try:
            return proc.cpu_seconds(self.floor.pid)
        except OSError:
            return None

    async def run(self) -> None:
        async with self.floor:
            await self.sidecar.start()
            try:
                await self.engine.connect()
                await self.engine.client.create_session(APP, USER, SESSION)
                for history in self.sizes.histories:
                    await self.at(history)
            finally:
                await self.engine.close()
                await self.sidecar.stop()

    async def _floor_cpu_for(self, requests: Sequence[bytes], answers: Sequence[bytes]) -> float:
        """The bare server's CPU seconds answering ``requests`` with ``answers`` (the same
        bytes the sidecar took and gave), one call after the other."""
        await self.floor.load(dict(zip(requests, answers, strict=True)))
        caller = Caller(self.floor.target, METHOD, self._floor_cpu)
        try:
            got, cpu, _ = await caller.block(requests)
        finally:
            await caller.close()
        if got != list(answers):
            raise DataCheckError("the floor answered other bytes than it was given")
        return cpu

    async def at(self, history: int) -> None:
        session, engine = self.session, self.engine
        previous = len(session.protos)
        session.grow(history)
        await engine.append(session.protos[previous:])
        caller = Caller(self.sidecar.target, _BUILD_METHOD, self._sidecar_cpu)
        try:
            await caller.one(_build_request())  # the session is in use: its view is built
            # The sidecar measures the bulk-appended events in the background: let it finish,
            # so that the blocks below measure their own calls only.
            await self._idle()
            await self.appends(history)
            await self.steady(history, caller)
            await self.since(history, caller)
        finally:
            await caller.close()
        await self.cold(history)

    async def _idle(self, tick: float = 0.25, longest: float = 120.0) -> None:
        """Waits until the sidecar's CPU time stops growing (two reads ``tick`` apart), at
        most ``longest`` seconds."""
        deadline = time.monotonic() + longest
        before = self._sidecar_cpu()
        while time.monotonic() < deadline:
            await asyncio.sleep(tick)
            now = self._sidecar_cpu()
            if now == before:
                return
            before = now

    async def appends(self, history: int) -> None:
        session, engine = self.session, self.engine
        events: list[Any] = []
        while len(events) < self.sizes.append_calls:
            events.extend(session.next_invocation())
        requests = _append_requests(events)
        await self._idle()
        caller = Caller(self.sidecar.target, _APPEND_METHOD, self._sidecar_cpu)
        before = self._sidecar_cpu()
        try:
            answers, _, wall = await caller.block(requests)
        finally:
            await caller.close()
        # The session is in use: the sidecar reads and measures the appended events in the
        # background after the calls. That is part of what the appends cost: wait for it.
        await self._idle()
        after = self._sidecar_cpu()
        if before is None or after is None:
            raise RuntimeError("the sidecar's CPU time could not be read")
        cpu = after - before
        sequences = [spb.AppendEventResponse.FromString(a).event.sequence for a in answers]
        expected = list(range(engine.appended + 1, engine.appended + len(events) + 1))
        if sequences != expected:
            raise DataCheckError(f"AppendEvent at {history:,}: not recorded in order")
        engine.appended += len(events)
        floor_cpu = await self._floor_cpu_for(requests, answers)
        calls = len(requests)
        self.points.append(
            Point(
                "AppendEvent",
                history,
                calls,
                cpu / calls * 1000.0,
                floor_cpu / calls * 1000.0,
                wall / calls * 1000.0,
                len(answers[-1]),
                "bare grpc.aio, same bytes",
            )
        )
        self.checks.append(f"AppendEvent at {history:,}: {len(events)} events recorded in order")

    async def steady(self, history: int, caller: Caller) -> None:
        request = _build_request()
        warm = await caller.one(request)  # the view now covers the appends above
        await self._idle()
        calls = self.sizes.build_calls(len(warm))
        answers, cpu, wall = await caller.block([request] * calls)
        if any(answer != warm for answer in answers):
            raise DataCheckError(f"BuildContext at {history:,}: the steady answers differ")
        response = cpb.BuildContextResponse.FromString(warm)
        if response.last_sequence != self.engine.appended:
            raise DataCheckError(f"BuildContext at {history:,}: does not cover the whole log")
        self.steady_response = response
        floor_cpu = await self._floor_cpu_for([request] * calls, answers)
        self.points.append(
            Point(
                "BuildContext steady",
                history,
                calls,
                cpu / calls * 1000.0,
                floor_cpu / calls * 1000.0,
                wall / calls * 1000.0,
                len(warm),
                "bare grpc.aio, same bytes",
            )
        )
        self.checks.append(
            f"BuildContext steady at {history:,}: {calls} answers, the same bytes, "
            f"{len(response.contents):,} contents up to sequence {response.last_sequence:,}"
        )

    async def since(self, history: int, caller: Caller) -> None:
        response = self.steady_response
        if not response.contents_digest:
            self.since_supported = False
            return
        self.since_supported = True
        since = cpb.ContextSince(
            contents_count=response.base_contents_count + len(response.contents),
            contents_digest=response.contents_digest,
        )
        request = _build_request(since)
        answer = await caller.one(request)
        calls = self.sizes.max_build_calls
        answers, cpu, wall = await caller.block([request] * calls)
        parsed = cpb.BuildContextResponse.FromString(answer)
        if parsed.contents or parsed.contents_digest != response.contents_digest:
            raise DataCheckError(f"BuildContext since at {history:,}: not an empty answer")
        if any(other != answer for other in answers):
            raise DataCheckError(f"BuildContext since at {history:,}: the answers differ")
        floor_cpu = await self._floor_cpu_for([request] * calls, answers)
        self.points.append(
            Point(
                "BuildContext since",
                history,
                calls,
                cpu / calls * 1000.0,
                floor_cpu / calls * 1000.0,
                wall / calls * 1000.0,
                len(answer),
                "bare grpc.aio, same bytes",
            )
        )
        self.checks.append(
            f"BuildContext since at {history:,}: {calls} answers without contents, "
            f"base_contents_count {parsed.base_contents_count:,}, the same digest"
        )

    async def cold(self, history: int) -> None:
        events = len(self.session.adk)
        adk_cpu: list[float] = []
        adk_contents = 0
        for _ in range(3):
            started = time.process_time()
            _, contents = time_adk(self.session.adk, 1)
            adk_cpu.append(time.process_time() - started)
            adk_contents = len(contents)
        request = _build_request()
        cold_cpu: list[float] = []
        cold_wall: list[float] = []
        answer = b""
        for _ in range(self.sizes.cold_repeats):
            await self.engine.restart()
            caller = Caller(self.sidecar.target, _BUILD_METHOD, self._sidecar_cpu)
            try:
                answers, cpu, wall = await caller.block([request])
            finally:
                await caller.close()
            answer = answers[0]
            cold_cpu.append(cpu)
            cold_wall.append(wall)
        response = cpb.BuildContextResponse.FromString(answer)
        steady = self.steady_response
        if list(response.contents) != list(steady.contents):
            raise DataCheckError(f"cold start at {history:,}: other contents than the steady ones")
        if len(response.contents) != adk_contents:
            raise DataCheckError(
                f"cold start at {history:,}: {len(response.contents)} contents, ADK {adk_contents}"
            )
        self.points.append(
            Point(
                "cold start",
                history,
                self.sizes.cold_repeats,
                statistics.median(cold_cpu) * 1000.0,
                statistics.median(adk_cpu) * 1000.0,
                statistics.median(cold_wall) * 1000.0,
                len(answer),
                "ADK _get_contents, in-process CPU",
            )
        )
        self.checks.append(
            f"cold start at {history:,} ({events:,} events): {len(response.contents):,} "
            "contents, the steady answer's, as many as ADK's"
        )


def plot(points: Sequence[Point], path: Path) -> str:
    """CPU per call against history length, log axes, floors dashed; the file's name ("" when
    matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ""
    figure, axes = plt.subplots(figsize=(8.5, 5.2))
    colors = dict(zip(OPERATIONS, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=True))
    for operation in OPERATIONS:
        mine = sorted((p for p in points if p.operation == operation), key=lambda p: p.history)
        if not mine:
            continue
        xs = [p.history for p in mine]
        color = colors[operation]
        axes.plot(xs, [p.sidecar_ms for p in mine], "o-", color=color, label=operation)
        floor = "ADK _get_contents" if operation == "cold start" else "bare gRPC, same bytes"
        axes.plot(
            xs,
            [p.floor_ms for p in mine],
            "s--",
            color=color,
            alpha=0.7,
            label=f"{operation}: floor ({floor})",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("history length (events)")
    axes.set_ylabel("server CPU per call (ms)")
    axes.set_title("contextengine sidecar CPU per operation vs history (floors dashed)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path.name


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = HotpathsReport(
        "hotpaths",
        parameters={
            "histories": list(sizes.histories),
            "append_calls": sizes.append_calls,
            "build_bytes": sizes.build_bytes,
            "build_calls": [sizes.min_build_calls, sizes.max_build_calls],
            "cold_repeats": sizes.cold_repeats,
            "seed": SEED,
            "quick": options.quick,
        },
    )
    load_at_start = load_average()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ce-bench-hotpaths-") as tmp:
        bench = Bench(Path(tmp), sizes)
        await bench.run()
    report.points = bench.points
    report.checks = bench.checks
    for point in report.points:
        report.targets.append(
            Ceiling(
                f"{point.operation} at {point.history:,} events, sidecar / floor",
                point.ratio,
                CEILINGS[point.operation],
                "x",
            )
        )
    options.results_dir.mkdir(parents=True, exist_ok=True)
    report.plot = plot(report.points, options.results_dir / "hotpaths.png")
    if bench.since_supported is False:
        report.notes.append(
            "BuildContext since: the sidecar's answers carry no contents_digest (no since "
            "mode): the row is left out."
        )
    report.notes.extend(
        [
            "CPU: user + system of every thread of the server process (/proc/<pid>/stat, clock "
            "ticks), read around a block of calls and divided by its calls; cold start: around "
            "the one call.",
            "AppendEvent: the session is in use (it had BuildContext calls), so the sidecar "
            "also reads the appended events into its cache and measures their tokens in the "
            "background (runtime.event_cache), after the calls: its CPU here runs until the "
            "sidecar is idle again, and that work is no longer in the next BuildContext. Every "
            "block starts on an idle sidecar.",
            f"the benchmark process and the servers share {os.cpu_count()} CPU(s); load "
            f"average (1 min) at start {load_at_start}, at end {load_average()}; total "
            f"{time.perf_counter() - started:.0f} s.",
        ]
    )
    return report
