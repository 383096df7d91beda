"""Sessions: per-session compaction state kept only while used or worth keeping, the lock it
guards, and the failure backoff (doubling per consecutive failure up to its maximum)."""

from __future__ import annotations

import asyncio

import pytest

from contextengine.compaction.sessions import Sessions
from contextengine.compaction.types import SessionStatus
from contextengine.store import SessionKey

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "user", "s1")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sessions(clock: Clock, backoff: float = 2.0, maximum: float = 30.0) -> Sessions:
    return Sessions(clock, backoff, maximum)


def test_state_with_nothing_to_keep_is_dropped_after_use() -> None:
    states = sessions(Clock())
    with states.using(KEY) as state:
        assert len(states) == 1
        assert states.get(KEY) is state
    assert len(states) == 0
    assert states.status(KEY) == SessionStatus(False, 0, 0, 0, "", 0.0)


def test_counters_and_sizes_keep_the_state() -> None:
    states = sessions(Clock())
    with states.using(KEY) as state:
        state.attempts += 1
    assert len(states) == 1
    other = SessionKey("app", "user", "s2")
    with states.using(other) as state:
        state.sizes[1] = 10
    assert len(states) == 2


def test_the_backoff_doubles_up_to_its_maximum_and_a_success_ends_it() -> None:
    clock = Clock()
    states = sessions(clock)
    with states.using(KEY) as state:
        state.attempts += 1
        delays = [states.failed(state, f"error {n}") for n in range(6)]
        assert delays == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
        assert states.backing_off(state)
        status = states.status(KEY)
        assert (status.failures, status.last_error, status.retry_after) == (6, "error 5", 130.0)
        clock.now = 130.0
        assert not states.backing_off(state)
        assert states.status(KEY).retry_after == 0.0
        states.failed(state, "again")
        assert states.status(KEY).retry_after == 130.0 + 30.0
        states.succeeded(state)
        assert not states.backing_off(state)
        status = states.status(KEY)
        assert (status.summaries, status.failures, status.last_error) == (1, 7, "")
        assert states.failed(state, "after a success") == 2.0


def test_a_long_run_of_failures_does_not_overflow() -> None:
    states = sessions(Clock(), maximum=300.0)
    with states.using(KEY) as state:
        for _ in range(2000):
            delay = states.failed(state, "x")
        assert delay == 300.0


async def test_the_status_is_running_while_the_lock_is_held() -> None:
    states = sessions(Clock())
    with states.using(KEY):
        async with states.lock(KEY):
            assert states.status(KEY).running
        assert not states.status(KEY).running


async def test_a_state_whose_task_runs_is_kept_until_the_task_ends() -> None:
    states = sessions(Clock())
    release = asyncio.Event()

    async def background() -> None:
        await release.wait()

    with states.using(KEY) as state:
        task = state.task = asyncio.create_task(background())
        task.add_done_callback(lambda _: states.drop_if_disposable(KEY, state))
    assert len(states) == 1
    assert states.status(KEY).running
    assert states.running_tasks() == [task]
    release.set()
    await task
    await asyncio.sleep(0)  # the done callback
    assert len(states) == 0
