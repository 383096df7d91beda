"""``contextengine.client._timeouts.within``: the client's one time limit on Python 3.10+ (here
on the project's Python; `make lint` type-checks the 3.10 branch)."""

from __future__ import annotations

import asyncio

import pytest

from contextengine.client._timeouts import within

pytestmark = pytest.mark.unit


async def test_a_late_awaitable_is_cancelled_with_the_builtin_timeout_error() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await within(slow(), 0.01)
    assert started.is_set()
    assert cancelled.is_set()


async def test_no_limit_and_a_result_in_time() -> None:
    assert await within(asyncio.sleep(0, "now"), None) == "now"
    assert await within(asyncio.sleep(0.001, "soon"), 5.0) == "soon"
