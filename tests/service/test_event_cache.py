"""The session event cache stays one event per sequence when callers top it up concurrently, and
follows a session's head from the commits where this process is the store's only writer."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path

import pytest

from contextengine.core.errors import ContextEngineError
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.store import EventFilter, SessionKey, StoredSession
from contextengine.store.memory import MemoryStore
from contextengine.store.postgres import PostgresStore
from contextengine.store.sqlite import SqliteStore
from contextengine.v1 import event_pb2

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "user", "s1")


def _event(number: int) -> event_pb2.Event:
    return event_pb2.Event(id=f"e{number}", author="user", invocation_id="i", timestamp=number)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_concurrent_top_ups_do_not_duplicate_events(kind: str, tmp_path: Path) -> None:
    store = MemoryStore() if kind == "memory" else SqliteStore(str(tmp_path / "ce.db"))
    await store.open()
    try:
        await store.create_session(KEY, {}, 1.0)
        cache = SessionEventCache(store)
        number = 0
        for _ in range(20):
            batch = [_event(number + i) for i in range(1, 6)]
            number += len(batch)
            await store.append_events(KEY, batch, None)
            logs = await asyncio.gather(*(cache.log(KEY) for _ in range(8)))
            for log in logs:
                assert log.last_sequence == number
            final = await cache.log(KEY)
            assert [event.sequence for event in final.events] == list(range(1, number + 1))
            assert len(final.items) == number
    finally:
        await store.close()


class CountingStore(MemoryStore):
    """Counts head reads; while ``overtakes`` lasts, ``change`` commits a change of the session
    right after its head is read, before it is returned (what another caller's commit does
    while a read is in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.head_reads = 0
        self.event_reads = 0
        self.overtakes = 0
        self.change = "append"

    async def list_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[event_pb2.Event], int]:
        self.event_reads += 1
        return await super().list_events(key, after_sequence, limit)

    async def get_session(self, key: SessionKey, flt: EventFilter) -> StoredSession:
        head = await super().get_session(key, flt)
        self.head_reads += 1
        if self.overtakes > 0:
            self.overtakes -= 1
            if self.change == "append":
                await self.append_events(key, [_event(100 + self.head_reads)], None)
            else:
                await self.delete_session(key)
        return head


async def _opened(*numbers: int) -> tuple[CountingStore, SessionEventCache]:
    """A counting store holding the session with the events ``numbers``, and a cache over it."""
    store = CountingStore()
    await store.open()
    await store.create_session(KEY, {}, 1.0)
    if numbers:
        await store.append_events(KEY, [_event(n) for n in numbers], None)
    return store, SessionEventCache(store)


async def test_a_sole_writer_store_is_asked_for_a_head_once() -> None:
    store, cache = await _opened(1)
    assert [e.sequence for e in (await cache.log(KEY)).events] == [1]
    for number in range(2, 6):
        await store.append_events(KEY, [_event(number)], None)
        log = await cache.log(KEY)
        assert [e.sequence for e in log.events] == list(range(1, number + 1))
        assert log.last_sequence == number
    assert store.head_reads == 1

    generation = log.generation
    await store.delete_session(KEY)
    with pytest.raises(ContextEngineError) as gone:
        await cache.log(KEY)
    assert gone.value.reason == "SESSION_NOT_FOUND"
    await store.create_session(KEY, {}, 2.0)
    await store.append_events(KEY, [_event(7)], None)
    again = await cache.log(KEY)
    assert [e.id for e in again.events] == ["e7"]
    assert again.generation != generation


async def test_a_dropped_session_is_freed_by_reference_counts_alone() -> None:
    # No reference cycle may hold a dropped session's log or token counter: the sidecar
    # freezes what survives full collections (process.gc_policy), so only reference counts free
    # what the cache held (a cycle would wait for the next thaw, up to an hour). The counter is
    # what made one (its callback held it).
    _store, cache = await _opened(1, 2, 3)
    log = await cache.log(KEY)
    log.counter.measure_contents([e.content for e in log.events])  # calls on_measured
    counter = weakref.ref(log.counter)
    del log
    gc.disable()
    try:
        cache.invalidate(KEY)
        assert counter() is None
    finally:
        gc.enable()
    await cache.close()


async def test_committed_events_join_a_followed_log_without_being_read_back() -> None:
    store, cache = await _opened(1)
    await cache.log(KEY)
    reads = store.event_reads
    for number in range(2, 12, 2):
        await store.append_events(KEY, [_event(number), _event(number + 1)], None)
        log = await cache.log(KEY)
        assert len(log.items) == len(log.events) == number + 1
    assert store.event_reads == reads  # nothing read back
    stored, _ = await store.list_events(KEY, 0, 100)
    assert [e.SerializeToString(deterministic=True) for e in log.events] == [
        e.SerializeToString(deterministic=True) for e in stored
    ]


async def test_a_head_read_a_commit_overtook_is_not_followed() -> None:
    store, cache = await _opened(1)
    store.overtakes = 2
    # The first use caches the log (with what the first overtaking append committed: the events
    # are read after the head); the second finds nothing to read after the stale head it got.
    assert [e.id for e in (await cache.log(KEY)).events] == ["e1", "e101"]
    assert [e.id for e in (await cache.log(KEY)).events] == ["e1", "e101"]
    # Had that stale head been followed, e102 would never be read.
    assert [e.id for e in (await cache.log(KEY)).events] == ["e1", "e101", "e102"]
    assert [e.id for e in (await cache.log(KEY)).events] == ["e1", "e101", "e102"]
    assert store.head_reads == 3  # read again until a read was not overtaken, then followed


async def test_a_session_deleted_while_its_head_is_read_is_not_followed() -> None:
    store, cache = await _opened()
    store.change, store.overtakes = "delete", 1
    await cache.log(KEY)  # the session as it was when read
    with pytest.raises(ContextEngineError) as gone:
        await cache.log(KEY)
    assert gone.value.reason == "SESSION_NOT_FOUND"


async def test_a_store_other_processes_write_is_asked_every_time(postgres_dsn: str) -> None:
    """PostgreSQL: another sidecar's append is seen at once, not when its notification comes."""
    ours, theirs = PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)
    await ours.open()
    await theirs.open()
    try:
        assert not ours.sole_writer
        await ours.create_session(KEY, {}, 1.0)
        cache = SessionEventCache(ours)
        assert (await cache.log(KEY)).last_sequence == 0
        await theirs.append_events(KEY, [_event(1)], None)
        assert [e.id for e in (await cache.log(KEY)).events] == ["e1"]
    finally:
        await ours.close()
        await theirs.close()
