"""Two real sidecars, and a third writer holding an earlier position open while they commit
later ones (issue #32): no subscriber skips, repeats or reorders an event.

The third writer (``tests/store/postgres/holder.py``, a process of its own appending through a
``PostgresStore`` as a sidecar does) writes one event and stops before its COMMIT. Meanwhile
sidecars A and B acknowledge twenty events, with later positions. Subscribers on both (app,
user and session scope, one of them started during the hold) receive none of them while the
holder's transaction is open: a reader never passes a position that may still commit. Then the
holder commits, rolls back, or is killed (SIGKILL: PostgreSQL rolls its transaction back when
its connection dies), and every subscriber receives the log as the table ends up holding it, in
position order, each event once. The hold is longer than a second, so both sidecars log who
holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from contextengine.store import LoggedEvent, SessionKey
from contextengine.store.postgres import PostgresStore
from tests.store.postgres.sidecars import APP, Received, Writer, client, sidecars, subscribe, until

pytestmark = [pytest.mark.scaling, pytest.mark.timeout(120)]

HELD = SessionKey(APP, "u1", "held")


@contextlib.asynccontextmanager
async def holder(dsn: str, event_id: str) -> AsyncIterator[subprocess.Popen[str]]:
    """The third writer, once its transaction holds its position (killed on the way out)."""
    process = _spawn_holder(dsn, event_id)
    try:
        assert process.stdout is not None
        async with asyncio.timeout(30):
            line = await asyncio.to_thread(process.stdout.readline)
        assert line.startswith("holding "), line
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        await asyncio.to_thread(process.wait, 30)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


def _spawn_holder(dsn: str, event_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.store.postgres.holder", dsn),
            *(HELD.app_name, HELD.user_id, HELD.session_id, event_id),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _check_order(received: Received, expected: list[str]) -> None:
    """Exactly ``expected``, in its order, with increasing cursors."""
    assert received.ids() == expected
    cursors = [int(e.cursor) for e in received.events]
    assert cursors == sorted(set(cursors))


@pytest.mark.parametrize("end", ["commit", "rollback", "kill"])
async def test_a_transaction_held_open_delays_subscribers_who_then_miss_nothing(
    tmp_path: Path, postgres_dsn: str, end: str
) -> None:
    async with sidecars(tmp_path, postgres_dsn) as (a, b), client(a) as ca, client(b) as cb:
        await ca.create_session(APP, HELD.user_id, HELD.session_id)
        await ca.create_session(APP, "u1", "sa")
        await cb.create_session(APP, "u2", "sb")
        app_a, app_b, user_b, session_b, late = (Received() for _ in range(5))
        follows = (app_a, app_b, user_b, session_b)
        tasks = [
            asyncio.create_task(subscribe(ca, app_a)),
            asyncio.create_task(subscribe(cb, app_b)),
            asyncio.create_task(subscribe(cb, user_b, user_id="u1")),
            asyncio.create_task(subscribe(cb, session_b, user_id="u1", session_id="sa")),
        ]
        try:
            for received in follows:
                await until(received.caught_up.is_set, what="caught up")
            async with holder(postgres_dsn, "held-1") as process:
                await asyncio.gather(
                    Writer(ca, "u1", "sa", "a").write(10), Writer(cb, "u2", "sb", "b").write(10)
                )
                # A subscriber that starts now replays no further than the others got.
                tasks.append(asyncio.create_task(subscribe(cb, late)))
                await until(late.caught_up.is_set, what="the late subscriber caught up")
                await asyncio.sleep(1.5)  # acknowledged, and held back
                for received in (*follows, late):
                    assert received.events == [], "delivered past a transaction in flight"
                if end == "kill":
                    process.kill()
                else:
                    assert process.stdin is not None
                    assert process.stdout is not None
                    process.stdin.write(f"{end}\n")
                    process.stdin.flush()
                    done = await asyncio.to_thread(process.stdout.readline)
                    assert done.strip() == ("committed" if end == "commit" else "rolled back")
                reader = PostgresStore(postgres_dsn, pool_size=1)
                await reader.open()
                try:
                    final = await _log(reader, 21 if end == "commit" else 20)
                    expected = [e.event.id for e in final]
                finally:
                    await reader.close()
            assert ("held-1" in expected) == (end == "commit")
            if end == "commit":
                assert expected[0] == "held-1"  # the earliest position: delivered first
            mine = [i for i in expected if i.startswith(("held", "a-"))]
            sa = [i for i in expected if i.startswith("a-")]
            wanted = [
                (app_a, expected),
                (app_b, expected),
                (late, expected),
                (user_b, mine),
                (session_b, sa),
            ]
            await until(
                lambda: all(len(r.events) >= len(ids) for r, ids in wanted), what="delivery"
            )
            await asyncio.sleep(0.3)  # nothing more, nothing twice
            for received, ids in wanted:
                _check_order(received, ids)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for sidecar in (a, b):
            log = sidecar.log()
            assert "wait for an older transaction still in flight" in log
            assert "idle in transaction" in log


async def _log(reader: PostgresStore, count: int) -> list[LoggedEvent]:
    """The app's log once ``count`` events are final, in position order."""
    async with asyncio.timeout(20):
        while True:
            found = await reader.list_events_after_position(APP, None, 0, 100)
            if len(found) >= count:
                return found
            await asyncio.sleep(0.02)
