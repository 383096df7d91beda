"""KeyedLocks: one lock per key, serialising that key's holders only, dropped once nobody holds
or awaits it (also after a failure or a cancelled wait)."""

from __future__ import annotations

import asyncio

import pytest

from contextengine.runtime.locks import KeyedLocks

pytestmark = pytest.mark.unit


async def test_a_key_is_serialised_and_other_keys_are_not() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    inside: dict[str, int] = {"a": 0, "b": 0}
    most: dict[str, int] = {"a": 0, "b": 0}
    release = asyncio.Event()

    async def critical(key: str) -> None:
        async with locks.hold(key):
            inside[key] += 1
            most[key] = max(most[key], inside[key])
            await release.wait()
            inside[key] -= 1

    tasks = [asyncio.create_task(critical(key)) for key in ("a", "a", "a", "b")]
    await asyncio.sleep(0)
    assert inside == {"a": 1, "b": 1}  # "b" does not wait for "a"
    assert locks.locked("a")
    assert locks.locked("b")
    assert len(locks) == 2
    release.set()
    await asyncio.gather(*tasks)
    assert most == {"a": 1, "b": 1}
    assert len(locks) == 0
    assert not locks.locked("a")


async def test_the_lock_is_dropped_when_its_holder_fails() -> None:
    locks: KeyedLocks[str] = KeyedLocks()

    async def fail() -> None:
        async with locks.hold("a"):
            assert len(locks) == 1
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await fail()
    assert len(locks) == 0


async def test_a_cancelled_waiter_leaves_no_lock_behind() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    holding = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("a"):
            holding.set()
            await release.wait()

    async def waiter() -> None:
        async with locks.hold("a"):
            pytest.fail("the waiter was cancelled before it got the lock")

    first = asyncio.create_task(holder())
    await holding.wait()
    waiting = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert len(locks) == 1  # the holder still has it
    release.set()
    await first
    assert len(locks) == 0


async def test_a_released_key_is_not_locked_and_can_be_held_again() -> None:
    locks: KeyedLocks[tuple[str, int]] = KeyedLocks()
    for _ in range(3):
        async with locks.hold(("s", 1)):
            assert locks.locked(("s", 1))
        assert not locks.locked(("s", 1))
    assert len(locks) == 0
