"""BuildContext against the gRPC floor: the sidecar's CPU per call beside a bare server's.

Issue #22, item 3: the steady-state answer for an unchanged or slightly grown view within 1.5x
of a bare ``grpc.aio`` call returning the same response bytes, at 1k, 10k and 50k events, for
full answers and for "contents since" answers (``BuildContextRequest.since``).

One session (``bench.context``'s tool-using conversation, no compaction) grows through the
sizes. At each size, four workloads, each a run of calls one after the other:

* ``full, unchanged``: BuildContext with nothing appended since the previous call;
* ``since, unchanged``: the same with ``since`` naming the whole contents held (an answer with
  no contents);
* ``full, grown``: before each call the conversation's next invocation is appended
  (AppendEvents, not measured), so the view grows by a few contents per call;
* ``since, grown``: the same, each call naming the contents of the previous answer, so each
  answer carries only the new contents.

Each workload runs on the sidecar (``python -m contextengine serve``, ``bench.sidecar``,
durability=normal, log level WARNING) and then on the floor: a bare ``grpc.aio`` server in its
own process with one generic unary method that answers each request with the bytes the sidecar
answered to it (so the same bytes in and out; the grown workloads' requests carry a distinct
``invocation_id`` per call, which the sidecar ignores without prompt caching, so that each one
has its own answer). Both are driven over raw channels with identity serializers, so the
client does the same work for both. Server CPU per call is measured around each call only
(the appends of the grown workloads are outside; each workload starts on an idle sidecar, once
the background work of the appends before it is done), from ``/proc/<pid>/task/*/schedstat``
(nanoseconds of CPU of every thread; ``/proc/<pid>/stat``'s clock ticks are too coarse for one
call). The ratio is sidecar / floor in the same run. Beside it, each server's minor page faults
per call (``/proc/<pid>/stat``): fresh pages its allocator had the kernel map in for the answer.

Data checks: the since answers reassembled equal the full answer byte for byte; every answer
covers the whole log (``last_sequence``).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bench import Ceiling, DataCheckError, Options, Report, RowsReport, load_average, number, table
from bench.answer_floor import CHANNEL_OPTIONS, METHOD, FloorServer, identity
from bench.context import APP, SEED, USER, Conversation, Session
from bench.sidecar import Sidecar, profile_summary
from contextengine.client import ContextEngineClient
from contextengine.testing.proc import minor_faults, resident_kib
from contextengine.v1 import context_service_pb2 as cpb

SESSION = "floor"
AGENT = "agent"
_METHOD = "/contextengine.v1.ContextService/BuildContext"
#: whether this system has ``/proc`` with per-thread ``schedstat`` (Linux)
_PROC = Path("/proc/self/task").exists()
#: the issue's ceiling: sidecar CPU / floor CPU
RATIO_TARGET = 1.5


@dataclass(frozen=True)
class Sizes:
    events: tuple[int, ...]
    #: calls per unchanged workload / per grown workload
    unchanged_calls: int
    grown_calls: int
    #: the most bytes of full answers the grown workload keeps for the floor (fewer calls for
    #: big contexts)
    grown_bytes: int
    append_batch: int


FULL_SIZES = Sizes((1_000, 10_000, 50_000), 300, 100, 400_000_000, 500)
QUICK_SIZES = Sizes((1_000, 5_000), 60, 20, 100_000_000, 500)


def task_cpu_ns(pid: int) -> int:
    """CPU nanoseconds so far of process ``pid``'s live threads (``schedstat``'s first field)."""
    total = 0
    for entry in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((entry / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread has ended
    return total


# The bare server -----------------------------------------------------------------------------


# The workloads -------------------------------------------------------------------------------


@dataclass
class Cost:
    """What one server spent on one workload's calls."""

    calls: int = 0
    cpu_ns: int = 0
    response_bytes: int = 0
    seconds: float = 0.0
    #: the server's minor page faults during the calls
    faults: int = 0

    def per_call_us(self) -> float:
        return self.cpu_ns / self.calls / 1e3 if self.calls else float("nan")

    def faults_per_call(self) -> float:
        return self.faults / self.calls if self.calls else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "server_cpu_us_per_call": self.per_call_us(),
            "response_bytes_per_call": self.response_bytes / self.calls if self.calls else 0,
            "seconds": self.seconds,
            "minor_faults_per_call": self.faults_per_call(),
        }


@dataclass
class Row:
    events: int
    workload: str
    contents: int
    sidecar: Cost
    floor: Cost

    @property
    def ratio(self) -> float:
        return self.sidecar.per_call_us() / self.floor.per_call_us()

    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "workload": self.workload,
            "contents": self.contents,
            "sidecar": self.sidecar.to_json(),
            "floor": self.floor.to_json(),
            "ratio": self.ratio,
        }


