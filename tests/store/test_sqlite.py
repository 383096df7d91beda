"""What only the SQLite store promises: persistence, schema, pragmas, batching, crash safety."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from contextengine.core.errors import ContextEngineError
from contextengine.store import EventFilter, SessionKey, SqliteStore
from contextengine.store._migrations import Migration
from contextengine.store.sqlite import _writer as _sqlite_writer
from contextengine.store.sqlite._migrations import load_migrations, migrate, split_statements
from contextengine.store.sqlite._writer import SessionCache, SessionRow, WriteTx, run_batch
from contextengine.v1 import config_pb2, event_pb2

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "u1", "s1")


def ev(event_id: str, *, timestamp: float = 1.0, text: str = "") -> event_pb2.Event:
    event = event_pb2.Event(id=event_id, author="user", invocation_id="inv", timestamp=timestamp)
    if text:
        event.content.parts.add().text = text
    return event


@contextlib.contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection to inspect the file."""
    conn = sqlite3.connect(path)
    try:
        yield conn
    finally:
        conn.close()


@contextlib.asynccontextmanager
async def opened(path: Path, **options: Any) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(path, **options)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "engine.db"


async def test_everything_survives_close_and_reopen(db_path: Path) -> None:
    other = SessionKey("app", "u2", "s9")
    async with opened(db_path) as store:
        await store.create_session(KEY, {"a": 1, "user:b": 2, "app:c": 3}, 10.0)
        await store.create_session(other, {}, 11.0)
        await store.append_events(KEY, [ev("e1", timestamp=12.0), ev("e2", timestamp=13.0)], None)
        compaction = ev("sum", timestamp=14.0)
        compaction.actions.compaction.start_sequence = 1
        compaction.actions.compaction.end_sequence = 2
        await store.append_events(KEY, [compaction], 2)
        config = config_pb2.AppConfig(app_name="app")
        config.context_cache_config.min_tokens = 100
        stored_config = await store.put_app_config(config)
        await store.delete_session(other)

    async with opened(db_path) as store:
        session = await store.get_session(KEY, EventFilter())
        assert session.state == {"a": 1, "user:b": 2, "app:c": 3}
        assert [e.id for e in session.events] == ["e1", "e2", "sum"]
        assert session.events[2].actions.compaction.end_sequence == 2
        assert (session.create_time, session.last_update_time, session.last_sequence) == (
            10.0,
            14.0,
            3,
        )
        assert await store.get_app_config("app") == stored_config
        await pytest_raises_reason("SESSION_NOT_FOUND", store.get_session(other, EventFilter()))
        # the log continues where it stopped, and idempotency spans restarts
        assert (await store.append_events(KEY, [ev("e1", timestamp=12.0)], None)).duplicates == [
            True
        ]
        outcome = await store.append_events(KEY, [ev("e4")], 3)
        assert outcome.events[0].sequence == 4


async def pytest_raises_reason(reason: str, call: Any) -> None:
    with pytest.raises(ContextEngineError) as info:
        await call
    assert info.value.reason == reason


async def test_schema_version_and_wal(db_path: Path) -> None:
    async with opened(db_path) as store:
        diagnostics = await store.diagnostics()
    latest = len(load_migrations())
    assert latest >= 1
    assert diagnostics.schema_version == latest
    assert diagnostics.writer.journal_mode == "wal"
    assert diagnostics.reader.journal_mode == "wal"
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version")]
    assert versions == list(range(1, latest + 1))


async def test_migrations_are_idempotent_on_reopen(db_path: Path) -> None:
    for _ in range(3):
        async with opened(db_path) as store:
            assert (await store.diagnostics()).schema_version == len(load_migrations())
    with raw(db_path) as conn:
        conn.isolation_level = None
        assert conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == len(
            load_migrations()
        )
        assert migrate(conn, load_migrations()) == len(load_migrations())


async def test_a_newer_schema_is_refused(db_path: Path) -> None:
    async with opened(db_path):
        pass
    with raw(db_path) as conn:
        conn.execute("INSERT INTO schema_version VALUES (999, '0999_future.sql', 0)")
        conn.commit()
    store = SqliteStore(db_path)
    with pytest.raises(RuntimeError, match="newer"):
        await store.open()
    await store.close()


