"""Appending events against the gRPC floor: the sidecar's CPU per call beside a bare server's.

Issue #22's first target: the sidecar's CPU per ``AppendEvent`` within 1.3x of a bare
``grpc.aio`` unary server answering the same request bytes with a response of the same bytes,
and per event in ``AppendEvents`` batches within 1.3x of that server's CPU per batch call / batch
size plus the SQLite insert itself.

In one run, for each workload, on the same request bytes (serialized once, before anything is
timed; the events are ``bench.append``'s tool-using conversation):

* ``sidecar``: ``python -m contextengine serve`` (``bench.sidecar``, durability=normal, log level
  WARNING, no auth, no tracing exporter), driven over raw channels with identity serializers,
  so that the client does the same work for both servers;
* ``floor``: a bare ``grpc.aio`` server in its own process with one generic unary method that
  returns, for each request, the bytes the sidecar answered to it (looked up by the request
  bytes): the transport's cost for the same bytes in and out, nothing else;
* ``SQLite insert``: the store's own write of the same events (``store.sqlite._ops.append_events`` in
  ``run_batch``: plan, INSERT, UPDATE of the session row, COMMIT) in a loop in this process on
  a copy of the database, without gRPC, the event loop or the thread hop: CPU per call and per
  event on the calling thread.

The workloads: ``sequential`` (one caller, each call awaited before the next), ``concurrent``
(16 callers, each on its own channel, on one session) and ``batched`` (16 callers, AppendEvents
of 10). Server CPU comes from ``/proc`` (``contextengine.testing.proc``), split by thread (the event loop, the
other Python threads: aiosqlite's per connection and grpc.aio's poller, gRPC's core threads).
Each workload runs twice on each server, alternating (sidecar, floor, sidecar, floor): what
the machine's other load does to one shows in the other's round too. The rows report the sum.

The data check: every acknowledged event of the sidecar is in the log exactly once, in order.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import grpc

from bench import (
    Ceiling,
    DataCheckError,
    Options,
    Report,
    RowsReport,
    load_average,
    number,
    table,
)
from bench.answer_floor import METHOD, FloorServer, identity
from bench.append import APP, USER, to_proto, workload
from bench.sidecar import THREAD_KINDS, Sidecar, profile_summary
from contextengine.client import ContextEngineClient
from contextengine.store import SessionKey
from contextengine.store.sqlite._ops import append_events as store_append_events
from contextengine.store.sqlite._writer import SessionCache, run_batch
from contextengine.testing import proc
from contextengine.v1 import session_service_pb2 as spb

_SERVICE = "contextengine.v1.SessionService"
#: the issue's ceilings: sidecar CPU / floor CPU
RATIO_TARGET = 1.3


@dataclass(frozen=True)
class Sizes:
    sequential_calls: int
    clients: int
    calls_per_client: int
    batch_size: int
    batches_per_client: int
    warmup_calls: int
    rounds: int


FULL_SIZES = Sizes(
    sequential_calls=1500,
    clients=16,
    calls_per_client=100,
    batch_size=10,
    batches_per_client=25,
    warmup_calls=64,
    rounds=2,
)
QUICK_SIZES = Sizes(
    sequential_calls=200,
    clients=16,
    calls_per_client=15,
    batch_size=10,
    batches_per_client=4,
    warmup_calls=16,
    rounds=1,
)


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds so far of process ``pid``'s live threads, by ``THREAD_KINDS`` (as
    ``Sidecar.thread_cpu_seconds``), for a process that is not a ``Sidecar``."""
    names = proc.thread_names(pid)
    totals = dict.fromkeys(THREAD_KINDS, 0.0)
    for tid, name in names.items():
        try:
            seconds = proc.cpu_seconds(pid, tid)
        except OSError:
            continue
        if tid == pid:
            kind = THREAD_KINDS[0]
        elif name == names.get(pid):
            kind = THREAD_KINDS[1]
        else:
            kind = THREAD_KINDS[2]
        totals[kind] += seconds
    return totals


