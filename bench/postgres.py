"""The PostgreSQL store side by side with SQLite and with google-adk's ``DatabaseSessionService``.

``python -m bench postgres``, in one run, on one machine:

* **Appends** (the tool-using conversation of ``bench.append``): one client appending one event
  per call, 16 clients at once (one session each), and 16 clients appending batches of 10
  (``AppendEvents``), on a sidecar (``contextengine serve``) on a SQLite file and on a sidecar on
  PostgreSQL; google-adk 2.13's ``DatabaseSessionService`` (SQLAlchemy, ``postgresql+asyncpg://``)
  on the same PostgreSQL server (its own database), in-process, one call per event (it has no
  batch append; 16 concurrent ``append_event`` calls on 16 sessions).
* **BuildContext at 10,000 events**: the first call (nothing cached) and the following ones
  (the sidecar's incrementally kept views), on both stores.
* **Cross-sidecar delivery**: two sidecars on one database; one appends 50 events/s, 10
  subscribers on the other receive them; latency from the append's acknowledgement (and from
  its start) to the receipt, p50/p99.

PostgreSQL: the server in ``CONTEXTENGINE_BENCH_POSTGRES`` (a ``postgresql://`` URL of a
database the benchmark may fill), else a throw-away cluster started here like the tests' one
(``tests.pg_server``: fsync off, so commits are as durable as SQLite's ``normal``, not more).
Every acknowledged event is checked in the log afterwards (each once, sequences without gaps).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench import DataCheckError, Measurement, Options, Report
from bench.append import to_adk, to_proto, workload
from bench.sidecar import Sidecar
from contextengine.client import ContextEngineClient
from contextengine.v1 import event_pb2

APP = "bench-pg"
USER = "user-1"


@dataclass(frozen=True)
class Sizes:
    sequential: int
    clients: int
    per_client: int
    batch: int
    batches_per_client: int
    context_events: int
    context_calls: int
    latency_events: int
    subscribers: int
    rate: float


FULL = Sizes(
    sequential=1000,
    clients=16,
    per_client=100,
    batch=10,
    batches_per_client=30,
    context_events=10_000,
    context_calls=20,
    latency_events=300,
    subscribers=10,
    rate=50.0,
)
QUICK = Sizes(
    sequential=150,
    clients=16,
    per_client=15,
    batch=10,
    batches_per_client=5,
    context_events=2_000,
    context_calls=5,
    latency_events=60,
    subscribers=10,
    rate=50.0,
)


class DbSidecar(Sidecar):
    """``bench.sidecar.Sidecar`` on a given ``--db`` (a PostgreSQL URL)."""

    def __init__(self, workdir: Path, name: str, db: str) -> None:
        super().__init__(workdir, name, check_health=True)
        self.database = db

    def command(self, profile_file: Path | None = None) -> list[str]:
        command = super().command(profile_file)
        command[command.index("--db") + 1] = self.database
        return command


# PostgreSQL ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _postgres_server() -> AsyncIterator[str]:
    """The admin URL of a PostgreSQL server (the environment's, or a throw-away one)."""
    given = os.environ.get("CONTEXTENGINE_BENCH_POSTGRES")
    if given:
        yield given
        return
    from tests import pg_server

    binaries = pg_server._binaries() or pg_server._install()
    if binaries is None:
        raise RuntimeError(
            "no PostgreSQL server binaries: set CONTEXTENGINE_BENCH_POSTGRES to a server's URL"
        )
    server = await asyncio.to_thread(pg_server._start, binaries)
    try:
        yield server.dsn()
    finally:
        await asyncio.to_thread(pg_server._stop, server)


async def _database(admin: str, name: str) -> str:
    """A new empty database ``name`` on the server of ``admin``; its URL."""
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    base, _, _ = admin.rpartition("/")
    return f"{base}/{name}"


# Appends ---------------------------------------------------------------------------------


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def _sequential(client: ContextEngineClient, count: int, tag: str) -> list[float]:
    await client.create_session(APP, USER, f"{tag}-seq")
    latencies: list[float] = []
    for spec in workload(f"{tag}-seq", count):
        started = time.perf_counter()
        await client.append_event(APP, USER, f"{tag}-seq", to_proto(spec))
        latencies.append(_ms_since(started))
    return latencies


async def _concurrent(
    targets: Sequence[ContextEngineClient], per_client: int, tag: str, batch: int
) -> list[float]:
    """Each client appends to its own session: ``per_client`` calls of ``batch`` events."""
    latencies: list[float] = []

    async def one(n: int, client: ContextEngineClient) -> None:
        session = f"{tag}-c{n}"
        await client.create_session(APP, USER, session)
        specs = workload(session, per_client * batch)
        for i in range(per_client):
            events = [to_proto(s) for s in specs[i * batch : (i + 1) * batch]]
            started = time.perf_counter()
            if batch == 1:
                await client.append_event(APP, USER, session, events[0])
            else:
                await client.append_events(APP, USER, session, events)
            latencies.append(_ms_since(started))

    await asyncio.gather(*(one(n, c) for n, c in enumerate(targets)))
    return latencies


async def _check(client: ContextEngineClient, session: str, expected: int) -> None:
    log = [e async for e in client.list_events(APP, USER, session)]
    if [e.sequence for e in log] != list(range(1, expected + 1)):
        raise DataCheckError(f"{session}: {len(log)} events, expected 1..{expected}")
    if len({e.id for e in log}) != expected:
        raise DataCheckError(f"{session}: an event is recorded twice")


async def _bench_engine(
    name: str, sidecar: Sidecar, sizes: Sizes, report: Report, tag: str
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(ContextEngineClient(sidecar.target, attempts=1))
            for _ in range(sizes.clients)
        ]
        await _sequential(clients[0], 20, f"{tag}-warm")
        started = time.perf_counter()
        latencies = await _sequential(clients[0], sizes.sequential, tag)
        report.measurements.append(
            Measurement(
                f"{name}: 1 client, AppendEvent",
                sizes.sequential,
                time.perf_counter() - started,
                tuple(latencies),
            )
        )
        await _check(clients[0], f"{tag}-seq", sizes.sequential)
        for batch, calls, label in (
            (1, sizes.per_client, "AppendEvent"),
            (sizes.batch, sizes.batches_per_client, f"AppendEvents of {sizes.batch}"),
        ):
            run_tag = f"{tag}-b{batch}"
            started = time.perf_counter()
            latencies = await _concurrent(clients, calls, run_tag, batch)
            report.measurements.append(
                Measurement(
                    f"{name}: {sizes.clients} clients, {label}",
                    sizes.clients * calls * batch,
                    time.perf_counter() - started,
                    tuple(latencies),
                )
            )
            for n in range(sizes.clients):
                await _check(clients[0], f"{run_tag}-c{n}", calls * batch)
    report.checks.append(f"{name}: every acknowledged event recorded once, sequences 1..n")


async def _bench_adk(dsn: str, sizes: Sizes, report: Report) -> None:
    from google.adk.sessions.database_session_service import DatabaseSessionService

    url = dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
    service = DatabaseSessionService(url)
    try:
        session = await service.create_session(app_name=APP, user_id=USER, session_id="adk")
        for spec in workload("adk-warm", 20):
            await service.append_event(session, to_adk(spec))
        latencies: list[float] = []
        started = time.perf_counter()
        for spec in workload("adk-seq", sizes.sequential):
            t0 = time.perf_counter()
            await service.append_event(session, to_adk(spec))
            latencies.append(_ms_since(t0))
        report.measurements.append(
            Measurement(
                "ADK DatabaseSessionService (PostgreSQL): 1 client",
                sizes.sequential,
                time.perf_counter() - started,
                tuple(latencies),
            )
        )
        sessions = [
            await service.create_session(app_name=APP, user_id=USER, session_id=f"adk-c{n}")
            for n in range(sizes.clients)
        ]
        concurrent: list[float] = []

        async def one(n: int) -> None:
            for spec in workload(f"adk-c{n}", sizes.per_client):
                t0 = time.perf_counter()
                await service.append_event(sessions[n], to_adk(spec))
                concurrent.append(_ms_since(t0))

        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(sizes.clients)))
        report.measurements.append(
            Measurement(
                f"ADK DatabaseSessionService (PostgreSQL): {sizes.clients} sessions at once",
                sizes.clients * sizes.per_client,
                time.perf_counter() - started,
                tuple(concurrent),
            )
        )
        stored = await service.get_session(app_name=APP, user_id=USER, session_id="adk")
        if stored is None or len(stored.events) != 20 + sizes.sequential:
            raise DataCheckError("ADK's DatabaseSessionService lost events")
    finally:
        await service.close()
    report.checks.append("ADK DatabaseSessionService: every appended event stored")


