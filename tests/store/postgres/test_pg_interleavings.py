"""Concurrent commits on PostgreSQL, forced into the interleavings that break naive readers.

Positions come from transaction ids and commits finish in any order (``store.postgres._positions``):
these tests make that happen on purpose, on a real server, and check that every reader sees the
log the table ends up holding, in its order, each change once:

* the commit listeners of two stores (what feeds every sidecar's subscriptions and watches),
* a reader polling ``list_events_after_position`` by cursor (what a subscription replays),
* ``get_state`` (what a state watch starts from), against the deltas replayed in log order.

Every write transaction's COMMIT goes through a hook: some wait a random time first (an earlier
position held open while later ones commit), some roll back instead, and one is held open while
every other writer commits. Out of process, with real sidecars and a transaction that
is killed: ``tests/store/postgres/test_interleavings.py``.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Sequence
from typing import Any

import asyncpg
import pytest

from contextengine._compat import timeout
from contextengine.core.errors import ContextEngineError
from contextengine.core.state import apply_delta
from contextengine.core.structs import struct_to_dict
from contextengine.store import Change, LoggedEvent, SessionKey
from contextengine.store.postgres import PostgresStore
from contextengine.v1 import event_pb2

pytestmark = [pytest.mark.unit, pytest.mark.timeout(120)]

APP = "app"
USERS = ("u0", "u1", "u2")
KEYS = [SessionKey(APP, USERS[n % 3], f"s{n}") for n in range(6)]


class RolledBackError(Exception):
    """Raised by the COMMIT hook instead of committing: the transaction rolls back."""


#: set (in the writer's context, which the store's write task copies) for the one append whose
#: transaction is held open
HELD: contextvars.ContextVar[bool] = contextvars.ContextVar("held", default=False)
#: the session only the held append writes (it changes no shared state: nothing waits for it)
HELD_KEY = SessionKey(APP, "u0", "held")


class Heard:
    """Every LoggedEvent a store's listeners were told, and the calls they came in."""

    def __init__(self, store: PostgresStore) -> None:
        self.events: list[LoggedEvent] = []
        self.calls: list[list[LoggedEvent]] = []
        store.add_commit_listener(self._on_commit)

    def _on_commit(self, changes: Sequence[Change]) -> None:
        logged = [c for c in changes if isinstance(c, LoggedEvent)]
        if logged:
            self.calls.append(logged)
            self.events.extend(logged)


def _event(event_id: str, n: int, *, shared: bool = True) -> event_pb2.Event:
    event = event_pb2.Event(id=event_id, author="agent", invocation_id="i", timestamp=1.0 + n)
    event.content.role = "model"
    event.content.parts.add().text = event_id
    event.actions.state_delta[f"k{n % 2}"] = event_id
    # Some deltas on the app's and the user's state, rows other sessions write too.
    if shared and n % 4 == 0:
        event.actions.state_delta[f"app:k{n % 3}"] = event_id
    if shared and n % 3 == 0:
        event.actions.state_delta[f"user:k{n % 2}"] = event_id
    return event