def test_migrations_apply_in_order_and_roll_back_on_error(tmp_path: Path) -> None:
    good = Migration(1, "0001_a.sql", "CREATE TABLE a (x);\n-- trailing comment\n")
    bad = Migration(2, "0002_b.sql", "CREATE TABLE b (x);\nINSERT INTO nowhere VALUES (1);")
    with raw(tmp_path / "m.db") as conn:
        conn.isolation_level = None
        with pytest.raises(sqlite3.OperationalError):
            migrate(conn, [good, bad])
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert "a" in tables
        assert "b" not in tables  # the failed migration left nothing behind
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == 1


def test_split_statements() -> None:
    script = "-- header\nCREATE TABLE t (x TEXT DEFAULT 'a;b');\n\nCREATE INDEX i ON t (x);\n"
    assert split_statements(script) == [
        "-- header\nCREATE TABLE t (x TEXT DEFAULT 'a;b');",
        "CREATE INDEX i ON t (x);",
    ]
    with pytest.raises(RuntimeError, match="incomplete"):
        split_statements("CREATE TABLE t (x)")


@pytest.mark.parametrize(("durability", "synchronous"), [("normal", 1), ("full", 2)])
async def test_durability_sets_synchronous(
    db_path: Path, durability: str, synchronous: int
) -> None:
    async with opened(db_path, durability=durability) as store:
        diagnostics = await store.diagnostics()
    assert diagnostics.writer.synchronous == synchronous
    assert diagnostics.writer.foreign_keys is True
    assert diagnostics.writer.busy_timeout_ms > 0
    assert diagnostics.writer.query_only is False
    assert diagnostics.reader.query_only is True


