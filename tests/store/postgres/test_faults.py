"""Faults of a two-sidecar deployment on one PostgreSQL database (issue #20, item 6).

* kill -9 one sidecar while both append and stream: the other keeps serving, nothing
  acknowledged is lost, and the killed one's subscribers resume on the other from their cursors
  (exactly once, in order, nothing missed).
* PostgreSQL restarted under load: calls fail with UNAVAILABLE (STORAGE_UNAVAILABLE), never
  INTERNAL; the sidecars reconnect by themselves and serve again; nothing acknowledged is lost;
  subscribers (the client resubscribing from its cursor) receive everything once, in order.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from contextengine.client import ContextEngineClient
from tests.pg_server import PostgresServer
from tests.store.postgres.sidecars import APP, Received, Writer, client, sidecars, subscribe, until
from tests.support.sidecar import SERVING, Sidecar

pytestmark = [pytest.mark.scaling, pytest.mark.timeout(120)]

SESSIONS = ("k0", "k1", "k2")


async def _everything(target: ContextEngineClient) -> Received:
    """The app's whole log as a new subscriber replays it (the reference)."""
    reference = Received()
    task = asyncio.create_task(subscribe(target, reference))
    try:
        await until(reference.caught_up.is_set, what="the reference replay")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return reference


async def _check_sessions(target: ContextEngineClient, writers: list[Writer]) -> None:
    """Contiguous sequences; every acknowledged event recorded exactly once."""
    recorded: list[str] = []
    for session in SESSIONS:
        log = [e async for e in target.list_events(APP, "u", session)]
        assert [e.sequence for e in log] == list(range(1, len(log) + 1)), session
        recorded.extend(e.id for e in log)
    assert len(recorded) == len(set(recorded))
    acknowledged = {i for w in writers for i in w.acknowledged}
    assert acknowledged <= set(recorded), "an acknowledged event was lost"
    in_doubt = {i for w in writers for i in w.in_doubt}
    assert set(recorded) <= acknowledged | in_doubt


async def test_kill_one_sidecar_while_both_append_and_stream(
    tmp_path: Path, postgres_dsn: str
) -> None:
    async with sidecars(tmp_path, postgres_dsn) as (a, b), client(a) as ca, client(b) as cb:
        for session in SESSIONS:
            await ca.create_session(APP, "u", session)
        on_a, on_b = Received(), Received()
        follow_a = asyncio.create_task(subscribe(ca, on_a, max_failures=1))
        follow_b = asyncio.create_task(subscribe(cb, on_b))
        await until(lambda: on_a.caught_up.is_set() and on_b.caught_up.is_set())
        writers = [
            Writer(target, "u", session, f"{name}-{session}")
            for session in SESSIONS
            for name, target in (("a", ca), ("b", cb))
        ]
        runs = [asyncio.create_task(w.write(60, pause=0.01)) for w in writers]
        await until(lambda: len(on_b.events) >= 60, what="load before the kill")
        await a.kill()
        # A's writers are cut off; A's subscriber's stream breaks.
        results = await asyncio.gather(*runs, return_exceptions=True)
        for writer, result in zip(writers, results, strict=True):
            if writer.prefix.startswith("b-"):
                assert result is None, result  # B kept serving
                assert len(writer.acknowledged) == 60
            else:
                assert result is None or isinstance(result, Exception)
        await asyncio.gather(follow_a, return_exceptions=True)
        assert await b.health() == SERVING
        # The killed sidecar's subscriber resumes on B from its last cursor.
        follow_a = asyncio.create_task(subscribe(cb, on_a, cursor=on_a.last_cursor))
        reference = await _everything(cb)
        try:
            total = len(reference.events)
            await until(lambda: len(on_a.events) == total, what="A's subscriber, resumed on B")
            await until(lambda: len(on_b.events) == total, what="B's subscriber")
        finally:
            for task in (follow_a, follow_b):
                task.cancel()
            await asyncio.gather(follow_a, follow_b, return_exceptions=True)
        assert on_a.ids() == reference.ids(), "A's subscriber: once, in order, nothing missed"
        assert on_b.ids() == reference.ids()
        await _check_sessions(cb, writers)


async def _serving(sidecar: Sidecar, seconds: float = 15.0) -> None:
    """Waits until the sidecar's health is SERVING again (its store's probe succeeded)."""
    async with asyncio.timeout(seconds):
        while await sidecar.health() != SERVING:  # noqa: ASYNC110 - asks the sidecar
            await asyncio.sleep(0.1)


def _restart(server: PostgresServer) -> None:
    """A clean restart (``pg_ctl stop -m fast``, then start on the same port and data)."""
    server.stop("fast")
    error = server.start_again()
    assert error is None, error


async def test_postgresql_restarted_under_load(
    tmp_path: Path, postgres_dsn: str, postgres_server: PostgresServer
) -> None:
    async with sidecars(tmp_path, postgres_dsn) as (a, b), client(a) as ca, client(b) as cb:
        for session in SESSIONS:
            await ca.create_session(APP, "u", session)
        followed = Received()
        follow = asyncio.create_task(subscribe(cb, followed, max_failures=1000))
        await until(followed.caught_up.is_set)
        writers = [
            Writer(target, "u", session, f"{name}-{session}")
            for session in SESSIONS
            for name, target in (("a", ca), ("b", cb))
        ]
        runs = [asyncio.create_task(w.write(50, pause=0.01, retry=True)) for w in writers]
        await until(lambda: len(followed.events) >= 30, what="load before the restart")
        await asyncio.wait_for(asyncio.to_thread(_restart, postgres_server), 60)
        await asyncio.gather(*runs)
        failures = [f for w in writers for f in w.failures]
        assert failures, "the restart was not noticed by any call"
        for failure in failures:
            assert failure.code == grpc.StatusCode.UNAVAILABLE, failure
            assert failure.reason in ("STORAGE_UNAVAILABLE", ""), failure
        for sidecar in (a, b):
            sidecar.check_alive("after the restart")
            await _serving(sidecar)
        reference = await _everything(cb)
        try:
            await until(
                lambda: len(followed.events) == len(reference.events),
                what="the subscriber after the restart",
            )
        finally:
            follow.cancel()
            await asyncio.gather(follow, return_exceptions=True)
        assert followed.ids() == reference.ids()
        await _check_sessions(cb, writers)