class Hook:
    """A replacement of ``asyncpg.Connection.execute``: the COMMIT of the append made with
    ``HELD`` set waits until ``release`` is set (its transaction id in ``holder``); every other
    COMMIT waits a random while (about half of them) or rolls back (one in eight)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.release = asyncio.Event()
        self.holder = 0
        self._execute = asyncpg.Connection.execute

    async def __call__(
        self, conn: asyncpg.Connection, query: str, *args: object, **kwargs: object
    ) -> Any:
        if query == "COMMIT":
            if HELD.get():
                self.holder = int(await conn.fetchval("SELECT pg_current_xact_id()::text"))
                await self.release.wait()
            else:
                draw = self.rng.random()
                if draw < 0.125:
                    raise RolledBackError
                if draw < 0.6:
                    await asyncio.sleep(self.rng.random() * 0.03)
        return await self._execute(conn, query, *args, **kwargs)


async def test_readers_see_the_final_log_in_order_once_whatever_the_commit_order(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers = [PostgresStore(postgres_dsn, pool_size=8) for _ in range(2)]
    reader = PostgresStore(postgres_dsn, pool_size=2)
    for store in (*writers, reader):
        await store.open()
    heard = [Heard(store) for store in (*writers, reader)]
    for key in (*KEYS, HELD_KEY):
        await writers[0].create_session(key, {}, 1.0)
    hook = Hook(random.Random(32))
    monkeypatch.setattr(asyncpg.Connection, "execute", hook)
    acknowledged: list[str] = []
    failed: list[str] = []
    polled: list[LoggedEvent] = []
    finished: list[int] = []
    #: how many events the poller is to see (set once every writer is done)
    target: list[int] = []

    async def poll() -> None:
        cursor = 0
        while not target or len(polled) < target[0]:
            page = await reader.list_events_after_position(APP, None, cursor, 50)
            polled.extend(page)
            if page:
                cursor = page[-1].position
            else:
                await asyncio.sleep(0.002)

    async def hold() -> None:
        HELD.set(True)  # this task's context only
        await writers[0].append_events(HELD_KEY, [_event("held", 1, shared=False)], None)
        acknowledged.append("held")

    async def write(worker: int) -> None:
        store = writers[worker % 2]
        for i in range(12):
            n = worker * 100 + i
            batch = [_event(f"w{worker}-{i}-{j}", n + j) for j in range(1 + n % 3)]
            try:
                await store.append_events(KEYS[(worker + i) % len(KEYS)], batch, None)
            except RolledBackError:
                failed.extend(event.id for event in batch)
                continue
            acknowledged.extend(event.id for event in batch)
        finished.append(worker)

    polling = asyncio.create_task(poll())
    holding = asyncio.create_task(hold())
    async with timeout(10):
        while not hook.holder:  # noqa: ASYNC110 - a condition, not an event
            await asyncio.sleep(0.005)
    writes = asyncio.gather(*(write(worker) for worker in range(12)))
    try:
        # Every writer commits while one transaction holds an earlier position open.
        await writes
        await asyncio.sleep(0.3)  # time for the feeds and the poller to go wrong, if they can
        holder = hook.holder
        assert all(e.position >> 20 < holder for e in polled)
        for h in heard:
            assert all(e.position >> 20 < holder for e in h.events)
        assert len(polled) < len(acknowledged), "nothing committed after the held transaction"
        hook.release.set()
        await holding
        target.append(len(acknowledged))
        async with timeout(20):
            await polling
    finally:
        hook.release.set()
        target.append(0)
        monkeypatch.undo()
        await asyncio.gather(writes, holding, polling, return_exceptions=True)

    try:
        final = await reader.list_events_after_position(APP, None, 0, 10_000)
        assert sorted(e.event.id for e in final) == sorted(acknowledged)
        assert not set(failed) & {e.event.id for e in final}
        assert len(failed) > 0, "no transaction rolled back: the hook did not run"
        order = [(e.key, e.event.id, e.position) for e in final]
        assert [e.position for e in final] == sorted({e.position for e in final})
        assert [e.event.id for e in final if e.position >> 20 == holder] == ["held"]
        # The poller, held below the open transaction, then saw the log as it ended up.
        assert [(e.key, e.event.id, e.position) for e in polled] == order
        async with timeout(20):
            while any(len(h.events) < len(final) for h in heard):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        for h in heard:
            assert [(e.key, e.event.id, e.position) for e in h.events] == order
            for call in h.calls:  # one listener call per transaction: one id, one session
                assert len({(e.position >> 20, e.key) for e in call}) == 1
        # A session's events are in sequence order by position, without gaps.
        for key in KEYS:
            mine = [e.event.sequence for e in final if e.key == key]
            assert mine == list(range(1, len(mine) + 1))
        # State: the deltas replayed in log order are what each row holds.
        expected: dict[str, dict[str, Any]] = {}
        for e in final:
            delta = struct_to_dict(e.event.actions.state_delta, "delta")
            for scope, name in (("app", APP), ("user", e.key.user_id), ("session", str(e.key))):
                part = {_unscoped(k): v for k, v in delta.items() if _scope(k) == scope}
                row = f"{scope}:{name}"
                expected[row] = apply_delta(expected.get(row, {}), part)
        for key in KEYS:
            state = (await reader.get_state(key)).state
            wanted = {
                **expected.get(f"session:{key}", {}),
                **{f"user:{k}": v for k, v in expected.get(f"user:{key.user_id}", {}).items()},
                **{f"app:{k}": v for k, v in expected.get(f"app:{APP}", {}).items()},
            }
            assert state == wanted
    finally:
        for store in (*writers, reader):
            await store.close()


def _unscoped(name: str) -> str:
    return name.partition(":")[2] if _scope(name) != "session" else name


def _scope(name: str) -> str:
    if name.startswith("app:"):
        return "app"
    if name.startswith("user:"):
        return "user"
    return "session"


async def test_get_state_waits_for_an_older_transaction_and_is_exact(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state read while an older transaction (a smaller id) is still open and a newer one
    that changed the app's state has committed: the read waits until it can name a position
    whose state holds exactly the changes up to it, then the held transaction's change comes
    after that position."""
    # Two connections: the held transaction's, and one for everything else.
    store = PostgresStore(postgres_dsn, pool_size=2, group_in_flight=2)
    await store.open()
    key, other = KEYS[0], KEYS[1]
    try:
        for k in (key, other):
            await store.create_session(k, {}, 1.0)
        release = asyncio.Event()
        holding = asyncio.Event()
        execute = asyncpg.Connection.execute

        async def hold_first(
            self: asyncpg.Connection, query: str, *args: object, **kwargs: object
        ) -> Any:
            if query == "COMMIT" and not holding.is_set():
                holding.set()
                await release.wait()
            return await execute(self, query, *args, **kwargs)

        monkeypatch.setattr(asyncpg.Connection, "execute", hold_first)
        early = event_pb2.Event(id="early", author="a", invocation_id="i", timestamp=1.0)
        early.actions.state_delta["user:early"] = 1
        held = asyncio.create_task(store.append_events(other, [early], None))
        await holding.wait()
        late = event_pb2.Event(id="late", author="a", invocation_id="i", timestamp=2.0)
        late.actions.state_delta["app:late"] = 2
        await store.append_events(key, [late], None)
        reading = asyncio.create_task(store.get_state(key))
        await asyncio.sleep(0.3)
        assert not reading.done(), "get_state answered while its snapshot was not exact"
        # It does not keep a connection while it waits: the other one is free for other calls.
        async with timeout(1):
            assert len(await store.list_sessions(APP, None, 10, None)) == 2
        release.set()
        await held
        state = await reading
        logged = {e.event.id: e.position for e in await _everything(store)}
        assert state.state == {"app:late": 2}  # "early" is another user's
        assert logged["early"] < logged["late"] <= state.position
    finally:
        monkeypatch.undo()
        await store.close()


