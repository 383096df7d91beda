"""The PostgreSQL store under concurrent writers, beside google-adk's ``DatabaseSessionService``
and pgbench on the same server, with SQLite for reference (issue #32).

``python -m bench postgres``, in one run, on one machine, on a durable cluster (``fsync=on``,
``synchronous_commit=on``; ``bench.pg_cluster``), at each simulated commit latency (``commit_delay``
0, 2 and 5 ms with ``commit_siblings=0``, set on the cluster between blocks):

* **Appends**: 1, 2 and 4 sidecars (``contextengine serve``) on one database, 16 and 32 writers
  spread over them, each appending one event per call to a session of its own, of a user of its
  own (as ADK's runner does for many users; the workload sets a ``user:`` key every other turn);
  16 writers appending batches of 10 (``AppendEvents``); one writer alone. The sidecar counts
  take turns, three rounds, the median reported (the spread in the notes). One more row per
  latency: 2 sidecars x 32 writers all of one user, whose state row every other event changes
  (one row every writer changes: those appends go one transaction at a time, by ADK's semantics).
* **google-adk 2.13's ``DatabaseSessionService``** (SQLAlchemy, ``postgresql+asyncpg://``) on the
  same server (its own database), in-process, 16 and 32 concurrent ``append_event`` callers on
  sessions of their own, of users of their own: the ratios' reference.
* **pgbench**, 16 and 32 clients committing one 300-byte row per transaction: what the database
  itself does at that commit latency.
* **Cross-sidecar delivery**: one sidecar appends 200 events/s, 10 subscribers on another receive
  them; latency from the append's acknowledgement to the receipt, p50/p99.
* **BuildContext at 10,000 events** on SQLite and on PostgreSQL (at 0 ms), and SQLite's appends
  (unchanged by this issue: the reference on the same machine and hour).

The targets of issue #32 are printed at the end (never asserted), the load average with every
block. The server in ``CONTEXTENGINE_BENCH_POSTGRES`` (a superuser's ``postgresql://`` URL on a
durable server) is used instead of a throw-away cluster when set. Every acknowledged event is
checked in the log afterwards (each once, sequences without gaps).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import (
    Ceiling,
    DataCheckError,
    Measurement,
    Options,
    Report,
    Target,
    load_average,
    pg_cluster,
)
from bench.append import to_adk, to_proto, workload
from bench.sidecar import Sidecar
from contextengine.client import ContextEngineClient
from contextengine.v1 import event_pb2

APP = "bench-pg"
USER = "user-1"

#: issue #32's figures before it (one 2-core machine, 0 ms, 16 writers): 1 and 2 sidecars
BEFORE_0MS_16 = {1: 804.0, 2: 739.0}


@dataclass(frozen=True)
class Sizes:
    #: commit latencies simulated, in microseconds (``commit_delay``)
    delays_us: tuple[int, ...]
    #: sidecars on the database
    sidecars: tuple[int, ...]
    #: concurrent single-event writers
    writers: tuple[int, ...]
    #: appends per writer, per run
    per_writer: int
    #: appends of one writer alone
    sequential: int
    #: writers of batches, events per batch, batches per writer
    batch_writers: int
    batch: int
    batches_per_writer: int
    #: seconds of each pgbench run
    pgbench_seconds: float
    context_events: int
    context_calls: int
    latency_events: int
    subscribers: int
    rate: float
    #: measurements of each sidecar count, taking turns (the median is reported)
    rounds: int = 3
    #: the SQLite reference: 16 clients, this many appends each (and batches)
    clients: int = 16
    per_client: int = 60
    batches_per_client: int = 15


FULL = Sizes(
    delays_us=(0, 2000, 5000),
    sidecars=(1, 2, 4),
    writers=(16, 32),
    per_writer=80,
    sequential=200,
    batch_writers=16,
    batch=10,
    batches_per_writer=15,
    pgbench_seconds=4.0,
    context_events=10_000,
    context_calls=20,
    latency_events=400,
    subscribers=10,
    rate=200.0,
)
QUICK = Sizes(
    delays_us=(0, 5000),
    sidecars=(1, 2),
    writers=(16, 32),
    per_writer=15,
    sequential=40,
    batch_writers=16,
    batch=10,
    batches_per_writer=3,
    pgbench_seconds=1.0,
    context_events=2_000,
    context_calls=5,
    latency_events=80,
    subscribers=10,
    rate=200.0,
    per_client=15,
    batches_per_client=5,
    rounds=1,
)


class DbSidecar(Sidecar):
    """``bench.sidecar.Sidecar`` on a given ``--db`` (a PostgreSQL URL)."""

    def __init__(self, workdir: Path, name: str, db: str) -> None:
        super().__init__(workdir, name, database=db, check_health=True)


@contextlib.asynccontextmanager
async def _sidecars(workdir: Path, db: str, tag: str, count: int) -> AsyncIterator[list[Sidecar]]:
    """``count`` sidecars on ``db``, started together (their migrations race), stopped after."""
    async with contextlib.AsyncExitStack() as stack:
        started: list[Sidecar] = [DbSidecar(workdir, f"{tag}-{n}", db) for n in range(count)]
        await asyncio.gather(*(sidecar.start() for sidecar in started))
        for sidecar in started:
            stack.push_async_callback(sidecar.stop)
        yield started


def _cpu(sidecars: Sequence[Sidecar]) -> float:
    return sum(sidecar.cpu_seconds() or 0.0 for sidecar in sidecars)


def _load() -> str:
    return load_average(all_three=True)


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


def _user(n: int, own_users: bool) -> str:
    """The user of writer ``n``'s session: its own, or the one user of every writer."""
    return f"{USER}-{n}" if own_users else USER