# The workloads -------------------------------------------------------------------------------


@dataclass
class Workload:
    """One workload's request bytes: per caller, the calls it makes one after the other."""

    name: str
    method: str
    #: per caller, its requests
    callers: list[list[bytes]]
    events_per_call: int
    #: the session it appends to
    session_id: str

    @property
    def calls(self) -> int:
        return sum(len(requests) for requests in self.callers)

    @property
    def events(self) -> int:
        return self.calls * self.events_per_call


def _requests(
    session_id: str, prefix: str, calls: int, batch_size: int
) -> tuple[list[bytes], list[Any]]:
    """``calls`` serialized requests (AppendEvent when ``batch_size`` is 1, else AppendEvents
    of ``batch_size``) and the events in them."""
    events = [to_proto(spec) for spec in workload(prefix, calls * batch_size)]
    out: list[bytes] = []
    for n in range(calls):
        if batch_size == 1:
            request: Any = spb.AppendEventRequest(
                app_name=APP, user_id=USER, session_id=session_id, event=events[n]
            )
        else:
            request = spb.AppendEventsRequest(
                app_name=APP,
                user_id=USER,
                session_id=session_id,
                events=events[n * batch_size : (n + 1) * batch_size],
            )
        out.append(request.SerializeToString())
    return out, events


def workloads(sizes: Sizes, round_: int) -> list[Workload]:
    """The three workloads of round ``round_`` (fresh event ids and sessions per round)."""
    seq, _ = _requests(f"seq-{round_}", f"seq-{round_}", sizes.sequential_calls, 1)
    concurrent = [
        _requests(f"conc-{round_}", f"conc-{round_}-{c}", sizes.calls_per_client, 1)[0]
        for c in range(sizes.clients)
    ]
    batched = [
        _requests(
            f"batch-{round_}", f"batch-{round_}-{c}", sizes.batches_per_client, sizes.batch_size
        )[0]
        for c in range(sizes.clients)
    ]
    return [
        Workload("sequential, 1 caller, AppendEvent", "AppendEvent", [seq], 1, f"seq-{round_}"),
        Workload(
            f"concurrent, {sizes.clients} callers, AppendEvent",
            "AppendEvent",
            concurrent,
            1,
            f"conc-{round_}",
        ),
        Workload(
            f"batched, {sizes.clients} callers, AppendEvents of {sizes.batch_size}",
            "AppendEvents",
            batched,
            sizes.batch_size,
            f"batch-{round_}",
        ),
    ]


@dataclass
class Cost:
    """CPU a server spent on some calls (summed over rounds)."""

    calls: int = 0
    events: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    threads: dict[str, float] = field(default_factory=lambda: dict.fromkeys(THREAD_KINDS, 0.0))

    def per_call_us(self) -> float:
        return self.cpu / self.calls * 1e6 if self.calls else float("nan")

    def per_event_us(self) -> float:
        return self.cpu / self.events * 1e6 if self.events else float("nan")

    def thread_us(self, kind: str) -> float:
        return self.threads.get(kind, 0.0) / self.calls * 1e6 if self.calls else float("nan")

    def add(
        self, calls: int, events: int, seconds: float, cpu: float, threads: dict[str, float]
    ) -> None:
        self.calls += calls
        self.events += events
        self.seconds += seconds
        self.cpu += cpu
        for kind, value in threads.items():
            self.threads[kind] = self.threads.get(kind, 0.0) + value

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "events": self.events,
            "seconds": self.seconds,
            "server_cpu_seconds": self.cpu,
            "server_cpu_us_per_call": self.per_call_us(),
            "server_cpu_us_per_event": self.per_event_us(),
            "server_cpu_seconds_by_thread": self.threads,
        }


