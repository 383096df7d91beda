"""The store's side of the storage faults, in-process and without root.

A full disk is simulated with SQLite's ``max_page_count`` (the database may not grow past it:
SQLITE_FULL, as on a full disk) and a file system that reports no free bytes (what the recovery
probe checks besides its own one-page write); a read-only file with a connection opened
read-only. ``test_storage`` fills a real (tmpfs) disk.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.errors import Code, ContextEngineError as EngineError
from contextengine.settings import ServerSettings
from contextengine.store import EventFilter, SessionKey
from contextengine.store.sqlite import DatabaseLockedError, SqliteStore
from contextengine.store.sqlite._lock import DatabaseLock
from contextengine.store.sqlite._writer import WriteTx, storage_error
from contextengine.transport import ContextEngineServer
from contextengine.v1 import event_pb2
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

KEY = SessionKey("app", "u1", "s1")
PADDING = "p" * 20_000


def _event(event_id: str) -> event_pb2.Event:
    return text_event(PADDING, event_id=event_id)


def _limit_pages(extra: int | None) -> Callable[[WriteTx], None]:
    """A write op setting ``max_page_count`` to the current size plus ``extra`` (None: lifts
    it)."""

    def op(tx: WriteTx) -> None:
        (pages,) = tx.db.execute("PRAGMA page_count").fetchone()
        limit = 2**31 - 2 if extra is None else pages + extra
        tx.db.execute(f"PRAGMA max_page_count = {limit}")

    return op


async def test_a_second_store_on_the_same_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ce.db"
    first = SqliteStore(path)
    await first.open()
    try:
        second = SqliteStore(tmp_path / "." / "ce.db")
        with pytest.raises(DatabaseLockedError, match=r"pid \d+ on ") as raised:
            await second.open()
        assert raised.value.lock_file == f"{path}.lock"
        await first.create_session(KEY, {}, 1.0)  # the first goes on working
    finally:
        await first.close()
    await second.open()  # free once the first is closed
    try:
        assert (await second.get_session(KEY, EventFilter(num_recent_events=0))).key == KEY
    finally:
        await second.close()


async def test_a_failed_open_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "ce.db"
    path.write_bytes(b"not a database, not at all" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        await SqliteStore(path).open()
    lock = DatabaseLock(path)
    lock.acquire()
    lock.release()


def test_storage_errors_are_mapped(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    readonly = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        with pytest.raises(sqlite3.OperationalError) as raised:
            readonly.execute("INSERT INTO t VALUES (1)")
    finally:
        readonly.close()
    problem = storage_error(raised.value)
    assert problem is not None
    assert (problem.reason, problem.code) == ("STORAGE_UNAVAILABLE", Code.UNAVAILABLE)
    assert problem.metadata == {"sqlite_error": "SQLITE_READONLY"}
    assert storage_error(sqlite3.IntegrityError("UNIQUE constraint failed")) is None
    assert storage_error(ValueError("no")) is None


def test_storage_errors_without_codes_are_known_by_sqlites_text() -> None:
    """Python 3.10's sqlite3 errors carry no ``sqlite_errorcode``: SQLite's text names the code."""
    full = storage_error(sqlite3.OperationalError("database or disk is full"))
    assert full is not None
    assert (full.reason, full.metadata) == ("STORAGE_FULL", {"sqlite_error": "SQLITE_FULL"})
    locked = storage_error(sqlite3.OperationalError("database is locked"))
    assert locked is not None
    assert (locked.reason, locked.metadata) == (
        "STORAGE_UNAVAILABLE",
        {"sqlite_error": "SQLITE_BUSY"},
    )
    assert storage_error(sqlite3.OperationalError("no such table: t")) is None


class Disk:
    """The free bytes the store is told of."""

    def __init__(self) -> None:
        self.free = 1 << 30

    def fill(self) -> None:
        self.free = 0

    def free_space(self) -> None:
        self.free = 1 << 30


async def test_a_full_store_fails_writes_and_recovers(tmp_path: Path) -> None:
    disk = Disk()
    store = SqliteStore(tmp_path / "ce.db", probe_seconds=0.05, free_bytes=lambda: disk.free)
    heard: list[str | None] = []
    await store.open()
    try:
        store.add_storage_listener(lambda p: heard.append(None if p is None else p.reason))
        await store.create_session(KEY, {}, 1.0)
        await store.write(_limit_pages(8))
        disk.fill()
        acknowledged: list[str] = []
        refused: EngineError | None = None
        for n in range(100):
            try:
                await store.append_events(KEY, [_event(f"e{n}")], None)
            except EngineError as error:
                refused = error
                break
            acknowledged.append(f"e{n}")
        assert refused is not None
        assert refused.reason == "STORAGE_FULL"
        assert refused.metadata["sqlite_error"].startswith("SQLITE_FULL")
        assert heard == ["STORAGE_FULL"]
        await asyncio.sleep(0.2)  # probes fail while it is full: nothing more is heard
        assert heard == ["STORAGE_FULL"]
        events, last = await store.list_events(KEY, 0, 1000)
        assert [e.id for e in events] == acknowledged
        assert last == len(acknowledged)

        await store.write(_limit_pages(None))
        disk.free_space()
        for _ in range(100):
            if heard[-1] is None:
                break
            await asyncio.sleep(0.02)
        assert heard == ["STORAGE_FULL", None]
        assert store.storage_problem is None
        outcome = await store.append_events(KEY, [_event("after")], None)
        assert outcome.events[0].sequence == len(acknowledged) + 1
    finally:
        await store.close()


async def _health(channel: grpc.aio.Channel) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5.0)
    return int(reply.status)


async def _until(check: Callable[[], Awaitable[bool]], seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if await check():
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"not within {seconds} s")


async def test_health_follows_the_store(tmp_path: Path) -> None:
    disk = Disk()
    store = SqliteStore(tmp_path / "ce.db", probe_seconds=0.05, free_bytes=lambda: disk.free)
    server = ContextEngineServer(replace(ServerSettings(), listen="127.0.0.1:0"), store=store)
    await server.start()
    try:
        async with ContextEngineClient(server.target, attempts=1) as client:
            session = await client.create_session("app", "u1", "s1")
            await store.write(_limit_pages(4))
            disk.fill()
            refused: ContextEngineError | None = None
            for n in range(100):
                try:
                    await client.append_event("app", "u1", session.id, _event(f"e{n}"))
                except ContextEngineError as error:
                    refused = error
                    break
            assert refused is not None
            assert refused.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refused.reason == "STORAGE_FULL"
            serving = health_pb2.HealthCheckResponse.SERVING

            async def not_serving() -> bool:
                return bool(await _health(client.channel) != serving)

            async def serving_again() -> bool:
                return bool(await _health(client.channel) == serving)

            await _until(not_serving)
            await asyncio.sleep(0.2)  # probes fail meanwhile: no flapping
            assert await not_serving()
            await store.write(_limit_pages(None))
            disk.free_space()
            await _until(serving_again)
            await client.append_event("app", "u1", session.id, _event("after"))
    finally:
        await server.stop(grace=1.0)