# BuildContext ----------------------------------------------------------------------------


async def _bench_context(name: str, sidecar: Sidecar, sizes: Sizes, report: Report) -> None:
    async with ContextEngineClient(sidecar.target, attempts=1, timeout=120.0) as client:
        session = "ctx"
        await client.create_session(APP, USER, session)
        specs = workload(session, sizes.context_events)
        for i in range(0, len(specs), 200):
            await client.append_events(
                APP, USER, session, [to_proto(s) for s in specs[i : i + 200]]
            )
        latencies: list[float] = []
        started = time.perf_counter()
        for _ in range(sizes.context_calls):
            t0 = time.perf_counter()
            built = await client.build_context(APP, USER, session, agent_name="weather_agent")
            latencies.append(_ms_since(t0))
        if built.last_sequence != sizes.context_events:
            raise DataCheckError(f"{name}: the context covers {built.last_sequence} events")
        report.measurements.append(
            Measurement(
                f"{name}: BuildContext at {sizes.context_events:,} events (first, then warm)",
                sizes.context_calls,
                time.perf_counter() - started,
                tuple(latencies),
            )
        )
        warm = sorted(latencies[1:]) or latencies
        report.notes.append(
            f"{name} BuildContext at {sizes.context_events:,} events: first call "
            f"{latencies[0]:,.0f} ms, warm p50 {warm[len(warm) // 2]:,.1f} ms"
        )


