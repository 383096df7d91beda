"""The ``Coordination`` contract: positions, the reads that return them, and commit notifications;
on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from contextengine._compat import timeout
from contextengine.store import (
    Change,
    EventStore,
    LoggedEvent,
    SessionCreated,
    SessionDeleted,
    SessionKey,
)

from .helpers import APP, KEY, all_events, create, ev, raises

pytestmark = pytest.mark.unit

# --- positions and commit notifications -----------------------------------------------------------


class Recorder:
    """A commit listener that keeps every notified transaction."""

    def __init__(self) -> None:
        self.commits: list[list[Change]] = []

    def __call__(self, changes: Sequence[Change]) -> None:
        self.commits.append(list(changes))

    def changes(self) -> list[Change]:
        return [change for commit in self.commits for change in commit]

    def events(self) -> list[LoggedEvent]:
        return [change for change in self.changes() if isinstance(change, LoggedEvent)]


def positions(logged: Sequence[LoggedEvent]) -> list[int]:
    return [entry.position for entry in logged]


async def heard(recorder: Recorder, count: int) -> None:
    """Waits until ``recorder`` holds ``count`` changes: a sole-writer store tells them before
    the writer returns, PostgreSQL once their positions are final (milliseconds here)."""
    async with timeout(10):
        while len(recorder.changes()) < count:  # noqa: ASYNC110 - a condition, not an event
            await asyncio.sleep(0.005)


async def test_a_new_store_has_no_position(store: EventStore) -> None:
    assert await store.list_events_after_position(APP, None, 0, 10) == []
    # The end of the final log: 0 where positions are counted (one writer); on PostgreSQL a
    # bound derived from the oldest transaction in flight, which no position recorded later
    # is at or below.
    end = await store.last_position()
    assert end == 0 if store.sole_writer else end >= 0
    await create(store)
    await store.append_events(KEY, [ev("a")], None)
    (logged,) = await store.list_events_after_position(APP, None, 0, 10)
    assert logged.position > end


async def test_positions_increase_across_sessions(store: EventStore) -> None:
    other = SessionKey(APP, "u2", "s2")
    await create(store)
    await create(store, other)
    await store.append_events(KEY, [ev("a"), ev("b")], None)
    await store.append_events(other, [ev("c")], None)
    await store.append_events(KEY, [ev("d")], None)

    logged = await store.list_events_after_position(APP, None, 0, 100)

    assert [(entry.key, entry.event.id, entry.event.sequence) for entry in logged] == [
        (KEY, "a", 1),
        (KEY, "b", 2),
        (other, "c", 1),
        (KEY, "d", 3),
    ]
    assert positions(logged) == sorted(set(positions(logged)))
    assert positions(logged)[0] >= 1
    end = await store.last_position()
    assert end == positions(logged)[-1] if store.sole_writer else end >= positions(logged)[-1]


async def test_list_events_after_position_scopes_and_pages(store: EventStore) -> None:
    keys = [SessionKey(APP, "u1", "s1"), SessionKey(APP, "u2", "s1"), SessionKey(APP, "u1", "s2")]
    elsewhere = SessionKey("other-app", "u1", "s1")
    for key in [*keys, elsewhere]:
        await create(store, key)
    for n in range(3):
        for i, key in enumerate([*keys, elsewhere]):
            await store.append_events(key, [ev(f"e{n}-{i}")], None)

    everything = await store.list_events_after_position(APP, None, 0, 100)
    assert [entry.event.id for entry in everything] == [
        f"e{n}-{i}" for n in range(3) for i in range(3)
    ]
    mine = await store.list_events_after_position(APP, "u1", 0, 100)
    assert {entry.key for entry in mine} == {keys[0], keys[2]}
    assert len(mine) == 6

    pages: list[list[str]] = []
    after = 0
    while page := await store.list_events_after_position(APP, None, after, 4):
        pages.append([entry.event.id for entry in page])
        after = page[-1].position
    assert [len(page) for page in pages] == [4, 4, 1]
    assert [item for page in pages for item in page] == [e.event.id for e in everything]
    assert await store.list_events_after_position(APP, None, everything[-1].position, 10) == []
    assert await store.list_events_after_position(APP, None, 0, 0) == []
    assert await store.list_events_after_position("no-such-app", None, 0, 10) == []


async def test_deleted_sessions_leave_the_position_log(store: EventStore) -> None:
    other = SessionKey(APP, "u1", "s2")
    await create(store)
    await create(store, other)
    await store.append_events(KEY, [ev("a")], None)
    await store.append_events(other, [ev("b")], None)
    before = await store.last_position()

    await store.delete_session(KEY)

    logged = await store.list_events_after_position(APP, None, 0, 10)
    assert [entry.event.id for entry in logged] == ["b"]
    assert await store.last_position() >= before
    await create(store)
    again = await store.append_events(KEY, [ev("a")], None)
    assert again.events[0].sequence == 1
    newest = await store.list_events_after_position(APP, None, before, 10)
    assert [(entry.key, entry.event.id) for entry in newest] == [(KEY, "a")]
    assert newest[0].position > before  # positions are never reused


async def test_list_logged_events_has_positions(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev(f"e{i}") for i in range(5)], None)
    by_position = await store.list_events_after_position(APP, None, 0, 100)

    page, last = await store.list_logged_events(KEY, 1, 3)

    assert last == 5
    assert [entry.event.sequence for entry in page] == [2, 3, 4]
    assert all(entry.key == KEY for entry in page)
    assert positions(page) == positions(by_position)[1:4]
    assert await store.list_logged_events(KEY, 5, 10) == ([], 5)
    assert await store.list_logged_events(KEY, 0, 0) == ([], 5)
    await raises("SESSION_NOT_FOUND", store.list_logged_events(SessionKey(APP, "u1", "x"), 0, 1))


async def test_get_state_reflects_the_last_position(store: EventStore) -> None:
    other = SessionKey(APP, "u1", "s2")
    await create(store, state={"s": 1})
    await create(store, other)
    await store.append_events(other, [ev("a", delta={"app:a": 1, "user:u": 2, "mine": 3})], None)

    state = await store.get_state(KEY)

    assert state.state == {"s": 1, "app:a": 1, "user:u": 2}
    (change,) = await store.list_events_after_position(APP, None, 0, 10)
    assert change.position <= state.position <= await store.last_position()
    if store.sole_writer:
        assert state.position == await store.last_position()
    await raises("SESSION_NOT_FOUND", store.get_state(SessionKey(APP, "u1", "missing")))


async def test_creating_a_session_with_shared_state_takes_a_position(store: EventStore) -> None:
    recorder = Recorder()
    store.add_commit_listener(recorder)
    plain = SessionKey(APP, "u1", "plain")
    before = await store.last_position()
    await create(store, plain, state={"own": 1})
    assert await store.last_position() == before or not store.sole_writer

    await create(store, state={"own": 1, "app:a": {"deep": [1]}, "user:u": 2, "temp:t": 3})

    await heard(recorder, 2)
    first, second = recorder.changes()
    assert first == SessionCreated(plain, {}, 0)
    assert isinstance(second, SessionCreated)
    assert second.position > before
    assert second == SessionCreated(KEY, {"app:a": {"deep": [1]}, "user:u": 2}, second.position)
    assert second.position <= await store.last_position()
    assert second.position <= (await store.get_state(KEY)).position
    if store.sole_writer:
        assert await store.last_position() == second.position == before + 1


async def test_commit_listener_sees_every_commit_in_position_order(store: EventStore) -> None:
    recorder = Recorder()
    store.add_commit_listener(recorder)
    keys = [SessionKey(APP, "u1", f"s{n}") for n in range(4)]
    for key in keys:
        await create(store, key)

    async def appender(key: SessionKey) -> None:
        for i in range(10):
            await store.append_events(key, [ev(f"{key.session_id}-{i}-a"), ev(f"-{i}-b")], None)

    await asyncio.gather(*(appender(key) for key in keys))

    await heard(recorder, 4 + 80)  # the creations, then the events
    notified = recorder.events()
    assert positions(notified) == sorted(set(positions(notified)))
    stored = await store.list_events_after_position(APP, None, 0, 1000)
    assert [(e.key, e.event, e.position) for e in notified] == [
        (e.key, e.event, e.position) for e in stored
    ]
    for commit in recorder.commits:  # a batch's two events are in one commit, in order
        events = [change for change in commit if isinstance(change, LoggedEvent)]
        assert len(events) % 2 == 0


async def test_listeners_are_told_before_the_writer_returns(store: EventStore) -> None:
    """Sole-writer stores: before the writer's call returns. PostgreSQL (other processes write
    too): once the position is final, which needs no older transaction to end here."""
    recorder = Recorder()
    store.add_commit_listener(recorder)
    await create(store)

    outcome = await store.append_events(KEY, [ev("a", delta={"x": 1})], None)

    if not store.sole_writer:
        await heard(recorder, 2)  # the creation (told at once) and the event
    (logged,) = recorder.events()
    assert logged.key == KEY
    assert logged.event == outcome.events[0]
    assert logged.event.sequence == 1
    end = await store.last_position()
    assert logged.position == end if store.sole_writer else logged.position <= end


async def test_failed_and_duplicate_appends_notify_nothing(store: EventStore) -> None:
    await create(store)
    recorder = Recorder()
    store.add_commit_listener(recorder)
    await store.append_events(KEY, [ev("a", text="one")], None)
    await heard(recorder, 1)
    recorder.commits.clear()

    await store.append_events(KEY, [ev("a", text="one")], None)  # a duplicate
    await raises("EVENT_ID_CONFLICT", store.append_events(KEY, [ev("b"), ev("a")], None))
    await raises("SEQUENCE_MISMATCH", store.append_events(KEY, [ev("c")], 7))
    await raises("SESSION_ALREADY_EXISTS", create(store))
    assert await store.delete_session(SessionKey(APP, "u1", "missing")) is False

    # A commit after them, heard: everything before it was told by then.
    await store.append_events(KEY, [ev("fence")], None)
    await heard(recorder, 1)
    assert [[_id(change) for change in commit] for commit in recorder.commits] == [["fence"]]


def _id(change: Change) -> str:
    return change.event.id if isinstance(change, LoggedEvent) else repr(change)


async def test_deletion_is_notified(store: EventStore) -> None:
    await create(store)
    recorder = Recorder()
    store.add_commit_listener(recorder)

    await store.delete_session(KEY)

    assert recorder.changes() == [SessionDeleted(KEY)]


async def test_removed_and_failing_listeners(store: EventStore) -> None:
    kept, removed = Recorder(), Recorder()

    def failing(changes: Sequence[Change]) -> None:
        raise RuntimeError("a broken listener")

    store.add_commit_listener(failing)
    remove = store.add_commit_listener(removed)
    store.add_commit_listener(kept)
    remove()
    remove()  # idempotent

    await create(store)
    outcome = await store.append_events(KEY, [ev("a")], None)

    assert outcome.last_sequence == 1  # the failing listener did not fail the append
    await heard(kept, 2)
    assert [e.event.id for e in kept.events()] == ["a"]
    assert removed.commits == []


async def test_notified_events_are_copies(store: EventStore) -> None:
    recorder = Recorder()
    store.add_commit_listener(recorder)
    await create(store)
    outcome = await store.append_events(KEY, [ev("a", text="original")], None)

    outcome.events[0].content.parts[0].text = "mutated outcome"
    await heard(recorder, 2)
    (logged,) = recorder.events()
    assert logged.event.content.parts[0].text == "original"
    logged.event.content.parts[0].text = "mutated notification"
    assert (await all_events(store))[0].content.parts[0].text == "original"
    listed = await store.list_events_after_position(APP, None, 0, 10)
    listed[0].event.content.parts[0].text = "mutated list"
    assert (await store.list_logged_events(KEY, 0, 10))[0][0].event.content.parts[0].text == (
        "original"
    )


async def test_position_reads_of_a_closed_store(store: EventStore) -> None:
    await create(store)
    await store.close()
    await raises("SHUTTING_DOWN", store.last_position())
    await raises("SHUTTING_DOWN", store.get_state(KEY))
    await raises("SHUTTING_DOWN", store.list_logged_events(KEY, 0, 1))
    await raises("SHUTTING_DOWN", store.list_events_after_position(APP, None, 0, 1))
