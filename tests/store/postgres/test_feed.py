"""Two ``PostgresStore``s on one database in one process: each one's commit listeners hear the
other's commits as their own, exactly once and in position order (``store.postgres._feed``), and its
configuration listeners hear the other's configuration updates."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from contextengine.store import (
    Change,
    ConfigChanged,
    LoggedEvent,
    SessionCreated,
    SessionDeleted,
    SessionKey,
)
from contextengine.store.postgres import PostgresStore
from contextengine.v1 import config_pb2, event_pb2
from tests.pg_server import PostgresServer

pytestmark = [pytest.mark.scaling, pytest.mark.timeout(60)]

KEY = SessionKey("app", "u", "s")


def _event(text: str, **delta: str) -> event_pb2.Event:
    event = event_pb2.Event(id=text, author="user", invocation_id="i", timestamp=1.0)
    event.content.role = "user"
    event.content.parts.add().text = text
    for name, value in delta.items():
        event.actions.state_delta[name.replace("__", ":")] = value
    return event


class Heard:
    """What a store's listeners were told."""

    def __init__(self, store: PostgresStore) -> None:
        self.changes: list[Change] = []
        self.batches = 0
        self.configs: list[ConfigChanged] = []
        store.add_commit_listener(self._on_commit)
        store.add_config_listener(self.configs.append)

    def _on_commit(self, changes: Sequence[Change]) -> None:
        self.batches += 1
        self.changes.extend(changes)

    def positions(self) -> list[int]:
        return [c.position for c in self.changes if isinstance(c, LoggedEvent)]

    async def until(self, condition: object, seconds: float = 10.0) -> None:
        assert callable(condition)
        async with asyncio.timeout(seconds):
            while not condition():  # noqa: ASYNC110 - a condition, not an event
                await asyncio.sleep(0.005)


@pytest.fixture
async def pair(postgres_dsn: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    a, b = PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)
    await a.open()
    await b.open()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def test_other_stores_commits_reach_the_listeners_once_in_order(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = pair
    heard_a, heard_b = Heard(a), Heard(b)
    await a.create_session(KEY, {"app:x": "1"}, 1.0)
    other = SessionKey("app", "u2", "t")
    await b.create_session(other, {}, 1.0)

    async def writes(store: PostgresStore, name: str, key: SessionKey, n: int) -> None:
        for i in range(n):
            await store.append_events(key, [_event(f"{name}-{key.session_id}-{i}")], None)

    # Both stores append at once, to each other's sessions too: local and remote interleave.
    await asyncio.gather(
        writes(a, "a", KEY, 40), writes(b, "b", KEY, 40), writes(b, "b", other, 40)
    )
    for heard in (heard_a, heard_b):
        await heard.until(lambda h=heard: len(h.positions()) >= 120)
        positions = heard.positions()
        assert positions == sorted(set(positions)), "exactly once, in position order"
        assert len(positions) == 120
    created = [c for c in heard_b.changes if isinstance(c, SessionCreated) and c.key == KEY]
    assert created == [SessionCreated(KEY, {"app:x": "1"}, created[0].position)]
    # A creation without shared state takes no position: told where it was made only.
    assert [c.key for c in heard_a.changes if isinstance(c, SessionCreated)] == [KEY]
    assert [c.key for c in heard_b.changes if isinstance(c, SessionCreated)] == [other, KEY]
    assert heard_a.positions() == heard_b.positions()
    # The events told by the other store are the recorded ones (sequence and all).
    logged, _ = await a.list_logged_events(KEY, 0, 100)
    told = [c for c in heard_b.changes if isinstance(c, LoggedEvent) and c.key == KEY]
    assert told == logged


async def test_deletions_and_configurations_are_told(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = pair
    heard_b = Heard(b)
    await a.create_session(KEY, {}, 1.0)
    await a.put_app_config(config_pb2.AppConfig(app_name="app"))
    await a.put_session_config(KEY, config_pb2.SessionConfig())
    await a.delete_session(KEY)
    await heard_b.until(lambda: any(isinstance(c, SessionDeleted) for c in heard_b.changes))
    await heard_b.until(lambda: len(heard_b.configs) == 2)
    assert heard_b.configs == [ConfigChanged("app"), ConfigChanged("app", KEY)]
    # (A creation without shared state takes no position: another store is not told of it.)
    assert heard_b.changes == [SessionDeleted(KEY)]


async def test_a_lost_listening_connection_is_made_again_and_nothing_is_missed(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = pair
    heard_b = Heard(b)
    await a.create_session(KEY, {}, 1.0)
    feed = b.feed
    assert feed is not None
    assert feed.listening
    # The server ends B's listening connection (an administrator, a failover, a proxy).
    await a.run(
        lambda conn: conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE query LIKE 'LISTEN%' OR query = 'SELECT 1'"
        )
    )
    for i in range(20):
        await a.append_events(KEY, [_event(f"e{i}")], None)
    await heard_b.until(lambda: len(heard_b.positions()) == 20)
    await heard_b.until(lambda: feed.reconnects >= 1 and feed.listening)
    assert ConfigChanged(None) in heard_b.configs  # caches dropped: notifications were missed
    positions = heard_b.positions()
    assert positions == sorted(set(positions))


async def test_an_unreachable_database_is_a_storage_problem_without_any_traffic(
    postgres_dsn: str, postgres_server: PostgresServer
) -> None:
    """Nobody calls the store: the feed's listening connection ends, its reads fail, and the
    store reports STORAGE_UNAVAILABLE (the sidecar's readiness follows); once the server is back
    the problem clears by itself, and what was committed meanwhile elsewhere is told."""
    store = PostgresStore(postgres_dsn, probe_seconds=0.2)
    await store.open()
    heard = Heard(store)
    problems: list[object] = []
    store.add_storage_listener(problems.append)
    try:
        await asyncio.to_thread(postgres_server.stop, "fast")
        try:
            await heard.until(lambda: store.storage_problem is not None)
            assert store.storage_problem is not None
            assert store.storage_problem.reason == "STORAGE_UNAVAILABLE"
        finally:
            assert await asyncio.to_thread(postgres_server.start_again) is None
        await heard.until(lambda: store.storage_problem is None, seconds=20)
        other = PostgresStore(postgres_dsn)
        await other.open()
        try:
            await other.create_session(KEY, {}, 1.0)
            await other.append_events(KEY, [_event("after")], None)
        finally:
            await other.close()
        await heard.until(lambda: len(heard.positions()) == 1, seconds=20)
        assert problems[-1] is None
    finally:
        await store.close()