async def _concurrent(
    targets: Sequence[ContextEngineClient],
    per_client: int,
    tag: str,
    batch: int,
    *,
    own_users: bool = False,
) -> list[float]:
    """Each client appends to its own session: ``per_client`` calls of ``batch`` events.
    ``own_users``: each session of a user of its own (else all of one user: the workload's
    ``user:`` key, set every other turn, is then one row every writer changes)."""
    latencies: list[float] = []

    async def one(n: int, client: ContextEngineClient) -> None:
        session = f"{tag}-c{n}"
        user = _user(n, own_users)
        await client.create_session(APP, user, session)
        specs = workload(session, per_client * batch)
        for i in range(per_client):
            events = [to_proto(s) for s in specs[i * batch : (i + 1) * batch]]
            started = time.perf_counter()
            if batch == 1:
                await client.append_event(APP, user, session, events[0])
            else:
                await client.append_events(APP, user, session, events)
            latencies.append(_ms_since(started))

    await asyncio.gather(*(one(n, c) for n, c in enumerate(targets)))
    return latencies


async def _check(
    client: ContextEngineClient, session: str, expected: int, user: str = USER
) -> None:
    log = [e async for e in client.list_events(APP, user, session)]
    if [e.sequence for e in log] != list(range(1, expected + 1)):
        raise DataCheckError(f"{session}: {len(log)} events, expected 1..{expected}")
    if len({e.id for e in log}) != expected:
        raise DataCheckError(f"{session}: an event is recorded twice")


async def _writers(
    name: str,
    db: str,
    sidecars: Sequence[Sidecar],
    writers: int,
    calls: int,
    batch: int,
    tag: str,
    baseline: float | None,
    waits: dict[str, str],
    *,
    own_users: bool = True,
) -> Measurement:
    """``writers`` clients spread over ``sidecars`` (on ``db``), each appending ``calls`` times
    ``batch`` events to a session of its own (of a user of its own unless ``own_users`` is
    False), after a checkpoint; checked afterwards. What the sidecars' connections waited for is
    in ``waits``."""
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                ContextEngineClient(sidecars[n % len(sidecars)].target, attempts=1)
            )
            for n in range(writers)
        ]
        await _concurrent(clients, 3, f"{tag}-warm", 1, own_users=own_users)
        await pg_cluster.checkpoint(db)
        cpu = _cpu(sidecars)
        own = time.process_time()
        async with pg_cluster.Waits(db) as waited:
            started = time.perf_counter()
            latencies = await _concurrent(clients, calls, tag, batch, own_users=own_users)
            seconds = time.perf_counter() - started
        waits[name] = waited.summary()
        measured = Measurement(
            name,
            writers * calls * batch,
            seconds,
            tuple(latencies),
            client_cpu_seconds=time.process_time() - own,
            server_cpu_seconds=_cpu(sidecars) - cpu,
            baseline_events_per_second=baseline,
        )
        for n in range(writers):
            await _check(clients[n], f"{tag}-c{n}", calls * batch, _user(n, own_users))
    return measured


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