async def _everything(store: PostgresStore) -> list[LoggedEvent]:
    return await store.list_events_after_position(APP, None, 0, 1000)


async def test_a_rolled_back_append_fails_and_leaves_no_trace(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresStore(postgres_dsn)
    await store.open()
    try:
        await store.create_session(KEYS[0], {}, 1.0)
        execute = asyncpg.Connection.execute

        async def roll_back(
            self: asyncpg.Connection, query: str, *args: object, **kwargs: object
        ) -> Any:
            if query == "COMMIT":
                raise RolledBackError
            return await execute(self, query, *args, **kwargs)

        monkeypatch.setattr(asyncpg.Connection, "execute", roll_back)
        with pytest.raises(RolledBackError):
            await store.append_events(KEYS[0], [_event("gone", 0)], None)
        monkeypatch.undo()
        assert (await store.get_state(KEYS[0])).state == {}
        outcome = await store.append_events(KEYS[0], [_event("kept", 0)], None)
        assert outcome.last_sequence == 1
        assert [e.event.id for e in await _everything(store)] == ["kept"]
        assert (await store.get_state(KEYS[0])).state == {
            "app:k0": "kept",
            "user:k0": "kept",
            "k0": "kept",
        }
    except ContextEngineError as error:  # pragma: no cover - a failure's message
        raise AssertionError(str(error)) from error
    finally:
        await store.close()