class Caller:
    """Unary calls on one raw channel, each measured in the server's CPU."""

    def __init__(self, target: str, method: str, pid: int) -> None:
        self.channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._call = self.channel.unary_unary(
            method, request_serializer=identity, response_deserializer=identity
        )
        self.pid = pid

    async def call(self, request: bytes, cost: Cost) -> bytes:
        faults = minor_faults(self.pid)
        before = task_cpu_ns(self.pid)
        started = time.perf_counter()
        answer: bytes = await self._call(request, timeout=120.0)
        cost.seconds += time.perf_counter() - started
        cost.cpu_ns += task_cpu_ns(self.pid) - before
        cost.faults += minor_faults(self.pid) - faults
        cost.calls += 1
        cost.response_bytes += len(answer)
        return answer


def _mib(pid: int, field: str) -> str:
    return f"{resident_kib(pid, field) / 1024:,.0f} MiB"


def _request(*, since: Held | None = None, tag: str = "") -> bytes:
    request = cpb.BuildContextRequest(
        app_name=APP, user_id=USER, session_id=SESSION, agent_name=AGENT, invocation_id=tag
    )
    if since is not None:
        request.since.contents_count = len(since.contents)
        request.since.contents_digest = since.digest
    return request.SerializeToString()


@dataclass
class Held:
    """What a since caller holds: each content's bytes, and the digest of them all."""

    contents: list[bytes] = field(default_factory=list)
    digest: str = ""

    def take(self, answer: cpb.BuildContextResponse) -> None:
        base = answer.base_contents_count
        if base > len(self.contents):
            raise DataCheckError(f"an answer based on {base} contents, {len(self.contents)} held")
        self.contents[base:] = [c.SerializeToString() for c in answer.contents]
        self.digest = answer.contents_digest