# Cross-sidecar delivery -----------------------------------------------------------------


async def _bench_delivery(a: Sidecar, b: Sidecar, sizes: Sizes, report: Report) -> None:
    session = "live"
    acked: dict[str, float] = {}
    sent: dict[str, float] = {}
    received: list[dict[str, float]] = [{} for _ in range(sizes.subscribers)]
    ready = [asyncio.Event() for _ in range(sizes.subscribers)]

    async def follow(n: int, client: ContextEngineClient) -> None:
        frames = client.subscribe_events(APP, USER, session)
        async with contextlib.aclosing(frames):
            async for frame in frames:
                kind = frame.WhichOneof("frame")
                if kind == "caught_up":
                    ready[n].set()
                elif kind == "event":
                    received[n][frame.event.event.id] = time.perf_counter()
                    if len(received[n]) == sizes.latency_events:
                        return

    async with contextlib.AsyncExitStack() as stack:
        writer = await stack.enter_async_context(ContextEngineClient(a.target, attempts=1))
        readers = [
            await stack.enter_async_context(ContextEngineClient(b.target, attempts=1))
            for _ in range(sizes.subscribers)
        ]
        await writer.create_session(APP, USER, session)
        tasks = [asyncio.create_task(follow(n, c)) for n, c in enumerate(readers)]
        try:
            await asyncio.wait_for(asyncio.gather(*(r.wait() for r in ready)), 30)
            interval = 1.0 / sizes.rate
            start = time.perf_counter()
            for n, spec in enumerate(workload(session, sizes.latency_events)):
                delay = start + n * interval - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                event: event_pb2.Event = to_proto(spec)
                sent[event.id] = time.perf_counter()
                await writer.append_event(APP, USER, session, event)
                acked[event.id] = time.perf_counter()
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    from_ack = [r[i] - acked[i] for r in received for i in r]
    from_send = [r[i] - sent[i] for r in received for i in r]
    if any(len(r) != sizes.latency_events for r in received):
        raise DataCheckError("a subscriber on B missed events appended on A")
    report.measurements.append(
        Measurement(
            f"A -> B delivery, {sizes.rate:.0f} events/s, {sizes.subscribers} subscribers on B "
            "(ms from the append's ack)",
            len(from_ack),
            time.perf_counter() - start,
            tuple(max(0.0, x) * 1000 for x in from_ack),
        )
    )
    ordered = sorted(from_send)
    report.notes.append(
        "A -> B delivery from the append's start: "
        f"p50 {ordered[len(ordered) // 2] * 1000:.1f} ms, "
        f"p99 {ordered[int(len(ordered) * 0.99) - 1] * 1000:.1f} ms; "
        f"{sum(x < 0 for x in from_ack)} receipts came before the writer saw its ack"
    )
    report.checks.append(
        f"each of the {sizes.subscribers} subscribers on B received all "
        f"{sizes.latency_events} events appended on A"
    )


# The run ---------------------------------------------------------------------------------


async def run(options: Options) -> Report:
    sizes = QUICK if options.quick else FULL
    report = Report("postgres", parameters={"sizes": sizes.__dict__})
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
        workdir = Path(tmp)
        async with _postgres_server() as admin:
            engine_db = await _database(admin, "bench_engine")
            adk_db = await _database(admin, "bench_adk")
            async with Sidecar(workdir, "sqlite", check_health=True) as lite:
                await _bench_engine("SQLite sidecar", lite, sizes, report, "lite")
                await _bench_context("SQLite sidecar", lite, sizes, report)
            async with DbSidecar(workdir, "pg-a", engine_db) as a:
                await _bench_engine("PostgreSQL sidecar", a, sizes, report, "pg")
                await _bench_context("PostgreSQL sidecar", a, sizes, report)
                async with DbSidecar(workdir, "pg-b", engine_db) as b:
                    await _bench_delivery(a, b, sizes, report)
            await _bench_adk(adk_db, sizes, report)
    given = bool(os.environ.get("CONTEXTENGINE_BENCH_POSTGRES"))
    where = "CONTEXTENGINE_BENCH_POSTGRES" if given else "a throw-away local cluster, fsync off"
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    report.notes.append(f"PostgreSQL: {where}; load average after the run {load}")
    return report