async def _drive(
    channels: Sequence[grpc.aio.Channel], method: str, callers: Sequence[Sequence[bytes]]
) -> list[list[bytes]]:
    """Each caller's requests, one after the other, callers at the same time, caller k on
    channel k; the responses' bytes."""

    async def caller(channel: grpc.aio.Channel, requests: Sequence[bytes]) -> list[bytes]:
        call = channel.unary_unary(
            method, request_serializer=identity, response_deserializer=identity
        )
        return [await call(request, timeout=30.0) for request in requests]

    return await asyncio.gather(
        *(caller(channel, requests) for channel, requests in zip(channels, callers, strict=False))
    )


@dataclass(frozen=True)
class Server:
    """What ``_measured`` reads of a server process: its CPU seconds so far, in all and by
    thread kind."""

    cpu_seconds: Callable[[], float | None]
    thread_cpu_seconds: Callable[[], dict[str, float]]


async def _measured(
    server: Server,
    channels: Sequence[grpc.aio.Channel],
    method: str,
    job: Workload,
    cost: Cost,
) -> list[list[bytes]]:
    before_cpu = server.cpu_seconds()
    before_threads = server.thread_cpu_seconds()
    started = time.perf_counter()
    responses = await _drive(channels, method, job.callers)
    seconds = time.perf_counter() - started
    after_cpu = server.cpu_seconds()
    if before_cpu is None or after_cpu is None:
        raise RuntimeError("the server's CPU time could not be read")
    cpu = after_cpu - before_cpu
    after_threads = server.thread_cpu_seconds()
    threads = {
        kind: max(0.0, after_threads[kind] - before_threads.get(kind, 0.0))
        for kind in after_threads
    }
    cost.add(job.calls, job.events, seconds, cpu, threads)
    return responses


# The SQLite insert alone ---------------------------------------------------------------------


def _insert_cost(db_path: Path, jobs: Sequence[Workload], out: dict[str, Cost]) -> None:
    """The store's own write of each job's events (one ``run_batch`` per call, as the writer
    runs a lone call), on a copy of the sidecar's database opened like the writer's
    connection; CPU on this thread."""
    db = sqlite3.connect(os.fspath(db_path), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA synchronous = NORMAL")
        for job in jobs:
            cost = out.setdefault(job.name, Cost())
            key = SessionKey(APP, USER, f"insert-{job.session_id}")
            db.execute(
                "INSERT INTO sessions (app_name, user_id, session_id, state, create_time,"
                " update_time, last_sequence, config) VALUES (?, ?, ?, '{}', 0, 0, 0, NULL)",
                (key.app_name, key.user_id, key.session_id),
            )
            cache = SessionCache(16)
            batches = []
            for requests in job.callers:
                for data in requests:
                    if job.method == "AppendEvent":
                        batches.append([spb.AppendEventRequest.FromString(data).event])
                    else:
                        batches.append(list(spb.AppendEventsRequest.FromString(data).events))
            # The events get fresh ids: the sidecar's copy of the database holds them already.
            for n, events in enumerate(batches):
                for i, event in enumerate(events):
                    event.id = f"insert-{n}-{i}"
            started = time.perf_counter()
            cpu = time.thread_time()
            for events in batches:
                op = partial(
                    store_append_events,
                    key=key,
                    events=events,
                    expected_last_sequence=None,
                    now=time.time(),
                )
                run_batch(db, cache, [op])
            cpu = time.thread_time() - cpu
            cost.add(job.calls, job.events, time.perf_counter() - started, cpu, {})
    finally:
        db.close()


# The benchmark -------------------------------------------------------------------------------


@dataclass
class Row:
    workload: str
    events_per_call: int
    sidecar: Cost
    floor: Cost
    insert: Cost

    @property
    def ratio(self) -> float:
        """Sidecar CPU per call / the floor's."""
        return self.sidecar.per_call_us() / self.floor.per_call_us()

    @property
    def budget_us_per_event(self) -> float:
        """The floor per event: the bare server's CPU per call / events per call, plus (for
        batches) the SQLite insert per event."""
        floor = self.floor.per_call_us() / self.events_per_call
        if self.events_per_call == 1:
            return floor
        return floor + self.insert.per_event_us()

    @property
    def event_ratio(self) -> float:
        return self.sidecar.per_event_us() / self.budget_us_per_event

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "events_per_call": self.events_per_call,
            "sidecar": self.sidecar.to_json(),
            "floor": self.floor.to_json(),
            "sqlite_insert": self.insert.to_json(),
            "ratio_per_call": self.ratio,
            "budget_us_per_event": self.budget_us_per_event,
            "ratio_per_event": self.event_ratio,
        }


