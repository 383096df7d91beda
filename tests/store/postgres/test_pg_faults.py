"""Faults of concurrent commits on PostgreSQL (issue #32), with real ``contextengine serve``
processes at their default log level.

Readers pass no position whose transaction may still commit, so a transaction left open delays
every sidecar's subscribers. These tests check that the delay is never a loss, a repeat or a
reordering, that it is bounded where the store can bound it, and that it is logged and
exported; and that contention is not an outage:

* kill -9 of a sidecar while one of its transactions holds a position open: PostgreSQL rolls it
  back at once, the other sidecar's subscribers get everything, once, in order;
* a sidecar stopped (SIGSTOP) in the middle of a transaction: the others' subscribers wait at
  most the store's ``idle_in_transaction_session_timeout``, then get everything; the stopped
  sidecar, resumed, serves again;
* a foreign transaction open for 10 s: subscribers wait for it, the wait shows in
  ``contextengine_store_delivery_held_seconds`` and in a WARNING line naming it, then everything
  comes once, in order;
* a foreign transaction holding a lock the writers need for 7 s: their calls fail with
  UNAVAILABLE / STORAGE_BUSY (cause ``lock_timeout``), never STORAGE_UNAVAILABLE, the health
  stays SERVING all along, ``contextengine_store_busy_total`` counts them, and every write
  retried afterwards succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import grpc
import pytest
from bench import free_port

from contextengine.client import ContextEngineClient
from tests.observability.helpers import scrape, value
from tests.store.postgres.sidecars import APP, Received, Writer, client, sidecars, subscribe, until
from tests.store.postgres.test_faults import SESSIONS, _check_sessions, _everything
from tests.support.sidecar import SERVING, Sidecar

pytestmark = [pytest.mark.scaling, pytest.mark.timeout(120)]


async def _open_transactions(dsn: str, sidecar: Sidecar) -> int:
    """How many of the sidecar's connections are in a transaction that holds a transaction id
    and waits for the sidecar (``application_name`` ends with its pid)."""
    conn = await asyncpg.connect(dsn)
    try:
        found = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1"
            " AND state = 'idle in transaction' AND backend_xid IS NOT NULL",
            f"contextengine % {sidecar.pid}",
        )
    finally:
        await conn.close()
    return int(found)


async def _stop_in_a_transaction(dsn: str, sidecar: Sidecar) -> None:
    """Stops the sidecar (SIGSTOP) at a moment when one of its transactions holds a position
    open (it is appending all the time: tries until one does)."""
    for _ in range(500):
        os.kill(sidecar.pid, signal.SIGSTOP)
        await asyncio.sleep(0.05)  # the statement in progress, if any, finishes
        if await _open_transactions(dsn, sidecar):
            return
        os.kill(sidecar.pid, signal.SIGCONT)
        await asyncio.sleep(0.01)
    raise AssertionError("the sidecar never had a transaction open when stopped")


@contextlib.asynccontextmanager
async def _followed(ca: ContextEngineClient, cb: ContextEngineClient) -> AsyncIterator[Received]:
    """The sessions made through A, and an app subscriber on B, caught up, until the end."""
    for session in SESSIONS:
        await ca.create_session(APP, "u", session)
    on_b = Received()
    follow_b = asyncio.create_task(subscribe(cb, on_b))
    try:
        await until(on_b.caught_up.is_set)
        yield on_b
    finally:
        follow_b.cancel()
        await asyncio.gather(follow_b, return_exceptions=True)


async def _received_the_log(cb: ContextEngineClient, on_b: Received) -> None:
    """B's subscriber got the whole log (a new subscriber's replay): once, in order."""
    reference = await _everything(cb)
    await until(lambda: len(on_b.events) == len(reference.events), what="B's subscriber")
    assert on_b.ids() == reference.ids(), "once, in order, nothing missed"


def _writers(targets: dict[str, object], count: int = 3) -> list[Writer]:
    return [
        Writer(target, "u", session, f"{name}-{session}")  # type: ignore[arg-type]
        for session in SESSIONS[:count]
        for name, target in targets.items()
    ]


async def test_kill_9_of_a_sidecar_holding_a_position_open(
    tmp_path: Path, postgres_dsn: str
) -> None:
    async with (
        sidecars(tmp_path, postgres_dsn) as (a, b),
        client(a) as ca,
        client(b) as cb,
        _followed(ca, cb) as on_b,
    ):
        writers = _writers({"a": ca, "b": cb})
        on_b_writers = [w for w in writers if w.prefix[0] == "b"]
        runs = [asyncio.create_task(w.write(400, pause=0.002)) for w in writers]
        try:
            await until(lambda: len(on_b.events) >= 30, what="load before the kill")
            await _stop_in_a_transaction(postgres_dsn, a)
            acknowledged_b = sum(len(w.acknowledged) for w in on_b_writers)
            await a.kill()
            # B goes on; what it acknowledges after the kill reaches its subscriber at once:
            # PostgreSQL ended the killed sidecar's transaction with its connection.
            await until(
                lambda: sum(len(w.acknowledged) for w in on_b_writers) > acknowledged_b + 30,
                what="B's writers after the kill",
            )
            latest = {w.acknowledged[-1] for w in on_b_writers}
            await until(
                lambda: latest <= set(on_b.ids()),
                seconds=4,
                what="B's latest acknowledged events delivered (not held by A's transaction)",
            )
            results = await asyncio.gather(*runs, return_exceptions=True)
        finally:
            for run in runs:
                run.cancel()
        for writer, result in zip(writers, results, strict=True):
            if writer in on_b_writers:
                assert result is None, result
        assert await b.health() == SERVING
        await _received_the_log(cb, on_b)
        await _check_sessions(cb, writers)


async def test_a_stopped_sidecar_holds_delivery_back_at_most_its_idle_timeout(
    tmp_path: Path, postgres_dsn: str
) -> None:
    limit = 2.0
    flags = ("--postgres-idle-tx-timeout-seconds", str(limit))
    async with (
        sidecars(tmp_path, postgres_dsn, args={"a": flags, "b": flags}) as (a, b),
        client(a) as ca,
        client(b) as cb,
        _followed(ca, cb) as on_b,
    ):
        a_pid = a.pid
        a_writer = Writer(ca, "u", "k0", "a-k0")
        run_a = asyncio.create_task(a_writer.write(10_000, pause=0.002))
        try:
            await until(lambda: len(on_b.events) >= 20, what="A's load")
            await _stop_in_a_transaction(postgres_dsn, a)
            b_writer = Writer(cb, "u", "k1", "b-k1")
            await b_writer.write(10)
            acked = time.monotonic()
            await until(lambda: "b-k1-9" in on_b.ids(), seconds=limit + 6, what="B's events, later")
            waited = time.monotonic() - acked
            assert waited > limit / 2, "delivered while A's transaction was open"
            assert waited < limit + 1.5, "not ended by the idle-in-transaction timeout"
            os.kill(a.pid, signal.SIGCONT)
            # A's call in progress lost its connection: a clear status, never INTERNAL.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(run_a, 30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(a.pid, signal.SIGCONT)
            run_a.cancel()
        for failure in a_writer.failures:
            assert failure.code == grpc.StatusCode.UNAVAILABLE, failure
            assert failure.reason in ("STORAGE_BUSY", "STORAGE_UNAVAILABLE"), failure
        async with asyncio.timeout(15):
            while await a.health() != SERVING:  # noqa: ASYNC110 - asks the sidecar
                await asyncio.sleep(0.1)
        resumed = Writer(ca, "u", "k2", "a-again")
        await resumed.write(5, retry=True)
        await _received_the_log(cb, on_b)
        await _check_sessions(cb, [a_writer, b_writer, resumed])
    line = next(x for x in b.log().splitlines() if "wait for an older transaction" in x)
    assert f" {a_pid}'" in line, line
    assert "idle in transaction" in line, line


@contextlib.asynccontextmanager
async def _foreign(dsn: str, name: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of another application (``application_name`` ``name``)."""
    conn = await asyncpg.connect(dsn, server_settings={"application_name": name})
    try:
        yield conn
    finally:
        await conn.close()


