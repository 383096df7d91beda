"""The broadcaster over a real (in-memory) store: routing, bounded buffers, lagging, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from contextengine.core.errors import ContextEngineError
from contextengine.store import Change, LoggedEvent, MemoryStore, SessionDeleted, SessionKey
from contextengine.subscriptions.broadcaster import (
    Broadcaster,
    EndReason,
    SubscriptionEndedError,
    app_route,
    session_route,
    user_route,
)

from .helpers import message

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "u1", "s1")
SIBLING = SessionKey("app", "u1", "s2")
STRANGER = SessionKey("app", "u2", "s1")


def everything(change: Change) -> bool:
    return True


def events_only(change: Change) -> bool:
    return isinstance(change, LoggedEvent)


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    opened = MemoryStore()
    await opened.open()
    for key in (KEY, SIBLING, STRANGER):
        await opened.create_session(key, {}, 1.0)
    yield opened
    await opened.close()


@pytest.fixture
async def broadcaster(store: MemoryStore) -> AsyncIterator[Broadcaster]:
    started = Broadcaster(store)
    started.start()
    yield started
    await started.shutdown(grace_seconds=0.1)


async def append(store: MemoryStore, key: SessionKey, *texts: str) -> None:
    await store.append_events(key, [message(text, event_id=text) for text in texts], None)


def ids(batch: list[Change] | None) -> list[str]:
    assert batch is not None
    return [change.event.id for change in batch if isinstance(change, LoggedEvent)]


async def test_routes(store: MemoryStore, broadcaster: Broadcaster) -> None:
    by_session = broadcaster.subscribe(session_route(KEY), everything, 10)
    by_user = broadcaster.subscribe(user_route("app", "u1"), events_only, 10)
    by_app = broadcaster.subscribe(app_route("app"), events_only, 10)
    elsewhere = broadcaster.subscribe(app_route("other"), everything, 10)

    await append(store, KEY, "a")
    await append(store, SIBLING, "b")
    await append(store, STRANGER, "c")

    assert [ids(await by_session.next(1))] == [["a"]]
    assert [ids(await by_user.next(1)), ids(await by_user.next(1))] == [["a"], ["b"]]
    assert [ids(await by_app.next(1)) for _ in range(3)] == [["a"], ["b"], ["c"]]
    assert await elsewhere.next(0.01) is None
    assert by_session.buffered == by_user.buffered == by_app.buffered == 0


async def test_one_commit_is_one_batch_in_order(
    store: MemoryStore, broadcaster: Broadcaster
) -> None:
    subscription = broadcaster.subscribe(session_route(KEY), everything, 10)
    await append(store, KEY, "a", "b", "c")
    batch = await subscription.next(1)
    assert ids(batch) == ["a", "b", "c"]
    assert batch is not None
    positions = [change.position for change in batch if isinstance(change, LoggedEvent)]
    assert positions == sorted(positions)


async def test_accept_filters_and_last_seen(store: MemoryStore, broadcaster: Broadcaster) -> None:
    def only_b(change: Change) -> bool:
        return isinstance(change, LoggedEvent) and change.event.id == "b"

    subscription = broadcaster.subscribe(session_route(KEY), only_b, 10)
    await append(store, KEY, "a")
    await append(store, KEY, "b")
    await append(store, KEY, "c")
    assert ids(await subscription.next(1)) == ["b"]
    assert await subscription.next(0.01) is None
    assert subscription.last_seen is not None
    assert subscription.last_seen.event.id == "c"  # seen, though not accepted


async def test_next_times_out_and_wakes_up(store: MemoryStore, broadcaster: Broadcaster) -> None:
    subscription = broadcaster.subscribe(session_route(KEY), everything, 10)
    assert await subscription.next(0.01) is None
    waiting = asyncio.create_task(subscription.next(10))
    await asyncio.sleep(0)
    await append(store, KEY, "a")
    assert ids(await asyncio.wait_for(waiting, 1)) == ["a"]


async def test_a_full_buffer_ends_the_subscriber_as_lagged(
    store: MemoryStore, broadcaster: Broadcaster
) -> None:
    slow = broadcaster.subscribe(session_route(KEY), everything, 3)
    fast = broadcaster.subscribe(session_route(KEY), everything, 3)
    for n in range(5):
        await append(store, KEY, f"e{n}")
        assert ids(await fast.next(1)) == [f"e{n}"]

    assert slow.ended is EndReason.LAGGED
    assert slow.buffered == 0  # dropped at once
    assert fast.ended is None
    assert broadcaster.active == 1
    with pytest.raises(SubscriptionEndedError) as info:
        await slow.next(1)
    assert info.value.reason is EndReason.LAGGED


async def test_an_empty_buffer_takes_a_commit_of_any_size(
    store: MemoryStore, broadcaster: Broadcaster
) -> None:
    subscription = broadcaster.subscribe(session_route(KEY), everything, 2)
    await append(store, KEY, *[f"e{n}" for n in range(10)])
    assert len(ids(await subscription.next(1))) == 10
    await append(store, KEY, "x", "y")
    await append(store, KEY, "z")  # 2 waiting + 1 > 2
    assert subscription.ended is EndReason.LAGGED


async def test_deletions_are_routed(store: MemoryStore, broadcaster: Broadcaster) -> None:
    subscription = broadcaster.subscribe(session_route(KEY), everything, 10)
    await store.delete_session(KEY)
    assert await subscription.next(1) == [SessionDeleted(KEY)]


async def test_close_unregisters(store: MemoryStore, broadcaster: Broadcaster) -> None:
    subscriptions = [broadcaster.subscribe(session_route(KEY), everything, 10) for _ in range(3)]
    assert broadcaster.active == 3
    for subscription in subscriptions:
        subscription.close()
        subscription.close()
    assert broadcaster.active == 0
    await append(store, KEY, "a")  # nobody to tell
    assert all(s.buffered == 0 for s in subscriptions)


async def test_shutdown_ends_everyone_and_refuses_newcomers(store: MemoryStore) -> None:
    broadcaster = Broadcaster(store)
    broadcaster.start()
    subscription = broadcaster.subscribe(app_route("app"), everything, 10)
    waiting = asyncio.create_task(subscription.next(10))
    await asyncio.sleep(0)

    async def reader_lets_go() -> None:
        with pytest.raises(SubscriptionEndedError):
            await waiting
        subscription.close()

    releasing = asyncio.create_task(reader_lets_go())
    await broadcaster.shutdown(grace_seconds=1.0)
    await releasing
    assert subscription.ended is EndReason.SHUTDOWN
    assert broadcaster.active == 0
    with pytest.raises(ContextEngineError) as info:
        broadcaster.subscribe(app_route("app"), everything, 10)
    assert info.value.reason == "SHUTTING_DOWN"
    await append(store, KEY, "after")  # no longer listening


def test_capacity_must_be_positive() -> None:
    broadcaster = Broadcaster(MemoryStore())
    with pytest.raises(ValueError, match="capacity"):
        broadcaster.subscribe(app_route("app"), everything, 0)


async def test_a_failing_filter_ends_only_its_subscriber(
    store: MemoryStore, broadcaster: Broadcaster, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(change: Change) -> bool:
        raise RuntimeError("a bug")

    failing = broadcaster.subscribe(session_route(KEY), broken, 10)
    healthy = broadcaster.subscribe(session_route(KEY), everything, 10)
    await append(store, KEY, "a")
    assert failing.ended is EndReason.LAGGED  # resumes from the store: never a silent gap
    assert ids(await healthy.next(1)) == ["a"]
    assert "filter failed" in caplog.text


async def append_big(store: MemoryStore, *event_ids: str) -> None:
    """One commit of events of about 10 kB each."""
    await store.append_events(KEY, [message("x" * 10_000, event_id=i) for i in event_ids], None)


async def test_a_byte_budget_ends_a_subscriber_holding_too_many_bytes(
    store: MemoryStore, broadcaster: Broadcaster
) -> None:
    """The buffer is bounded in bytes as well as in changes (issue 13, item 7): a few large
    events end the subscription though far fewer than ``capacity`` changes are waiting."""
    sub = broadcaster.subscribe(session_route(KEY), everything, 1000, capacity_bytes=25_000)
    await append_big(store, "b1")
    await append_big(store, "b2")
    assert (sub.buffered, sub.ended) == (2, None)
    assert 20_000 < sub.buffered_bytes <= 25_000
    await append_big(store, "b3")  # would hold about 30 kB
    assert sub.ended is EndReason.LAGGED
    assert (sub.buffered, sub.buffered_bytes) == (0, 0)
    with pytest.raises(SubscriptionEndedError):
        await sub.next(1.0)


async def test_the_byte_budget_counts_what_is_taken(
    store: MemoryStore, broadcaster: Broadcaster
) -> None:
    sub = broadcaster.subscribe(session_route(KEY), everything, 1000, capacity_bytes=25_000)
    for n in range(10):  # a reader that keeps up is never cut off
        await append_big(store, f"b{n}")
        assert ids(await sub.next(1.0)) == [f"b{n}"]
        assert sub.buffered_bytes == 0
    # An empty buffer takes a commit of any size: one large append never ends a reader.
    await append_big(store, *(f"c{n}" for n in range(5)))
    assert sub.ended is None
    assert sub.buffered_bytes > 25_000
    assert len(ids(sub.poll())) == 5
    assert sub.buffered_bytes == 0
    sub.close()


async def test_a_byte_budget_must_be_positive(broadcaster: Broadcaster) -> None:
    with pytest.raises(ValueError, match="capacity_bytes"):
        broadcaster.subscribe(session_route(KEY), everything, 10, capacity_bytes=0)


async def test_every_group_counts_the_bytes_of_what_it_accepted(
    store: MemoryStore, broadcaster: Broadcaster
) -> None:
    """Several groups take the same commit: each counts only the changes it accepted."""
    first_only = broadcaster.subscribe(
        session_route(KEY),
        lambda change: isinstance(change, LoggedEvent) and change.event.id == "c0",
        10,
        capacity_bytes=10**6,
    )
    every = broadcaster.subscribe(session_route(KEY), everything, 10, capacity_bytes=10**6)
    watcher = broadcaster.subscribe(app_route("app"), events_only, 10, capacity_bytes=10**6)
    await append_big(store, "c0", "c1")
    one = first_only.buffered_bytes
    assert 10_000 < one < 11_000
    assert every.buffered_bytes == watcher.buffered_bytes
    assert 2 * one - 100 < every.buffered_bytes < 2 * one + 100
    for sub in (first_only, every, watcher):
        sub.close()
