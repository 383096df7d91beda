"""The session event cache stays one event per sequence when callers top it up concurrently."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from contextengine.runtime.event_cache import SessionEventCache
from contextengine.store import SessionKey
from contextengine.store.memory import MemoryStore
from contextengine.store.sqlite import SqliteStore
from contextengine.v1 import event_pb2

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
