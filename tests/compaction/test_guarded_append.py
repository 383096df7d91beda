"""The guarded append of a summary: appended only while its plan holds (no rewind or summary
since, the same session), retried when other appends move the log's end under the check."""

from __future__ import annotations

import pytest

from contextengine.compaction.guarded_append import append_summary, invalidated_since
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.store import MemoryStore, SessionKey
from contextengine.v1 import event_pb2
from tests.service.helpers import text_event

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "user", "s1")


#: a page of events and the session's last sequence (``EventStore.list_events``)
Page = tuple[list[event_pb2.Event], int]


class RacingStore(MemoryStore):
    """While ``races`` lasts, another event is appended right after each page of events is read,
    so the append the guard makes next finds the log's end moved (SEQUENCE_MISMATCH)."""

    def __init__(self) -> None:
        super().__init__()
        self.races = 0
        self.reads = 0

    async def list_events(self, key: SessionKey, after_sequence: int, limit: int) -> Page:
        page = await super().list_events(key, after_sequence, limit)
        self.reads += 1
        if self.races > 0:
            self.races -= 1
            racing = text_event("racing", event_id=f"racing-{self.reads}")
            await self.append_events(key, [racing], None)
        return page


def summary() -> event_pb2.Event:
    event = text_event("The summary.", author="agent")
    event.actions.compaction.start_timestamp = 1.0
    event.actions.compaction.end_timestamp = 2.0
    return event


def ids() -> str:
    return "new-id"


async def opened() -> tuple[RacingStore, SessionEventCache, float]:
    store = RacingStore()
    await store.open()
    created = (await store.create_session(KEY, {}, 5.0)).create_time
    turns = [text_event("one", event_id="e1"), text_event("two", event_id="e2")]
    await store.append_events(KEY, turns, None)
    return store, SessionEventCache(store), created


async def test_appended_when_the_plan_holds_and_retried_past_racing_appends() -> None:
    store, events, created = await opened()
    store.races = 2
    appended = await append_summary(store, events, KEY, summary(), 2, created=created, new_id=ids)
    assert appended is not None
    assert appended.sequence == 5  # after the two racing events
    assert appended.id == "new-id"
    assert store.reads == 3


async def test_discarded_after_a_summary_or_in_another_session() -> None:
    store, events, created = await opened()
    first = await append_summary(store, events, KEY, summary(), 2, created=created, new_id=ids)
    assert first is not None
    log = (await events.log(KEY)).events
    assert invalidated_since(log, 2) == first
    assert invalidated_since(log, 3) is None
    assert (
        await append_summary(store, events, KEY, summary(), 2, created=created, new_id=ids) is None
    )
    assert (
        await append_summary(store, events, KEY, summary(), 3, created=created + 1, new_id=ids)
        is None
    )


async def test_gives_up_when_the_log_keeps_moving() -> None:
    store, events, created = await opened()
    store.races = 100
    store.reads = 0
    assert (
        await append_summary(store, events, KEY, summary(), 2, created=created, new_id=ids) is None
    )
    assert store.reads == 8
    assert invalidated_since((await events.log(KEY)).events, 2) is None
