"""Group commit of a PostgreSQL store's appends (``store.postgres._group``): callers that wait
together share a transaction, and each still gets exactly what an append of its own would have
given."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from contextengine._compat import timeout
from contextengine.core.errors import ContextEngineError
from contextengine.store import LoggedEvent, SessionKey
from contextengine.store.postgres import PostgresStore
from contextengine.v1 import event_pb2

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

APP = "app"


def _event(event_id: str, **delta: Any) -> event_pb2.Event:
    event = event_pb2.Event(id=event_id, author="user", invocation_id="i", timestamp=1.0)
    event.content.role = "user"
    event.content.parts.add().text = event_id
    for name, value in delta.items():
        event.actions.state_delta[name.replace("__", ":")] = value
    return event


@pytest.fixture
async def store(postgres_dsn: str) -> Any:
    # One transaction of appends at a time: everything that waits meanwhile goes together.
    opened = PostgresStore(postgres_dsn, group_in_flight=1)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def _log(store: PostgresStore) -> list[LoggedEvent]:
    return await store.list_events_after_position(APP, None, 0, 1000)


async def test_appends_waiting_together_share_one_transaction(store: PostgresStore) -> None:
    keys = [SessionKey(APP, f"u{n % 3}", f"s{n}") for n in range(24)]
    for key in keys:
        await store.create_session(key, {}, 1.0)
    groups = store._groups
    before = groups.transactions
    outcomes = await asyncio.gather(
        *(
            store.append_events(key, [_event(f"{key.session_id}-a", user__n=n, app__n=n)], None)
            for n, key in enumerate(keys)
        )
    )
    assert [o.last_sequence for o in outcomes] == [1] * 24
    assert groups.transactions - before < 24, "every append had a transaction of its own"
    logged = await _log(store)
    assert len(logged) == 24
    # A transaction's appends: one id, places 0, 1, ... in the order the callers came.
    by_transaction: dict[int, list[int]] = {}
    for entry in logged:
        by_transaction.setdefault(entry.position >> 20, []).append(entry.position & 0xFFFFF)
    assert len(by_transaction) == groups.transactions - before
    assert all(places == list(range(len(places))) for places in by_transaction.values())
    # The shared state is the last caller's, as with one transaction per append.
    state = (await store.get_state(keys[0])).state
    assert state["app:n"] == 23
    assert state["user:n"] == 21  # the last of u0's sessions: 0, 3, ..., 21


async def test_a_failing_plan_fails_only_its_own_caller(store: PostgresStore) -> None:
    keys = [SessionKey(APP, "u", f"s{n}") for n in range(4)]
    for key in keys:
        await store.create_session(key, {}, 1.0)
    await store.append_events(keys[1], [_event("taken", x=1)], None)
    results = await asyncio.gather(
        store.append_events(keys[0], [_event("ok-0")], None),
        store.append_events(keys[1], [_event("taken", x=2)], None),  # EVENT_ID_CONFLICT
        store.append_events(keys[2], [_event("late")], 5),  # SEQUENCE_MISMATCH
        store.append_events(SessionKey(APP, "u", "none"), [_event("x")], None),
        store.append_events(keys[3], [_event("ok-3")], None),
        return_exceptions=True,
    )
    reasons = [r.reason if isinstance(r, ContextEngineError) else "ok" for r in results]
    assert reasons == ["ok", "EVENT_ID_CONFLICT", "SEQUENCE_MISMATCH", "SESSION_NOT_FOUND", "ok"]
    assert sorted(e.event.id for e in await _log(store)) == ["ok-0", "ok-3", "taken"]


async def test_two_appends_to_one_session_in_one_group(store: PostgresStore) -> None:
    key = SessionKey(APP, "u", "s")
    await store.create_session(key, {}, 1.0)
    first, again, second = await asyncio.gather(
        store.append_events(key, [_event("a", k=1), _event("b", k=2)], None),
        store.append_events(key, [_event("a", k=1)], None),  # a retry of the first: a duplicate
        store.append_events(key, [_event("c", k=3)], 2),
    )
    assert [e.sequence for e in first.events] == [1, 2]
    assert again.duplicates == [True]
    assert again.events[0].sequence == 1
    again.events[0].content.parts[0].text = "mutated"  # a copy of its own
    assert first.events[0].content.parts[0].text == "a"
    assert [e.sequence for e in second.events] == [3]
    logged, last = await store.list_logged_events(key, 0, 10)
    assert [e.event.id for e in logged] == ["a", "b", "c"]
    assert [e.position for e in logged] == sorted(e.position for e in logged)
    assert last == 3
    assert (await store.get_state(key)).state == {"k": 3}


async def test_a_foreign_lock_on_one_session_fails_only_its_append(
    store: PostgresStore, postgres_dsn: str
) -> None:
    """A database error fails the group's transaction; its appends are then run one by one,
    so only the one whose session a foreign transaction locked fails (STORAGE_BUSY)."""
    keys = [SessionKey(APP, "u", f"s{n}") for n in range(4)]
    for key in keys:
        await store.create_session(key, {}, 1.0)
    foreign = await asyncpg.connect(postgres_dsn)
    try:
        await foreign.execute("BEGIN")
        await foreign.execute(
            "SELECT 1 FROM sessions WHERE session_id = 's2' FOR UPDATE"  # the row, not the lock
        )
        results = await asyncio.gather(
            *(store.append_events(key, [_event(key.session_id)], None) for key in keys),
            return_exceptions=True,
        )
        await foreign.execute("ROLLBACK")
    finally:
        await foreign.close()
    failed = [(key, r) for key, r in zip(keys, results, strict=True) if isinstance(r, Exception)]
    assert [(key.session_id, getattr(r, "reason", r)) for key, r in failed] == [
        ("s2", "STORAGE_BUSY")
    ]
    assert sorted(e.event.id for e in await _log(store)) == ["s0", "s1", "s3"]


async def test_a_caller_that_stops_waiting_still_has_its_append_committed(
    store: PostgresStore,
) -> None:
    key = SessionKey(APP, "u", "s")
    await store.create_session(key, {}, 1.0)
    task = asyncio.create_task(store.append_events(key, [_event("gone-caller")], None))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with timeout(10):
        while not await _log(store):  # noqa: ASYNC110 - the store, not an event
            await asyncio.sleep(0.01)
    assert [e.event.id for e in await _log(store)] == ["gone-caller"]


async def test_a_stuck_transaction_does_not_hold_up_the_others(postgres_dsn: str) -> None:
    """Transactions of appends run one at a time while they are quick; once the one in flight
    has run ``stall_seconds`` (it waits for a foreign lock) the next starts beside it."""
    store = PostgresStore(postgres_dsn, group_in_flight=2)
    await store.open()
    keys = [SessionKey(APP, "u", f"s{n}") for n in range(2)]
    foreign = await asyncpg.connect(postgres_dsn)
    try:
        for key in keys:
            await store.create_session(key, {}, 1.0)
        await foreign.execute("BEGIN")
        await foreign.execute("SELECT 1 FROM sessions WHERE session_id = 's0' FOR UPDATE")
        stuck = asyncio.create_task(store.append_events(keys[0], [_event("stuck")], None))
        await asyncio.sleep(0.05)  # in flight, waiting for the row
        started = asyncio.get_running_loop().time()
        await store.append_events(keys[1], [_event("free")], None)
        assert asyncio.get_running_loop().time() - started < 1.0  # not the 2 s lock timeout
        assert not stuck.done()
        await foreign.execute("ROLLBACK")
        assert (await stuck).last_sequence == 1
    finally:
        await foreign.close()
        await store.close()
