"""The garbage collector's pauses in a sidecar with a large event cache: ``gc_freeze`` on and off.

A full collection traverses every tracked object of the process, with the event loop stopped; a
sidecar's heap is mostly its event cache (docs/design/hot-paths.md, Garbage collection). Per
policy (``serve`` by default, which freezes what survives each full collection, and
``--no-gc-freeze``, CPython's own collector), one run on a fresh sidecar (durability=normal,
log level WARNING, the operations port on for the metrics):

* ``load``: ``sessions`` sessions of ``events_per_session`` events each (``bench.context``'s
  tool-using conversation), appended in batches of 500, each session's context built once so
  that its log is cached;
* ``steady``: ``iterations`` rounds, each on the next session in turn: its next invocation
  appended (AppendEvents) and a "contents since" BuildContext, as an agent's loop does.

Reported per phase: the garbage collector's full collections and their pause seconds (from the
sidecar's ``contextengine_gc_pause_seconds`` histogram; the longest pause as the bucket it fell
in), and for the steady phase the sidecar's CPU per round (``/proc/<pid>/task/*/schedstat``)
and the round's latency at the client (p50, p99, max), side by side for both policies.

Data check: each steady answer extends the contents held (the since chain holds).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench import (
    DataCheckError,
    Options,
    Report,
    RowsReport,
    free_port,
    load_average,
    number,
    table,
)
from bench.answer_floor import CHANNEL_OPTIONS, identity
from bench.context import APP, SEED, USER, Conversation, Session, percentile
from bench.context_floor import task_cpu_ns
from bench.sidecar import Sidecar
from contextengine.v1 import context_service_pb2 as cpb, session_service_pb2 as spb

AGENT = "agent"
_APPEND = "/contextengine.v1.SessionService/AppendEvents"
_BUILD = "/contextengine.v1.ContextService/BuildContext"
_CREATE = "/contextengine.v1.SessionService/CreateSession"
_BATCH = 500
POLICIES = {"freeze (default)": [], "CPython (--no-gc-freeze)": ["--no-gc-freeze"]}


@dataclass(frozen=True)
class Sizes:
    sessions: int
    events_per_session: int
    iterations: int


FULL_SIZES = Sizes(sessions=40, events_per_session=5_000, iterations=3_000)
QUICK_SIZES = Sizes(sessions=8, events_per_session=2_000, iterations=400)


@dataclass(frozen=True)
class Pauses:
    """Full collections (generation 2) of a phase, from two scrapes of the histogram."""

    collections: int
    seconds: float
    #: the upper bound of the bucket the longest pause fell in ("+Inf" beyond the last)
    longest: str


@dataclass(frozen=True)
class Row:
    policy: str
    cached_events: int
    load: Pauses
    steady: Pauses
    cpu_us_per_round: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    frozen_objects: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class GcReport(RowsReport[Row]):
    def render(self) -> str:
        header = (
            "policy",
            "cached events",
            "load: full GCs",
            "s",
            "longest <=",
            "steady: full GCs",
            "s",
            "longest <=",
            "sidecar us/round",
            "p50 ms",
            "p99 ms",
            "max ms",
            "frozen objects",
        )
        body = [
            (
                row.policy,
                f"{row.cached_events:,}",
                str(row.load.collections),
                number(row.load.seconds, 2),
                row.load.longest,
                str(row.steady.collections),
                number(row.steady.seconds, 2),
                row.steady.longest,
                number(row.cpu_us_per_round, 0),
                number(row.p50_ms, 1),
                number(row.p99_ms, 1),
                number(row.max_ms, 0),
                number(row.frozen_objects, 0),
            )
            for row in self.rows
        ]
        return "\n".join([f"== {self.benchmark} ==", *table(header, body), *self.footer()])


@dataclass(frozen=True)
class Scrape:
    """What one ``/metrics`` read says of the collector: its full collections so far (count,
    pause seconds, the histogram's cumulative buckets) and the frozen objects."""

    collections: int
    seconds: float
    buckets: tuple[tuple[str, float], ...]
    frozen: float


async def _scrape(http: httpx.AsyncClient, port: int) -> Scrape:
    text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    collections, seconds, frozen = 0, 0.0, 0.0
    buckets: list[tuple[str, float]] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "contextengine_gc_frozen_objects":
                frozen = sample.value
            elif (
                family.name != "contextengine_gc_pause_seconds"
                or sample.labels.get("generation") != "2"
            ):
                continue
            elif sample.name.endswith("_count"):
                collections = int(sample.value)
            elif sample.name.endswith("_sum"):
                seconds = sample.value
            elif sample.name.endswith("_bucket"):
                buckets.append((sample.labels["le"], sample.value))
    return Scrape(collections, seconds, tuple(buckets), frozen)


def _pauses(before: Scrape, after: Scrape) -> Pauses:
    """The full collections between two scrapes; the longest as the first bucket that holds
    all of them."""
    collections = after.collections - before.collections
    longest = next(
        (
            bound
            for (bound, was), (_, now) in zip(before.buckets, after.buckets, strict=True)
            if now - was == collections
        ),
        "",
    )
    return Pauses(collections, after.seconds - before.seconds, longest if collections else "")


async def _policy_run(workdir: Path, policy: str, args: list[str], sizes: Sizes) -> Row:
    conversation = Conversation(SEED)
    base = Session(conversation, compaction=False, seed=SEED)
    base.grow(sizes.events_per_session)
    log = [event.SerializeToString() for event in base.protos]
    rounds_per_session = sizes.iterations // sizes.sessions + 1
    nexts = [
        [e.SerializeToString() for e in base.next_invocation()] for _ in range(rounds_per_session)
    ]
    port = free_port()
    sidecar = Sidecar(
        workdir,
        re.sub(r"\W+", "-", policy).strip("-"),
        durability="normal",
        check_health=True,
        args=["--ops-listen", f"127.0.0.1:{port}", *args],
    )
    async with sidecar, httpx.AsyncClient() as http:
        channel = grpc.aio.insecure_channel(sidecar.target, options=CHANNEL_OPTIONS)
        create = channel.unary_unary(
            _CREATE, request_serializer=identity, response_deserializer=identity
        )
        append = channel.unary_unary(
            _APPEND, request_serializer=identity, response_deserializer=identity
        )
        build = channel.unary_unary(
            _BUILD, request_serializer=identity, response_deserializer=identity
        )

        def appending(session: str, events: list[bytes]) -> bytes:
            request = spb.AppendEventsRequest(app_name=APP, user_id=USER, session_id=session)
            for data in events:
                request.events.add().MergeFromString(data)
            return request.SerializeToString()

        def building(session: str, held: tuple[int, str] | None) -> bytes:
            request = cpb.BuildContextRequest(
                app_name=APP, user_id=USER, session_id=session, agent_name=AGENT
            )
            if held is not None:
                request.since.contents_count, request.since.contents_digest = held
            return request.SerializeToString()

        try:
            start = await _scrape(http, port)
            held: dict[str, tuple[int, str]] = {}
            for n in range(sizes.sessions):
                session = f"s{n}"
                await create(
                    spb.CreateSessionRequest(
                        app_name=APP, user_id=USER, session_id=session
                    ).SerializeToString()
                )
                for first in range(0, len(log), _BATCH):
                    await append(appending(session, log[first : first + _BATCH]))
                answer = cpb.BuildContextResponse.FromString(await build(building(session, None)))
                held[session] = (len(answer.contents), answer.contents_digest)
            loaded = await _scrape(http, port)
            pid = sidecar.pid
            latencies: list[float] = []
            cpu = task_cpu_ns(pid)
            for n in range(sizes.iterations):
                session = f"s{n % sizes.sessions}"
                began = time.perf_counter()
                await append(appending(session, nexts[n // sizes.sessions]))
                answer = cpb.BuildContextResponse.FromString(
                    await build(building(session, held[session]))
                )
                latencies.append(time.perf_counter() - began)
                if answer.base_contents_count != held[session][0]:
                    raise DataCheckError(f"{policy}: an answer not based on the contents held")
                held[session] = (
                    len(answer.contents) + answer.base_contents_count,
                    answer.contents_digest,
                )
            cpu = task_cpu_ns(pid) - cpu
            steady = await _scrape(http, port)
        finally:
            await channel.close()
    return Row(
        policy,
        sizes.sessions * sizes.events_per_session,
        _pauses(start, loaded),
        _pauses(loaded, steady),
        cpu / sizes.iterations / 1000,
        percentile(latencies, 0.50) * 1000,
        percentile(latencies, 0.99) * 1000,
        max(latencies) * 1000,
        steady.frozen,
    )


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = GcReport(
        "gc",
        {
            "sessions": sizes.sessions,
            "events_per_session": sizes.events_per_session,
            "iterations": sizes.iterations,
        },
    )
    load_at_start = load_average(all_three=True)
    with tempfile.TemporaryDirectory(prefix="ce-bench-gc-") as tmp:
        for policy, args in POLICIES.items():
            report.rows.append(await _policy_run(Path(tmp), policy, args, sizes))
    report.checks.append("every steady answer was based on the contents held (the since chain)")
    report.notes += [
        "full GCs: collections of generation 2 in the phase; s: their pause seconds; longest <=: "
        "the histogram bucket of the longest one",
        "a round: the next invocation appended to one session and its contents since built; "
        "sidecar us/round: CPU of all its threads; p50/p99/max: the round at the client",
        f"load average at start {load_at_start}, at end {load_average(all_three=True)} "
        f"({os.cpu_count()} CPUs; the benchmark process shares them)",
    ]
    return report