def test_bad_arguments_are_rejected(db_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        SqliteStore(db_path, durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="file"):
        SqliteStore(":memory:")


async def test_close_commits_queued_writes(db_path: Path) -> None:
    store = SqliteStore(db_path)
    await store.open()
    await store.create_session(KEY, {}, 1.0)
    appends = [
        asyncio.create_task(store.append_events(KEY, [ev(f"e{i}")], None)) for i in range(20)
    ]
    await asyncio.sleep(0)  # every append is queued
    await store.close()
    outcomes = await asyncio.gather(*appends)
    assert sorted(o.events[0].sequence for o in outcomes) == list(range(1, 21))
    async with opened(db_path) as reopened:
        assert (await reopened.list_events(KEY, 0, 100))[1] == 20


async def test_use_before_open_and_after_close(db_path: Path) -> None:
    store = SqliteStore(db_path)
    with pytest.raises(RuntimeError, match="open"):
        await store.get_app_config("app")
    await store.open()
    await store.close()
    await pytest_raises_reason("SHUTTING_DOWN", store.get_app_config("app"))
    await pytest_raises_reason("SHUTTING_DOWN", store.delete_session(KEY))


async def test_event_rows(db_path: Path) -> None:
    other = SessionKey("app", "u1", "s2")
    async with opened(db_path) as store:
        await store.create_session(KEY, {}, 1.0)
        await store.create_session(other, {}, 1.0)
        await store.append_events(KEY, [ev("a", timestamp=5.0)], None)
        await store.append_events(other, [ev("b", timestamp=6.0)], None)
        summary = ev("c", timestamp=7.0)
        summary.actions.compaction.end_timestamp = 5.0
        await store.append_events(KEY, [summary], None)
    with raw(db_path) as conn:
        rows = conn.execute(
            "SELECT position, sequence, event_id, invocation_id, author, timestamp, is_compaction,"
            " data FROM events ORDER BY position"
        ).fetchall()
    assert [row[1:7] for row in rows] == [
        (1, "a", "inv", "user", 5.0, 0),
        (1, "b", "inv", "user", 6.0, 0),
        (2, "c", "inv", "user", 7.0, 1),
    ]
    positions = [row[0] for row in rows]
    assert positions == sorted(positions)
    assert len(set(positions)) == 3
    parsed = event_pb2.Event.FromString(rows[2][7])
    assert parsed.sequence == 2
    assert parsed.actions.compaction.end_timestamp == 5.0


async def test_delete_cascades_and_positions_are_never_reused(db_path: Path) -> None:
    async with opened(db_path) as store:
        await store.create_session(KEY, {}, 1.0)
        await store.append_events(KEY, [ev("a"), ev("b")], None)
        await store.delete_session(KEY)
        await store.create_session(KEY, {}, 1.0)
        await store.append_events(KEY, [ev("a")], None)
    with raw(db_path) as conn:
        rows = conn.execute("SELECT position, sequence FROM events").fetchall()
        sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    assert rows == [(3, 1)]
    assert sessions == 1


async def test_concurrent_writes_are_batched(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch_sizes: list[int] = []
    real_run_batch = _sqlite_writer.run_batch

    def counting_run_batch(db: sqlite3.Connection, cache: SessionCache, ops: Any) -> Any:
        batch_sizes.append(len(ops))
        return real_run_batch(db, cache, ops)

    monkeypatch.setattr(_sqlite_writer, "run_batch", counting_run_batch)
    async with opened(db_path) as store:
        await store.create_session(KEY, {}, 1.0)
        await asyncio.gather(*(store.append_events(KEY, [ev(f"e{i}")], None) for i in range(50)))
        _, last = await store.list_events(KEY, 0, 100)
    assert last == 50
    assert sum(batch_sizes) == 51
    assert max(batch_sizes) > 1
    assert len(batch_sizes) < 51


async def test_a_failing_operation_rolls_back_only_itself(db_path: Path) -> None:
    keys = [SessionKey("app", "u1", f"s{n}") for n in range(3)]
    async with opened(db_path) as store:
        for key in keys:
            await store.create_session(key, {}, 1.0)
        await store.append_events(keys[1], [ev("x", text="one")], None)
        results = await asyncio.gather(
            store.append_events(keys[0], [ev("a")], None),
            store.append_events(keys[1], [ev("y"), ev("x", text="two")], None),
            store.append_events(keys[2], [ev("b")], 5),
            store.append_events(keys[2], [ev("c")], None),
            return_exceptions=True,
        )
        assert [type(r).__name__ for r in results] == [
            "AppendOutcome",
            "ContextEngineError",
            "ContextEngineError",
            "AppendOutcome",
        ]
        assert [(await store.list_events(key, 0, 10))[1] for key in keys] == [1, 1, 1]
        assert [e.id for e in (await store.list_events(keys[1], 0, 10))[0]] == ["x"]


def test_run_batch_savepoints(tmp_path: Path) -> None:
    """An operation that wrote before failing is undone; the others commit."""
    with raw(tmp_path / "b.db") as conn:
        conn.isolation_level = None
        conn.execute("CREATE TABLE t (x INTEGER)")

        def write(value: int) -> Any:
            def op(tx: WriteTx) -> int:
                tx.db.execute("INSERT INTO t VALUES (?)", (value,))
                if value == 2:
                    raise ValueError("boom")
                return value

            return op

        results = run_batch(conn, SessionCache(10), [write(1), write(2), write(3)])

        assert results[0] == 1
        assert isinstance(getattr(results[1], "error", None), ValueError)
        assert results[2] == 3
        assert [row[0] for row in conn.execute("SELECT x FROM t ORDER BY x")] == [1, 3]
        assert not conn.in_transaction


def test_run_batch_of_one_failing_operation_writes_nothing(tmp_path: Path) -> None:
    """A lone operation runs without a savepoint: its failure rolls the transaction back."""
    with raw(tmp_path / "b.db") as conn:
        conn.isolation_level = None
        conn.execute("CREATE TABLE t (x INTEGER)")

        def failing(tx: WriteTx) -> int:
            tx.db.execute("INSERT INTO t VALUES (1)")
            raise ValueError("boom")

        def writing(tx: WriteTx) -> int:
            tx.db.execute("INSERT INTO t VALUES (2)")
            return 2

        (failed,) = run_batch(conn, SessionCache(10), [failing])
        assert isinstance(getattr(failed, "error", None), ValueError)
        assert not conn.in_transaction
        assert run_batch(conn, SessionCache(10), [writing]) == [2]
        assert [row[0] for row in conn.execute("SELECT x FROM t")] == [2]


async def test_a_lone_failing_write_leaves_the_session_as_it_was(db_path: Path) -> None:
    async with opened(db_path) as store:
        await store.create_session(KEY, {}, 1.0)
        await store.append_events(KEY, [ev("a")], None)
        await pytest_raises_reason(
            "SEQUENCE_MISMATCH", store.append_events(KEY, [ev("b")], expected_last_sequence=0)
        )
        outcome = await store.append_events(KEY, [ev("c")], expected_last_sequence=1)
        assert [e.sequence for e in outcome.events] == [2]
        events, last = await store.list_events(KEY, 0, 10)
        assert ([e.id for e in events], last) == (["a", "c"], 2)


def _wal_size_and_frames(db_path: Path) -> tuple[int, int]:
    """The WAL file's size and the frames it holds (a PASSIVE checkpoint reports them)."""
    size = Path(f"{db_path}-wal").stat().st_size
    with raw(db_path) as conn:
        frames = int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    return size, frames


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_the_wal_is_checkpointed_while_appends_go_on(db_path: Path, durability: str) -> None:
    """With durability=normal the commits run on the event loop and the WAL's checkpoints on a
    connection of their own; the WAL is still copied into the file as the log grows, instead of
    holding every commit since the store opened."""
    async with opened(db_path, durability=durability) as store:
        await store.create_session(KEY, {}, 1.0)
        for n in range(600):
            await store.append_events(KEY, [ev(f"e{n}", text="x" * 200)], None)
        wal, log_frames = _wal_size_and_frames(db_path)
        assert (await store.list_events(KEY, 0, 1000))[1] == 600
    # 600 commits of several pages each, never checkpointed, would make a WAL of thousands
    # of frames (over 10 MB).
    assert log_frames < 1500
    assert wal < 8 * 1024 * 1024


def test_session_cache_is_bounded() -> None:
    cache = SessionCache(2)
    for n in range(3):
        cache.put(SessionKey("a", "u", str(n)), SessionRow(n, 0))
    assert cache.get(SessionKey("a", "u", "0")) is None
    assert cache.get(SessionKey("a", "u", "2")) == SessionRow(2, 0)


_CRASHER = """
import asyncio, sys
from contextengine.store import SessionKey, SqliteStore
from contextengine.v1 import event_pb2

async def main() -> None:
    store = SqliteStore(sys.argv[1])
    await store.open()
    key = SessionKey("app", "u", "s")
    await store.create_session(key, {}, 1.0)

    async def appender(task: int) -> None:
        for i in range(100_000):
            event = event_pb2.Event(id=f"{task}-{i}", author="user", timestamp=1.0)
            await store.append_events(key, [event], None)
            print(event.id, flush=True)

    await asyncio.gather(*(appender(task) for task in range(4)))

asyncio.run(main())
"""


@pytest.mark.slow
async def test_acknowledged_appends_survive_kill_9(db_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CRASHER,
        str(db_path),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    acknowledged: list[str] = []
    try:
        while len(acknowledged) < 400:
            line = await asyncio.wait_for(process.stdout.readline(), timeout=30)
            assert line, "the writer process ended early"
            acknowledged.append(line.decode().strip())
    finally:
        process.kill()  # SIGKILL: no cleanup, no close
        rest, _ = await process.communicate()
    acknowledged.extend(line for line in rest.decode().split() if line)

    async with opened(db_path) as store:
        events, last = await store.list_events(SessionKey("app", "u", "s"), 0, 1_000_000)
    stored = [event.id for event in events]
    assert set(acknowledged) <= set(stored)
    assert [event.sequence for event in events] == list(range(1, last + 1))


async def test_a_database_from_before_session_configs_is_upgraded(db_path: Path) -> None:
    """Sessions created before migration 0003 keep working and have no configuration."""
    with raw(db_path) as conn:
        conn.isolation_level = None
        migrate(conn, load_migrations()[:2])
        conn.execute(
            "INSERT INTO sessions (app_name, user_id, session_id, state, create_time,"
            " update_time, last_sequence) VALUES ('app', 'u', 'old', '{}', 1.0, 1.0, 0)"
        )
    key = SessionKey("app", "u", "old")
    async with opened(db_path) as store:
        assert (await store.diagnostics()).schema_version == len(load_migrations())
        assert await store.get_session_config(key) == config_pb2.SessionConfig()
        config = config_pb2.SessionConfig()
        config.events_compaction_config.token_threshold = 100
        config.events_compaction_config.event_retention_size = 2
        await store.put_session_config(key, config)
    async with opened(db_path) as store:
        stored = await store.get_session_config(key)
    assert stored.events_compaction_config.token_threshold == 100