async def test_a_foreign_transaction_open_10_s_delays_delivery_logged_and_measured(
    tmp_path: Path, postgres_dsn: str
) -> None:
    ops = free_port()
    flags = {"b": ("--ops-listen", f"127.0.0.1:{ops}")}
    async with (
        sidecars(tmp_path, postgres_dsn, args=flags) as (a, b),
        client(a) as ca,
        client(b) as cb,
        _followed(ca, cb) as on_b,
    ):
        writers = _writers({"a": ca, "b": cb}, count=2)
        async with _foreign(postgres_dsn, "nightly-report") as conn:
            await conn.execute("BEGIN")
            await conn.fetchval("SELECT pg_current_xact_id()")  # it takes an id
            opened = time.monotonic()
            await asyncio.gather(*(w.write(10) for w in writers))
            held: list[float] = []
            while time.monotonic() - opened < 10:
                assert on_b.events == [], "delivered past a transaction in flight"
                samples = await scrape(ops)
                held.append(value(samples, "contextengine_store_delivery_held_seconds"))
                await asyncio.sleep(0.5)
            await conn.execute("COMMIT")
        assert max(held) > 7, held
        assert held == sorted(held)
        await until(lambda: len(on_b.events) == 40, what="delivery once it ended")
        await until(
            lambda: "held back by an older transaction are delivered" in b.log(),
            what="the log line saying it ended",
        )
        assert value(await scrape(ops), "contextengine_store_delivery_held_seconds") == 0
        await _received_the_log(cb, on_b)
        assert a.exit_status() is None
    line = next(x for x in b.log().splitlines() if "wait for an older transaction" in x)
    assert "application 'nightly-report'" in line, line
    assert "idle in transaction" in line, line


