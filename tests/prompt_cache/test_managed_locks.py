"""ManagedCaches' per-(session, agent) locks: they serialise the calls of one owner and are
dropped once nobody holds or awaits them (one lock per session and agent ever seen would grow
without bound)."""

from __future__ import annotations

import asyncio

import pytest

from contextengine.prompt_cache.gemini_caches import ManagedCaches

pytestmark = pytest.mark.unit


async def test_a_lock_serialises_its_owner_and_is_dropped_after_use() -> None:
    caches = ManagedCaches(None, clock=lambda: 0.0)
    order: list[str] = []
    release = asyncio.Event()

    async def hold(owner: str, name: str) -> None:
        async with caches.lock(owner):
            order.append(f"{name} in")
            await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(hold("a", "1"))
    second = asyncio.create_task(hold("a", "2"))
    other = asyncio.create_task(hold("b", "3"))
    await asyncio.sleep(0)
    assert order == ["1 in", "3 in"]  # another owner does not wait
    release.set()
    await asyncio.gather(first, second, other)
    assert order.index("1 out") < order.index("2 in")
    assert len(caches._locks) == 0


async def test_a_lock_is_dropped_when_its_holder_fails() -> None:
    caches = ManagedCaches(None, clock=lambda: 0.0)
    try:
        async with caches.lock("a"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert len(caches._locks) == 0