class FloorReport(RowsReport[Row]):
    def render(self) -> str:
        lines = [f"== {self.benchmark} ==", "server CPU, us (per call, and per event for batches)"]
        header = (
            "workload",
            "calls",
            "sidecar/call",
            "floor/call",
            "ratio",
            "sidecar/event",
            "floor/event",
            "ratio",
            "SQLite insert/event",
            "sidecar calls/s",
        )
        body = [
            (
                row.workload,
                f"{row.sidecar.calls:,}",
                number(row.sidecar.per_call_us(), 0),
                number(row.floor.per_call_us(), 0),
                f"{row.ratio:.2f}x",
                number(row.sidecar.per_event_us(), 0),
                number(row.budget_us_per_event, 0),
                f"{row.event_ratio:.2f}x",
                number(row.insert.per_event_us(), 0),
                number(row.sidecar.calls / row.sidecar.seconds, 0),
            )
            for row in self.rows
        ]
        lines.extend(table(header, body))
        lines.append("")
        lines.append("server CPU by thread, us per call (sidecar | floor):")
        for row in self.rows:
            parts = ", ".join(
                f"{kind} {number(row.sidecar.thread_us(kind), 0)} | "
                f"{number(row.floor.thread_us(kind), 0)}"
                for kind in THREAD_KINDS
            )
            lines.append(f"  {row.workload}: {parts}")
        lines.extend(self.footer())
        return "\n".join(lines)


def _check(name: str, responses: Sequence[Sequence[bytes]], method: str) -> list[str]:
    """The ids the sidecar acknowledged as newly stored, in each caller's order."""
    ids: list[str] = []
    for caller in responses:
        for data in caller:
            if method == "AppendEvent":
                one = spb.AppendEventResponse.FromString(data)
                if not one.stored or one.duplicate:
                    raise DataCheckError(f"{name}: {one.event.id} was not stored as new")
                ids.append(one.event.id)
            else:
                many = spb.AppendEventsResponse.FromString(data)
                ids.extend(event.id for event in many.events)
    return ids