async def _adk_writers(dsn: str, writers: int, calls: int, tag: str) -> Measurement:
    """google-adk's ``DatabaseSessionService`` (its defaults), ``writers`` concurrent callers of
    ``append_event`` on sessions of their own (each of a user of its own), ``calls`` each."""
    from google.adk.sessions.database_session_service import DatabaseSessionService

    service = DatabaseSessionService(dsn.replace("postgresql://", "postgresql+asyncpg://", 1))
    try:
        sessions = [
            await service.create_session(
                app_name=APP, user_id=_user(n, True), session_id=f"{tag}-{n}"
            )
            for n in range(writers)
        ]
        for session in sessions:  # warm: the pool's connections, the statements
            await service.append_event(session, to_adk(workload(f"{tag}-w", 1)[0]))
        latencies: list[float] = []

        async def one(n: int) -> None:
            for spec in workload(f"{tag}-{n}", calls):
                t0 = time.perf_counter()
                await service.append_event(sessions[n], to_adk(spec))
                latencies.append(_ms_since(t0))

        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(writers)))
        seconds = time.perf_counter() - started
        for n in range(writers):
            stored = await service.get_session(
                app_name=APP, user_id=_user(n, True), session_id=f"{tag}-{n}"
            )
            if stored is None or len(stored.events) != calls + 1:
                raise DataCheckError(f"ADK's DatabaseSessionService lost events of {tag}-{n}")
    finally:
        await service.close()
    return Measurement(
        f"ADK DatabaseSessionService, {writers} writers", writers * calls, seconds, tuple(latencies)
    )


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


async def _bench_delivery(
    a: Sidecar, b: Sidecar, sizes: Sizes, report: Report, prefix: str
) -> None:
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
            f"{prefix}: A -> B delivery, {sizes.rate:.0f} events/s, {sizes.subscribers} "
            "subscribers on B "
            "(ms from the append's ack)",
            len(from_ack),
            time.perf_counter() - start,
            tuple(max(0.0, x) * 1000 for x in from_ack),
        )
    )
    ordered = sorted(from_send)
    report.notes.append(
        f"{prefix}: A -> B delivery from the append's start: "
        f"p50 {ordered[len(ordered) // 2] * 1000:.1f} ms, "
        f"p99 {ordered[int(len(ordered) * 0.99) - 1] * 1000:.1f} ms; "
        f"{sum(x < 0 for x in from_ack)} receipts came before the writer saw its ack"
    )
    report.checks.append(
        f"each of the {sizes.subscribers} subscribers on B received all "
        f"{sizes.latency_events} events appended on A"
    )


# The run ---------------------------------------------------------------------------------


@dataclass
class _Block:
    """One commit latency's figures, for the targets."""

    delay_ms: float
    adk: dict[int, float]
    ours: dict[tuple[int, int], float]


def _label(count: int) -> str:
    return f"{count} sidecar" if count == 1 else f"{count} sidecars"