class Bench:
    def __init__(self, sidecar: Sidecar, floor: FloorServer, sizes: Sizes) -> None:
        self.sizes = sizes
        self.session = Session(Conversation(SEED), compaction=False, seed=SEED)
        self.appended = 0
        self.engine = Caller(sidecar.target, _METHOD, 0)
        self.floor_server = floor
        self.floor = Caller(floor.target, METHOD, floor.pid)
        self.client = ContextEngineClient(sidecar.target, attempts=1, timeout=120.0)
        self.checks: list[str] = []

    async def append_next(self) -> None:
        await self._append(self.session.next_invocation())

    async def grow_to(self, events: int) -> None:
        start = len(self.session.protos)
        self.session.grow(events)
        await self._append(self.session.protos[start:])

    async def _append(self, events: Sequence[Any]) -> None:
        batch = self.sizes.append_batch
        for start in range(0, len(events), batch):
            await self.client.append_events(APP, USER, SESSION, events[start : start + batch])
        self.appended += len(events)

    def _check_last(self, data: bytes) -> cpb.BuildContextResponse:
        answer = cpb.BuildContextResponse.FromString(data)
        if answer.last_sequence != self.appended:
            raise DataCheckError(
                f"an answer up to {answer.last_sequence}, {self.appended} events appended"
            )
        return answer

    async def _floor_pass(self, pairs: list[tuple[bytes, bytes]], cost: Cost) -> None:
        await self.floor_server.load(dict(pairs))
        for request, answer in pairs:
            if await self.floor.call(request, cost) != answer:
                raise DataCheckError("the floor answered other bytes")

    async def idle(self, tick: float = 0.25, longest: float = 120.0) -> None:
        """Waits until the sidecar spends less than 1 ms of CPU in ``tick`` seconds (at most
        ``longest``): what the appends before set going in the background (the token measures
        of a bulk of appended events) is not in the calls measured next."""
        deadline = time.monotonic() + longest
        before = task_cpu_ns(self.engine.pid)
        while time.monotonic() < deadline:
            await asyncio.sleep(tick)
            now = task_cpu_ns(self.engine.pid)
            if now - before < 1_000_000:
                return
            before = now

    async def unchanged(self, events: int, since: bool) -> Row:
        full = self._check_last(await self.engine.call(_request(), Cost()))
        await self.idle()
        held = Held()
        held.take(full)
        request = _request(since=held) if since else _request()
        engine_cost, floor_cost = Cost(), Cost()
        answer = b""
        for _ in range(self.sizes.unchanged_calls):
            answer = await self.engine.call(request, engine_cost)
        last = self._check_last(answer)
        if since and (last.contents or last.base_contents_count != len(full.contents)):
            raise DataCheckError("an unchanged since answer carried contents")
        calls = [(request, answer)] * self.sizes.unchanged_calls
        await self._floor_pass(calls, floor_cost)
        name = "since, unchanged" if since else "full, unchanged"
        return Row(events, name, len(full.contents), engine_cost, floor_cost)

    async def grown(self, events: int, since: bool) -> Row:
        first = self._check_last(await self.engine.call(_request(), Cost()))
        await self.idle()
        held = Held()
        held.take(first)
        calls = max(5, min(self.sizes.grown_calls, self.sizes.grown_bytes // first.ByteSize()))
        engine_cost, floor_cost = Cost(), Cost()
        pairs: list[tuple[bytes, bytes]] = []
        for n in range(calls):
            await self.append_next()
            tag = f"{events}-{since}-{n}"
            request = _request(since=held, tag=tag) if since else _request(tag=tag)
            answer = await self.engine.call(request, engine_cost)
            decoded = self._check_last(answer)
            pairs.append((request, answer))
            if since:
                held.take(decoded)
        name = "since, grown" if since else "full, grown"
        if not since:
            held = Held()
            held.take(decoded)
        contents = len(held.contents)
        if since:
            whole = cpb.BuildContextResponse.FromString(await self.engine.call(_request(), Cost()))
            if held.contents != [c.SerializeToString() for c in whole.contents]:
                raise DataCheckError(f"{events} events: the reassembled contents differ")
            self.checks.append(
                f"{events} events: {calls} since answers reassembled = the full answer "
                f"({len(whole.contents)} contents)"
            )
        await self._floor_pass(pairs, floor_cost)
        return Row(events, name, contents, engine_cost, floor_cost)


class FloorReport(RowsReport[Row]):
    def render(self) -> str:
        header = (
            "events",
            "workload",
            "contents",
            "calls",
            "answer bytes",
            "sidecar us/call",
            "floor us/call",
            "ratio",
            "page faults/call (sidecar | floor)",
        )
        body = [
            (
                f"{row.events:,}",
                row.workload,
                f"{row.contents:,}",
                f"{row.sidecar.calls:,}",
                number(row.sidecar.response_bytes / row.sidecar.calls, 0),
                number(row.sidecar.per_call_us(), 0),
                number(row.floor.per_call_us(), 0),
                f"{row.ratio:.2f}x",
                f"{number(row.sidecar.faults_per_call(), 0)} | "
                f"{number(row.floor.faults_per_call(), 0)}",
            )
            for row in self.rows
        ]
        lines = [
            f"== {self.benchmark} ==",
            "server CPU per BuildContext call, us",
            *table(header, body),
        ]
        lines.extend(self.footer())
        return "\n".join(lines)


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = FloorReport(
        "context-floor",
        parameters={
            "events": list(sizes.events),
            "unchanged_calls": sizes.unchanged_calls,
            "grown_calls": sizes.grown_calls,
            "quick": options.quick,
            "profile": options.profile,
        },
    )
    if not _PROC:
        report.notes.append("no /proc on this system: the server CPU cannot be measured")
        return report
    load_at_start = load_average(all_three=True)
    with tempfile.TemporaryDirectory(prefix="ce-bench-context-floor-") as tmp:
        sidecar = Sidecar(
            Path(tmp),
            "context-floor",
            durability="normal",
            profile=options.profile,
            check_health=True,
        )
        async with sidecar, FloorServer() as floor:
            bench = Bench(sidecar, floor, sizes)
            bench.engine.pid = sidecar.pid
            try:
                await bench.client.create_session(APP, USER, SESSION)
                for events in sizes.events:
                    await bench.grow_to(events)
                    for since in (False, True):
                        report.rows.append(await bench.unchanged(events, since))
                    for since in (False, True):
                        report.rows.append(await bench.grown(events, since))
                # What keeping freed blocks for reuse costs in memory (malloc_tuning)
                report.notes.append(
                    f"sidecar resident memory at the end {_mib(sidecar.pid, 'VmRSS')}, "
                    f"peak {_mib(sidecar.pid, 'VmHWM')}"
                )
            finally:
                await bench.client.close()
                await bench.engine.channel.close()
                await bench.floor.channel.close()
            report.checks.extend(bench.checks)
        if options.profile:
            report.notes.append(profile_summary(sidecar.profiles, "sidecar main thread", 25))
    for row in report.rows:
        report.targets.append(
            Ceiling(f"{row.events:,} events, {row.workload}", row.ratio, RATIO_TARGET, "x floor")
        )
    report.notes.append(
        f"load average at start {load_at_start}, at the end {load_average(all_three=True)} "
        f"({os.cpu_count()} cores); ratios are sidecar / floor in this run"
    )
    return report