async def _verify(client: ContextEngineClient, session_id: str, acknowledged: list[str]) -> str:
    stored = [e async for e in client.list_events(APP, USER, session_id, page_size=1000)]
    if [e.sequence for e in stored] != list(range(1, len(stored) + 1)):
        raise DataCheckError(f"{session_id}: sequences are not 1..{len(stored)}")
    if sorted(e.id for e in stored) != sorted(acknowledged):
        raise DataCheckError(f"{session_id}: the log is not the acknowledged events, once each")
    return f"{session_id}: {len(acknowledged)} acknowledged = {len(stored)} stored, each once"


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = FloorReport(
        "append-floor",
        parameters={
            "sequential_calls": sizes.sequential_calls,
            "clients": sizes.clients,
            "calls_per_client": sizes.calls_per_client,
            "batch_size": sizes.batch_size,
            "batches_per_client": sizes.batches_per_client,
            "rounds": sizes.rounds,
            "quick": options.quick,
            "profile": options.profile,
        },
    )
    if not proc.AVAILABLE:
        report.notes.append("no /proc on this system: the server CPU cannot be measured")
        return report
    load_at_start = load_average(all_three=True)
    sidecar_costs: dict[str, Cost] = {}
    floor_costs: dict[str, Cost] = {}
    insert_costs: dict[str, Cost] = {}
    names: list[tuple[str, int]] = []
    with tempfile.TemporaryDirectory(prefix="ce-bench-floor-") as tmp:
        workdir = Path(tmp)
        sidecar = Sidecar(
            workdir, "append-floor", durability="normal", profile=options.profile, check_health=True
        )
        async with sidecar, FloorServer() as floor, ContextEngineClient(sidecar.target) as admin:
            engine = Server(sidecar.cpu_seconds, sidecar.thread_cpu_seconds)
            bare = Server(
                partial(proc.cpu_seconds, floor.pid), partial(thread_cpu_seconds, floor.pid)
            )
            engine_channels = [
                grpc.aio.insecure_channel(sidecar.target) for _ in range(sizes.clients)
            ]
            floor_channels = [grpc.aio.insecure_channel(floor.target) for _ in range(sizes.clients)]
            try:
                await admin.create_session(APP, USER, "warmup")
                warm, _ = _requests("warmup", "warmup", sizes.warmup_calls, 1)
                warm_callers = [warm[c :: sizes.clients] for c in range(sizes.clients)]
                responses = await _drive(engine_channels, f"/{_SERVICE}/AppendEvent", warm_callers)
                await floor.load(
                    {
                        r: a
                        for rs, ans in zip(warm_callers, responses, strict=True)
                        for r, a in zip(rs, ans, strict=True)
                    }
                )
                await _drive(floor_channels, METHOD, warm_callers)
                for round_ in range(sizes.rounds):
                    for job in workloads(sizes, round_):
                        if round_ == 0:
                            names.append((job.name, job.events_per_call))
                        await admin.create_session(APP, USER, job.session_id)
                        responses = await _measured(
                            engine,
                            engine_channels,
                            f"/{_SERVICE}/{job.method}",
                            job,
                            sidecar_costs.setdefault(job.name, Cost()),
                        )
                        acknowledged = _check(job.name, responses, job.method)
                        report.checks.append(await _verify(admin, job.session_id, acknowledged))
                        await floor.load(
                            {
                                r: a
                                for rs, ans in zip(job.callers, responses, strict=True)
                                for r, a in zip(rs, ans, strict=True)
                            }
                        )
                        echoed = await _measured(
                            bare,
                            floor_channels,
                            METHOD,
                            job,
                            floor_costs.setdefault(job.name, Cost()),
                        )
                        if echoed != responses:
                            raise DataCheckError(f"{job.name}: the floor answered other bytes")
            finally:
                for channel in [*engine_channels, *floor_channels]:
                    await channel.close()
        # The insert alone, on a copy of the database the stopped sidecar left.
        shutil.copy(sidecar.db, workdir / "insert.db")
        for round_ in range(sizes.rounds):
            _insert_cost(workdir / "insert.db", workloads(sizes, round_), insert_costs)
        profile = profile_summary(sidecar.profiles, "sidecar (append-floor)", limit=30)
    for name, events_per_call in names:
        report.rows.append(
            Row(name, events_per_call, sidecar_costs[name], floor_costs[name], insert_costs[name])
        )
    for row in report.rows:
        if row.events_per_call == 1:
            report.targets.append(
                Ceiling(f"{row.workload}: sidecar CPU / floor", row.ratio, RATIO_TARGET, "x")
            )
        else:
            report.targets.append(
                Ceiling(
                    f"{row.workload}: sidecar CPU per event / (floor per call / "
                    f"{row.events_per_call} + SQLite insert per event)",
                    row.event_ratio,
                    RATIO_TARGET,
                    "x",
                )
            )
    report.notes.extend(
        [
            "floor: a bare grpc.aio unary server (its own process, identity serializers) "
            "answering each request with the bytes the sidecar answered to it; both servers "
            "driven by the same raw channels from this process, the same callers and requests.",
            "SQLite insert: the store's own write op (plan, INSERT, UPDATE session, COMMIT) in "
            "run_batch on this thread, no gRPC, no event loop, no thread hop.",
            f"each workload ran {sizes.rounds} round(s) on each server, alternating; the rows "
            "are the sums.",
            f"load average at start {load_at_start}, at end {load_average(all_three=True)} "
            f"({os.cpu_count()} CPUs; the benchmark process shares them).",
        ]
    )
    if profile:
        print(profile)
    return report