async def test_a_foreign_lock_is_busy_not_an_outage(tmp_path: Path, postgres_dsn: str) -> None:
    ops = free_port()
    async with (
        sidecars(
            tmp_path, postgres_dsn, ("a",), args={"a": ("--ops-listen", f"127.0.0.1:{ops}")}
        ) as (a,),
        client(a) as ca,
    ):
        sessions = [f"w{n}" for n in range(16)]
        for session in sessions:
            await ca.create_session(APP, "u", session)
        writers = [Writer(ca, "u", session, session) for session in sessions]
        health: list[int] = []
        async with _foreign(postgres_dsn, "maintenance") as conn:
            await conn.execute("BEGIN")
            # Every insert into the log waits for this lock (reads do not).
            await conn.execute("LOCK TABLE events IN EXCLUSIVE MODE")
            runs = [asyncio.create_task(w.write(3, retry=True)) for w in writers]
            deadline = time.monotonic() + 7
            while time.monotonic() < deadline:
                health.append(await a.health())
                await asyncio.sleep(0.1)
            await conn.execute("COMMIT")
        await asyncio.gather(*runs)
        assert set(health) == {SERVING}, "contention made the sidecar NOT_SERVING"
        failures = [f for w in writers for f in w.failures]
        assert failures, "no call waited for the lock"
        for failure in failures:
            assert failure.code == grpc.StatusCode.UNAVAILABLE, failure
            assert failure.reason == "STORAGE_BUSY", failure
            assert failure.metadata["cause"] in ("lock_timeout", "pool_timeout"), failure
        assert all(len(w.acknowledged) == 3 for w in writers)
        busy = value(await scrape(ops), "contextengine_store_busy_total", {"cause": "lock_timeout"})
        assert busy >= 1
        assert "is busy (lock_timeout" in a.log()
        assert "cannot be used" not in a.log()
