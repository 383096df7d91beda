"""The group's shared log (``broadcaster._Group``): the members of a group read one log of commits
instead of each holding its own buffer. Checked against a model that keeps a buffer per member
(what the broadcaster did before): the same batches, in the same order, the same buffered counts
and bytes, the same members ended as lagged, through random appends, reads, late joins, closes
and lags; and the log lets go of what every member has taken or left."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from contextengine.store import Change, LoggedEvent, MemoryStore, SessionKey
from contextengine.subscriptions.broadcaster import (
    Broadcaster,
    EndReason,
    Subscription,
    change_bytes,
    session_route,
)

from .helpers import message

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "u1", "s1")
GROUP = "everyone"


def everything(change: Change) -> bool:
    return True


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    opened = MemoryStore()
    await opened.open()
    await opened.create_session(KEY, {}, 1.0)
    yield opened
    await opened.close()


@pytest.fixture
async def broadcaster(store: MemoryStore) -> AsyncIterator[Broadcaster]:
    started = Broadcaster(store)
    started.start()
    yield started
    await started.shutdown(grace_seconds=0.1)


def ids(batch: list[Change] | None) -> list[str] | None:
    if batch is None:
        return None
    return [change.event.id for change in batch if isinstance(change, LoggedEvent)]


@dataclass
class Model:
    """One member as a buffer of its own: the rules of ``Subscription`` written out plainly."""

    capacity: int
    capacity_bytes: int | None
    batches: deque[list[Change]] = field(default_factory=deque)
    ended: EndReason | None = None

    @property
    def buffered(self) -> int:
        return sum(len(batch) for batch in self.batches)

    @property
    def buffered_bytes(self) -> int:
        if self.capacity_bytes is None:
            return 0
        return sum(change_bytes(change) for batch in self.batches for change in batch)

    def offer(self, batch: list[Change]) -> None:
        if self.ended is not None:
            return
        size = sum(change_bytes(change) for change in batch)
        if self.batches and (
            self.buffered + len(batch) > self.capacity
            or (
                self.capacity_bytes is not None and self.buffered_bytes + size > self.capacity_bytes
            )
        ):
            self.ended = EndReason.LAGGED
            self.batches.clear()
            return
        self.batches.append(batch)

    def poll(self) -> list[Change] | None:
        if self.ended is not None or not self.batches:
            return None
        return self.batches.popleft()


@pytest.mark.parametrize("seed", range(6))
async def test_the_shared_log_behaves_as_a_buffer_per_member(
    store: MemoryStore, broadcaster: Broadcaster, seed: int
) -> None:
    rng = random.Random(seed)
    members: list[tuple[Subscription, Model]] = []
    closed: list[tuple[Subscription, Model]] = []
    written = 0

    def join() -> None:
        capacity = rng.choice([2, 3, 5, 8, 1000])
        capacity_bytes = rng.choice([None, None, 400, 1500])
        subscription = broadcaster.subscribe(
            session_route(KEY),
            everything,
            capacity,
            capacity_bytes=capacity_bytes,
            group=GROUP,
        )
        members.append((subscription, Model(capacity, capacity_bytes)))

    for _ in range(3):
        join()
    for _ in range(300):
        action = rng.random()
        if action < 0.35:
            texts = [
                f"e{written + n}-" + "x" * rng.choice([1, 50, 300])
                for n in range(rng.randint(1, 3))
            ]
            written += len(texts)
            await store.append_events(KEY, [message(text, event_id=text) for text in texts], None)
            logged, _ = await store.list_logged_events(KEY, written - len(texts), 100)
            batch: list[Change] = list(logged)
            for _, model in members:
                model.offer(batch)
        elif action < 0.75 and members:
            subscription, model = rng.choice(members)
            assert ids(subscription.poll()) == ids(model.poll())
        elif action < 0.85:
            join()
        elif members:
            member = members.pop(rng.randrange(len(members)))
            member[0].close()
            closed.append(member)
        for subscription, model in members:
            assert subscription.ended is model.ended
            assert subscription.buffered == model.buffered
            assert subscription.buffered_bytes == model.buffered_bytes
        for subscription, _ in closed:
            assert subscription.buffered == 0
            assert subscription.poll() is None
    # The run went through lags (and, with seeds this many, every kind of step).
    assert broadcaster.lagged_total == sum(
        1 for _, model in members + closed if model.ended is EndReason.LAGGED
    )
    assert broadcaster.lagged_total > 0
    # Drained, the log holds nothing: every commit left it once every member had taken it.
    for subscription, model in members:
        while (taken := subscription.poll()) is not None:
            assert ids(taken) == ids(model.poll())
        assert model.poll() is None
    assert broadcaster.buffered_bytes() == 0
    for subscription, _ in members:
        subscription.close()
    assert broadcaster.active == 0


async def test_a_late_member_starts_at_the_next_commit(
    store: MemoryStore, broadcaster: Broadcaster
) -> None:
    early = broadcaster.subscribe(session_route(KEY), everything, 10, group=GROUP)
    await store.append_events(KEY, [message("a", event_id="a")], None)
    late = broadcaster.subscribe(session_route(KEY), everything, 10, group=GROUP)
    assert (early.buffered, late.buffered) == (1, 0)
    await store.append_events(KEY, [message("b", event_id="b")], None)
    assert ids(late.poll()) == ["b"]
    assert late.poll() is None
    first, second = early.poll(), early.poll()
    assert (ids(first), ids(second)) == (["a"], ["b"])


async def test_one_stalled_member_lags_alone_and_releases_the_log(
    store: MemoryStore, broadcaster: Broadcaster
) -> None:
    readers = [
        broadcaster.subscribe(session_route(KEY), everything, 4, capacity_bytes=10_000, group=GROUP)
        for _ in range(50)
    ]
    stalled = broadcaster.subscribe(
        session_route(KEY), everything, 4, capacity_bytes=10_000, group=GROUP
    )
    for n in range(6):
        await store.append_events(KEY, [message(f"e{n}", event_id=f"e{n}")], None)
        for reader in readers:
            assert ids(reader.poll()) == [f"e{n}"]
    assert stalled.ended is EndReason.LAGGED
    assert all(reader.ended is None for reader in readers)
    assert broadcaster.buffered_bytes() == 0
    assert broadcaster.active == 50