async def _block(
    cluster: pg_cluster.Cluster,
    workdir: Path,
    delay_us: int,
    sizes: Sizes,
    report: Report,
) -> _Block:
    settings = await pg_cluster.set_commit_delay(cluster.admin, delay_us)
    ms = delay_us / 1000
    prefix = f"{ms:g} ms"
    report.notes.append(
        f"{prefix} block: server settings {settings}; load average at its start {_load()}"
    )
    block = _Block(ms, {}, {})
    adk_db = await pg_cluster.database(cluster.admin, f"bench_adk_{delay_us}")
    for writers in sizes.writers:
        await pg_cluster.checkpoint(cluster.admin)
        tps = await pg_cluster.pgbench_inserts(cluster, writers, sizes.pgbench_seconds)
        if tps is not None:
            report.measurements.append(
                Measurement(
                    f"{prefix}: pgbench, {writers} clients, 1-row INSERT per transaction",
                    round(tps * sizes.pgbench_seconds),
                    sizes.pgbench_seconds,
                )
            )
        await pg_cluster.checkpoint(cluster.admin)
        measured = await _adk_writers(adk_db, writers, sizes.per_writer, f"adk-{writers}")
        block.adk[writers] = measured.events_per_second
        report.measurements.append(
            Measurement(
                f"{prefix}: {measured.name}",
                measured.events,
                measured.seconds,
                measured.latencies_ms,
            )
        )
    async with contextlib.AsyncExitStack() as stack:
        # Every sidecar count at once, each on a database of its own; the counts take turns,
        # round after round, so that the machine's other load falls on all of them alike.
        sets: dict[int, list[Sidecar]] = {}
        dbs: dict[int, str] = {}
        for count in sizes.sidecars:
            dbs[count] = await pg_cluster.database(cluster.admin, f"bench_{delay_us}_{count}")
            sets[count] = await stack.enter_async_context(
                _sidecars(workdir, dbs[count], f"pg{delay_us}-{count}", count)
            )
        waits: dict[str, str] = {}
        async with ContextEngineClient(sets[1][0].target, attempts=1) as client:
            own = time.perf_counter()
            latencies = await _sequential(client, sizes.sequential, f"seq{delay_us}")
            report.measurements.append(
                Measurement(
                    f"{prefix}: PostgreSQL, 1 sidecar x 1 writer, AppendEvent",
                    sizes.sequential,
                    time.perf_counter() - own,
                    tuple(latencies),
                )
            )
        for writers, calls, batch in (
            *((w, sizes.per_writer, 1) for w in sizes.writers),
            (sizes.batch_writers, sizes.batches_per_writer, sizes.batch),
        ):
            label = "AppendEvent" if batch == 1 else f"AppendEvents of {batch}"
            runs: dict[int, list[Measurement]] = {count: [] for count in sizes.sidecars}
            for round_ in range(sizes.rounds):
                for count in sizes.sidecars:
                    runs[count].append(
                        await _writers(
                            f"{prefix}: PostgreSQL, {_label(count)} x {writers} writers, {label}",
                            dbs[count],
                            sets[count],
                            writers,
                            calls,
                            batch,
                            f"w{writers}-b{batch}-r{round_}",
                            block.adk.get(writers),
                            waits,
                        )
                    )
            for count, rounds in runs.items():
                median = sorted(rounds, key=lambda m: m.events_per_second)[len(rounds) // 2]
                report.measurements.append(median)
                if batch == 1:
                    block.ours[(count, writers)] = median.events_per_second
                rates = ", ".join(f"{m.events_per_second:,.0f}" for m in rounds)
                report.notes.append(
                    f"{median.name}: rounds {rates} events/s (median shown); the sidecars' "
                    f"statements (last round): {waits[median.name]}"
                )
        most = max(sizes.writers)
        shared = await _writers(
            f"{prefix}: PostgreSQL, 2 sidecars x {most} writers, AppendEvent, one user "
            "for all (its user: state every other event: one row all change)",
            dbs[2],
            sets[2],
            most,
            sizes.per_writer,
            1,
            f"shared-{most}",
            block.adk.get(most),
            waits,
            own_users=False,
        )
        report.measurements.append(shared)
        report.notes.append(f"{shared.name}: the sidecars' statements: {waits[shared.name]}")
        await _bench_delivery(sets[2][0], sets[2][1], sizes, report, prefix)
        if delay_us == 0:
            await _bench_context("PostgreSQL sidecar (0 ms)", sets[1][0], sizes, report)
    report.notes.append(f"{prefix} block: load average at its end {_load()}")
    return block


def _targets(blocks: Sequence[_Block], sizes: Sizes) -> list[Target]:
    """Issue #32's targets, from the blocks measured."""
    targets: list[Target] = []
    by_delay = {block.delay_ms: block for block in blocks}
    slow, fast = by_delay.get(5.0), by_delay.get(0.0)
    most = max(sizes.writers)
    for count in (1, 2):
        if slow is not None and (count, most) in slow.ours:
            targets.append(
                Target(
                    f"5 ms, {most} writers, {_label(count)}: events/s vs ADK's",
                    slow.ours[(count, most)] / slow.adk[most],
                    2.0,
                    "x",
                )
            )
            if fast is not None:
                targets.append(
                    Target(
                        f"5 ms vs 0 ms, {most} writers, {_label(count)}",
                        slow.ours[(count, most)] / fast.ours[(count, most)],
                        0.8,
                        "x",
                    )
                )
    targets.extend(
        Target(
            f"{block.delay_ms:g} ms, {writers} writers: 2 sidecars vs 1",
            block.ours[(2, writers)] / block.ours[(1, writers)],
            1.0,
            "x",
        )
        for block in blocks
        for writers in sizes.writers
        if (2, writers) in block.ours
    )
    if fast is not None:
        for count, before in BEFORE_0MS_16.items():
            if (count, 16) in fast.ours:
                targets.append(
                    Target(
                        f"0 ms, 16 writers, {_label(count)}: events/s vs before #32 "
                        f"({before:,.0f}, the issue's run)",
                        fast.ours[(count, 16)] / before,
                        1.0,
                        "x",
                    )
                )
    return targets


async def run(options: Options) -> Report:
    sizes = QUICK if options.quick else FULL
    report = Report("postgres", parameters={"sizes": sizes.__dict__})
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
        workdir = Path(tmp)
        report.notes.append(f"SQLite block: load average at its start {_load()}")
        async with Sidecar(workdir, "sqlite", check_health=True) as lite:
            await _bench_engine("SQLite sidecar", lite, sizes, report, "lite")
            await _bench_context("SQLite sidecar", lite, sizes, report)
        async with pg_cluster.cluster() as cluster:
            report.notes.append(f"PostgreSQL: {cluster.origin}")
            blocks = [
                await _block(cluster, workdir, delay, sizes, report) for delay in sizes.delays_us
            ]
    report.targets.extend(_targets(blocks, sizes))
    for measured in report.measurements:
        if "A -> B delivery" in measured.name:
            p99 = measured.percentile_ms(0.99)
            if p99 is not None:
                report.targets.append(Ceiling(f"{measured.name}: p99", p99, 50.0, "ms"))
    report.notes.append(f"load average after the run {_load()}")
    return report
