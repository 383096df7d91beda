"""The PostgreSQL change feed ends when its store closes, however a cancellation meets it.

CI hung twice in a PostgreSQL store's ``close`` (a sidecar's shutdown, a test's teardown): on
Python 3.11 ``asyncio.wait_for`` returns the result instead of raising CancelledError when what
it waits for completes in the same turn as the cancellation, so a feed loop cancelled right as
its ``SELECT 1`` or table read answered went on, and ``close`` waited for it forever. These run
without a database: they drive the feed's own pieces in the turn where it went wrong.
"""

from __future__ import annotations

import asyncio

import pytest

from contextengine._compat import timeout
from contextengine.store.postgres._feed import ChangeFeed

pytestmark = pytest.mark.unit


class _OpenConnection:
    """Stands for the feed's reader connection: open, and never asked for anything else."""

    def is_closed(self) -> bool:
        return False

    def terminate(self) -> None:
        pass


def _feed() -> ChangeFeed:
    return ChangeFeed(
        dsn="postgresql://nobody@127.0.0.1:9/none",
        origin="test",
        deliver=lambda _changes: None,
        config_changed=lambda _change: None,
        report_problem=lambda _problem: None,
        report_held=lambda _seconds: None,
        server_settings={},
    )


async def test_a_cancellation_in_the_turn_a_read_answers_is_not_lost() -> None:
    feed = _feed()
    feed._reader = _OpenConnection()
    answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def query(_conn: object) -> int:
        return await answer

    read = asyncio.create_task(feed._read(query))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the read waits for its answer
    answer.set_result(7)
    read.cancel()  # in the same turn: the answer and the cancellation arrive together
    with pytest.raises(asyncio.CancelledError):
        await read


async def test_close_ends_a_task_that_lost_its_cancellation() -> None:
    feed = _feed()
    cancelled_once = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled_once.set()  # as a lost cancellation looks: the task goes on
        await asyncio.Event().wait()

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    feed._tasks = [task]
    closing = asyncio.create_task(feed.close())
    done, _ = await asyncio.wait((closing,), timeout=5)
    if not done:  # what happened before: close waited for the task forever
        closing.cancel()
        task.cancel()
    assert done, "close() did not end"
    assert cancelled_once.is_set()
    assert task.cancelled()


async def test_the_feed_loops_stop_once_closed() -> None:
    """Without a database: ``_work`` and the listener's ``keep_listening`` return once the feed
    is closed, whether or not a cancellation reaches them."""
    feed = _feed()
    await feed.close()
    async with timeout(5):
        await feed._work()
        await feed._listener.keep_listening()
