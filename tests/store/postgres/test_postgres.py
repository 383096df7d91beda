"""What the PostgreSQL store adds to the contract (``contract/`` runs on it too): several
stores on one database (sidecars), migrations applied once when they start together, readers
that never pass a position which may still commit, storage health while the server is down, the
DSN as a secret. The hard interleavings of concurrent commits: ``test_pg_interleavings.py``."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import pytest

from contextengine._compat import timeout
from contextengine.core.errors import ContextEngineError
from contextengine.engine import EngineSettings, open_engine
from contextengine.store import (
    EventFilter,
    LoggedEvent,
    SessionKey,
    StoredSession,
    is_postgres_dsn,
    mask_dsn,
)
from contextengine.store.postgres import PostgresStore
from contextengine.v1 import event_pb2
from tests.pg_server import PostgresServer, private_server

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "u", "s")


def _event(event_id: str, **state: int) -> event_pb2.Event:
    event = event_pb2.Event(id=event_id, author="user", invocation_id="i", timestamp=1.0)
    for name, value in state.items():
        event.actions.state_delta[name] = value
    return event


async def test_migrations_run_once_when_stores_start_together(
    postgres_server: PostgresServer,
) -> None:
    dsn = postgres_server.dsn(postgres_server.create_empty_database())
    stores = [PostgresStore(dsn, pool_size=2) for _ in range(4)]
    await asyncio.gather(*(store.open() for store in stores))
    try:
        conn = await asyncpg.connect(dsn)
        try:
            rows = await conn.fetch("SELECT version, name FROM schema_version ORDER BY version")
            keys = await conn.fetchval("SELECT count(*) FROM secrets")
        finally:
            await conn.close()
        assert [row["version"] for row in rows] == list(range(1, len(rows) + 1))
        assert rows[0]["name"] == "0001_init.sql"
        assert keys == 1
        # Every store of the database has the same page token key (tokens valid everywhere).
        assert len({await store.page_token_key() for store in stores}) == 1
    finally:
        await asyncio.gather(*(store.close() for store in stores))


async def test_sequences_stay_contiguous_with_writers_on_several_stores(postgres_dsn: str) -> None:
    stores = [PostgresStore(postgres_dsn, pool_size=4) for _ in range(3)]
    for store in stores:
        await store.open()
    try:
        await stores[0].create_session(KEY, {}, 1.0)

        async def writer(n: int) -> None:
            store = stores[n % len(stores)]
            await store.append_events(KEY, [_event(f"e{n}", **{"app:n": n, "user:n": n})], None)

        await asyncio.gather(*(writer(n) for n in range(60)))
        session = await stores[1].get_session(KEY, _all())
        assert [event.sequence for event in session.events] == list(range(1, 61))
        assert sorted(event.id for event in session.events) == sorted(f"e{n}" for n in range(60))
        logged, _ = await stores[2].list_logged_events(KEY, 0, 100)
        positions = [item.position for item in logged]
        # One session's events: positions in sequence order, whichever store wrote them.
        assert positions == sorted(set(positions))
    finally:
        for store in stores:
            await store.close()


async def test_readers_never_see_a_later_position_before_an_earlier_one(postgres_dsn: str) -> None:
    """The positions rule: a reader polling by cursor while two stores append to many sessions
    sees every position exactly once, in order (a position below its cursor never appears
    later)."""
    writers = [PostgresStore(postgres_dsn, pool_size=6) for _ in range(2)]
    reader = PostgresStore(postgres_dsn, pool_size=1)
    for store in (*writers, reader):
        await store.open()
    keys = [SessionKey("app", f"u{n % 3}", f"s{n}") for n in range(8)]
    for key in keys:
        await writers[0].create_session(key, {}, 1.0)
    done = asyncio.Event()
    seen: list[int] = []

    async def read() -> None:
        cursor = 0
        while True:
            finished = done.is_set()
            batch = await reader.list_events_after_position("app", None, cursor, 1000)
            seen.extend(item.position for item in batch)
            if batch:
                cursor = batch[-1].position
            elif finished:
                return
            await asyncio.sleep(0)

    async def write(n: int) -> None:
        key = keys[n % len(keys)]
        batch = [_event(f"{n}-{i}") for i in range(1 + n % 3)]
        await writers[n % 2].append_events(key, batch, None)

    try:
        reading = asyncio.create_task(read())
        await asyncio.gather(*(write(n) for n in range(120)))
        done.set()
        await reading
        everything = await reader.list_events_after_position("app", None, 0, 1000)
        assert len(everything) == sum(1 + n % 3 for n in range(120))
        assert seen == [item.position for item in everything]
    finally:
        for store in (*writers, reader):
            await store.close()


async def test_concurrent_creates_on_two_stores_one_wins(postgres_dsn: str) -> None:
    stores = [PostgresStore(postgres_dsn) for _ in range(2)]
    for store in stores:
        await store.open()
    try:
        results = await asyncio.gather(
            *(store.create_session(KEY, {"app:x": 1}, 1.0) for store in stores),
            return_exceptions=True,
        )
        created = [r for r in results if isinstance(r, StoredSession)]
        refused = [r for r in results if isinstance(r, ContextEngineError)]
        assert len(created) == 1
        assert [error.reason for error in refused] == ["SESSION_ALREADY_EXISTS"]
        # The loser changed nothing: the app's state once, one session.
        assert (await stores[1].get_state(KEY)).state == {"app:x": 1}
        assert len(await stores[1].list_sessions("app", None, 10, None)) == 1
    finally:
        for store in stores:
            await store.close()


async def test_an_event_retried_on_another_store_is_a_duplicate(postgres_dsn: str) -> None:
    first, second = PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)
    await first.open()
    await second.open()
    try:
        await first.create_session(KEY, {}, 1.0)
        await first.append_events(KEY, [_event("a", k=1)], None)
        again = await second.append_events(KEY, [_event("a", k=1)], 0)
        assert again.duplicates == [True]
        assert again.last_sequence == 1
        with pytest.raises(ContextEngineError) as conflict:
            await second.append_events(KEY, [_event("a", k=2)], None)
        assert conflict.value.reason == "EVENT_ID_CONFLICT"
    finally:
        await first.close()
        await second.close()


async def test_commit_listeners_hear_local_commits_in_position_order(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn, pool_size=8)
    await store.open()
    heard: list[int] = []
    store.add_commit_listener(
        lambda changes: heard.extend(c.position for c in changes if isinstance(c, LoggedEvent))
    )
    try:
        keys = [SessionKey("app", "u", f"s{n}") for n in range(6)]
        for key in keys:
            await store.create_session(key, {}, 1.0)
        await asyncio.gather(
            *(store.append_events(keys[n % 6], [_event(f"e{n}")], None) for n in range(48))
        )
        async with timeout(10):
            while len(heard) < 48:  # noqa: ASYNC110 - told once final, after the writers
                await asyncio.sleep(0.005)
        assert heard == sorted(heard)
        assert len(heard) == 48
    finally:
        await store.close()


@pytest.mark.postgres  # a server of its own (private_server), not the fixture's
async def test_storage_health_follows_the_server() -> None:
    """The server stopped: calls fail with STORAGE_UNAVAILABLE, the listeners hear of it; the
    server back: the store recovers by itself (a probe), and acknowledged events are there."""
    with private_server() as server:
        store = PostgresStore(server.dsn("ce_template"), probe_seconds=0.1, connect_timeout=2.0)
        await store.open()
        heard: list[str | None] = []
        store.add_storage_listener(
            lambda problem: heard.append(None if problem is None else problem.reason)
        )
        try:
            await store.create_session(KEY, {}, 1.0)
            await store.append_events(KEY, [_event("a")], None)
            await asyncio.to_thread(server.stop)
            with pytest.raises(ContextEngineError) as down:
                await store.append_events(KEY, [_event("b")], None)
            assert down.value.reason == "STORAGE_UNAVAILABLE"
            assert store.storage_problem is not None
            with pytest.raises(ContextEngineError) as read:
                await store.get_session(KEY, _all())
            assert read.value.reason == "STORAGE_UNAVAILABLE"
            assert heard == ["STORAGE_UNAVAILABLE"]
            assert await asyncio.to_thread(server.start_again) is None
            for _ in range(100):
                if not heard[-1]:
                    break
                await asyncio.sleep(0.1)
            assert heard == ["STORAGE_UNAVAILABLE", None]
            session = await store.get_session(KEY, _all())
            assert [event.id for event in session.events] == ["a"]
            await store.append_events(KEY, [_event("b")], None)
        finally:
            await store.close()


async def test_an_unreachable_database_fails_to_open_without_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = "postgresql://ce:s3cret-pw@127.0.0.1:1/nowhere"
    store = PostgresStore(dsn, connect_timeout=2.0)
    with caplog.at_level(logging.DEBUG), pytest.raises(ConnectionError) as error:
        await store.open()
    assert "s3cret-pw" not in str(error.value)
    assert "postgresql://ce:***@127.0.0.1:1/nowhere" in str(error.value)
    assert "s3cret-pw" not in caplog.text


def test_dsns() -> None:
    assert is_postgres_dsn("postgresql://h/db")
    assert is_postgres_dsn("postgres://h/db")
    assert is_postgres_dsn("POSTGRESQL://h/db")
    assert not is_postgres_dsn("ce.db")
    assert not is_postgres_dsn(":memory:")
    assert not is_postgres_dsn("/var/lib/postgresql/x.db")
    assert mask_dsn("postgresql://u:p@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert mask_dsn("postgres://u@h/db?password=p&sslmode=require") == (
        "postgres://u@h/db?password=***&sslmode=require"
    )
    assert mask_dsn("postgresql://h/db") == "postgresql://h/db"
    assert mask_dsn("/data/ce.db") == "/data/ce.db"
    with pytest.raises(ValueError, match="pool_size"):
        PostgresStore("postgresql://h/db", pool_size=0)


def _all() -> EventFilter:
    return EventFilter()


async def test_the_engine_chooses_it_for_a_postgresql_url(postgres_dsn: str) -> None:
    engine = await open_engine(EngineSettings(db=postgres_dsn, postgres_pool_size=3))
    try:
        assert isinstance(engine.store, PostgresStore)
        assert engine.store.pool.get_max_size() == 3
    finally:
        await engine.close()


async def test_a_caller_cancelled_as_its_commit_returns_is_still_heard(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller of an append is cancelled (a client gone) just as PostgreSQL answers its
    COMMIT: the committed event still reaches the commit listeners (this sidecar's subscribers)
    at once, not only at the change feed's safety-net poll."""
    execute = asyncpg.Connection.execute
    victims: list[asyncio.Task[object]] = []

    async def commit_then_cancel(
        self: asyncpg.Connection, query: str, *args: object, **kwargs: object
    ) -> str:
        done: str = await execute(self, query, *args, **kwargs)
        if query == "COMMIT" and victims:
            victims.pop().cancel()
            await asyncio.sleep(0)
        return done

    store = PostgresStore(postgres_dsn)
    await store.open()
    heard: list[str] = []
    store.add_commit_listener(
        lambda changes: heard.extend(c.event.id for c in changes if isinstance(c, LoggedEvent))
    )
    try:
        await store.create_session(KEY, {}, 1.0)
        monkeypatch.setattr(asyncpg.Connection, "execute", commit_then_cancel)
        task: asyncio.Task[object] = asyncio.create_task(
            store.append_events(KEY, [_event("a")], None)
        )
        victims.append(task)
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(20):  # at once: well before the change feed's 2 s safety-net poll
            if heard:
                break
            await asyncio.sleep(0.01)
        assert heard == ["a"]
        monkeypatch.undo()
        assert [event.id for event in (await store.get_session(KEY, _all())).events] == ["a"]
    finally:
        await store.close()
