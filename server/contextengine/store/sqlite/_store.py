"""``SqliteStore``: the default event store, one SQLite file in WAL mode.

One writer connection commits batches of concurrent writes (``_writer``; with
``durability="normal"`` on the event loop's thread, its WAL checkpoints on a connection of their
own); a separate read connection serves reads from committed snapshots. ``durability="normal"`` (``synchronous=NORMAL``)
keeps every acknowledged write across a crash of the process (kill -9); ``"full"``
(``synchronous=FULL``) also across a crash of the machine, at the cost of an fsync per commit.

One process at a time: ``open`` takes an exclusive lock on ``<db>.lock`` (``_lock``) and
fails with ``DatabaseLockedError`` while another process holds it. When the file cannot be
written (disk full, I/O errors) writes fail with STORAGE_FULL / STORAGE_UNAVAILABLE, one ERROR
line is logged, and the storage listeners hear of it, and hear again when a write succeeds.
"""

from __future__ import annotations

import copy
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, get_args

import aiosqlite

from contextengine.core.errors import ContextEngineError
from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.store import _secrets
from contextengine.store._append import copy_event
from contextengine.store._base import (
    AppendOutcome,
    CommitListener,
    ConfigListener,
    EventFilter,
    LoggedEvent,
    SessionKey,
    StateAt,
    StorageListener,
    StoredSession,
)
from contextengine.store._listeners import CommitListeners
from contextengine.store.sqlite import _measures as measures_table, _ops as ops, _reads as reads
from contextengine.store.sqlite._conn import ConnectionSettings, Durability, connect, run, settings
from contextengine.store.sqlite._lock import DatabaseLock, DatabaseLockedError
from contextengine.store.sqlite._migrations import load_migrations, migrate, schema_version
from contextengine.store.sqlite._writer import BatchWriter, WriteTx, storage_error
from contextengine.v1 import config_pb2, event_pb2

T = TypeVar("T")

__all__ = ["DatabaseLockedError", "SqliteDiagnostics", "SqliteStore", "StorageListener"]

_LOG = logging.getLogger("contextengine.store")


@dataclass(frozen=True)
class SqliteDiagnostics:
    schema_version: int
    writer: ConnectionSettings
    reader: ConnectionSettings


class SqliteStore:
    """An ``EventStore`` in a SQLite file (not ``:memory:``: the two connections must share it)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        clock: Callable[[], float] = time.time,
        max_batch: int = 256,
        probe_seconds: float = 1.0,
        free_bytes: Callable[[], int] | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        """``probe_seconds``: while the file cannot be written, how often a probe write checks
        whether it can again; ``free_bytes``: the room left on the file's file system (the
        default asks the file system; tests simulate a full disk with it)."""
        if os.fspath(path) in ("", ":memory:"):
            raise ValueError("SqliteStore needs a file: its reader and writer share it")
        if durability not in get_args(Durability):
            raise ValueError(f"durability must be 'normal' or 'full', not {durability!r}")
        self._path = path
        self._durability: Durability = durability
        self._clock = clock
        self._max_batch = max_batch
        self._writer: BatchWriter | None = None
        self._reader: aiosqlite.Connection | None = None
        self._listeners = CommitListeners()
        self._probe_seconds = probe_seconds
        self._free_bytes = free_bytes or self._file_system_free_bytes
        self._storage_listeners: list[StorageListener] = []
        self._lock = DatabaseLock(path)
        self._closed = False
        #: told of every write's commit (its latency, as the caller waits for it) in a span
        self.telemetry = telemetry

    async def open(self) -> None:
        """Opens (and migrates) the file; ``DatabaseLockedError`` while another process (or
        another open store) has it."""
        if self._writer is not None:
            return
        self._lock.acquire()
        # Commits that do not wait for the disk run on the event loop's thread, and the WAL's
        # checkpoints, which do, on a connection of their own (``_writer``).
        direct = self._durability == "normal"
        checkpointer: aiosqlite.Connection | None = None
        try:
            conn = await connect(
                self._path, durability=self._durability, read_only=False, any_thread=direct
            )
            try:
                await run(conn, partial(migrate, migrations=load_migrations()))
                if direct:
                    await run(conn, _no_autocheckpoint)
                    checkpointer = await connect(
                        self._path, durability=self._durability, read_only=False
                    )
                self._reader = await connect(
                    self._path, durability=self._durability, read_only=True
                )
            except BaseException:
                if checkpointer is not None:
                    await checkpointer.close()
                await conn.close()
                raise
        except BaseException:
            self._lock.release()
            raise
        self._writer = BatchWriter(
            conn,
            direct=direct,
            checkpointer=checkpointer,
            max_batch=self._max_batch,
            on_commit=self._listeners.notify,
            on_storage=self._storage_changed,
            probe_seconds=self._probe_seconds,
            free_bytes=self._free_bytes,
        )
        self._writer.start()
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        writer, reader = self._writer, self._reader
        self._writer = self._reader = None
        try:
            if writer is not None:
                await writer.close()
        finally:
            try:
                if reader is not None:
                    await reader.close()
            finally:
                if writer is not None:
                    self._lock.release()

    @property
    def lock_path(self) -> str:
        """The lock file held while the store is open."""
        return self._lock.path

    @property
    def sole_writer(self) -> bool:
        """True: one sidecar holds the file (``<db>.lock``) and writes it through one writer."""
        return True

    @property
    def storage_problem(self) -> ContextEngineError | None:
        """Why the store cannot write (STORAGE_FULL / STORAGE_UNAVAILABLE), or None."""
        return None if self._writer is None else self._writer.storage_problem

    def add_config_listener(self, listener: ConfigListener) -> Callable[[], None]:
        """``listener`` is never called: no other process shares this store."""
        return _no_listener

    def compaction_lock(self, key: SessionKey) -> AbstractAsyncContextManager[None]:
        """Nothing to hold: one process opens this store, and its compactor serialises a
        session's compactions itself."""
        return nullcontext()

    def add_storage_listener(self, listener: StorageListener) -> Callable[[], None]:
        """Calls ``listener`` (on the event loop) with the problem when the store stops being
        writable and with None when it is writable again; returns a function removing it."""
        self._storage_listeners.append(listener)
        return lambda: self._storage_listeners.remove(listener)

    def _file_system_free_bytes(self) -> int:
        stat = os.statvfs(os.path.dirname(os.path.abspath(self.path)))
        return stat.f_bavail * stat.f_frsize

    def _storage_changed(self, problem: ContextEngineError | None) -> None:
        if problem is not None:
            _LOG.error(
                "storage: %s cannot be written (%s, %s): writes fail with %s / %s and health is "
                "NOT_SERVING until a probe write succeeds (every %.0f s); acknowledged events "
                "are safe and reads go on",
                self.path,
                problem.metadata.get("sqlite_error", "?"),
                "the disk is full" if problem.reason == "STORAGE_FULL" else problem.message,
                problem.code.value,
                problem.reason,
                self._probe_seconds,
            )
        else:
            _LOG.warning("storage: %s can be written again; health is SERVING", self.path)
        for listener in list(self._storage_listeners):
            listener(problem)

    @property
    def path(self) -> str:
        """The database file."""
        return os.fspath(self._path)

    @property
    def durability(self) -> Durability:
        return self._durability

    async def write(self, op: Callable[[WriteTx], T]) -> T:
        """Runs ``op`` (a synchronous function of the writer's transaction) in the single writer,
        like the store's own writes, and returns its result once committed. For modules that keep
        their own tables in this file (long-term memory); ``op`` records no changes."""
        return await self._write(op)

    async def diagnostics(self) -> SqliteDiagnostics:
        """The schema version and the pragmas in effect on both connections."""
        writer = self._open_writer()
        version = await writer.call(schema_version)
        return SqliteDiagnostics(
            schema_version=version,
            writer=await writer.call(settings),
            reader=await self._read(settings),
        )

    async def create_session(
        self,
        key: SessionKey,
        state: dict[str, Any],
        now: float,
        *,
        config: config_pb2.SessionConfig | None = None,
    ) -> StoredSession:
        owned: config_pb2.SessionConfig | None = None
        if config is not None:
            owned = config_pb2.SessionConfig()
            owned.CopyFrom(config)
        return await self._write(
            partial(ops.create_session, key=key, state=copy.deepcopy(state), now=now, config=owned)
        )

    async def get_session(self, key: SessionKey, flt: EventFilter) -> StoredSession:
        return await self._read(partial(reads.get_session, key=key, flt=flt))

    async def list_sessions(
        self,
        app_name: str,
        user_id: str | None,
        limit: int,
        after: tuple[str, str] | None,
    ) -> list[StoredSession]:
        return await self._read(
            partial(
                reads.list_sessions, app_name=app_name, user_id=user_id, limit=limit, after=after
            )
        )

    async def list_sessions_by_update(
        self,
        app_name: str,
        user_id: str | None,
        limit: int,
        after: tuple[float, str, str] | None,
    ) -> list[StoredSession]:
        return await self._read(
            partial(
                reads.list_sessions_by_update,
                app_name=app_name,
                user_id=user_id,
                limit=limit,
                after=after,
            )
        )

    async def list_app_names(self, limit: int, after: str | None) -> list[str]:
        return await self._read(partial(reads.list_app_names, limit=limit, after=after))

    async def list_user_ids(self, app_name: str, limit: int, after: str | None) -> list[str]:
        return await self._read(
            partial(reads.list_user_ids, app_name=app_name, limit=limit, after=after)
        )

    async def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._read(partial(reads.get_user_state, app_name=app_name, user_id=user_id))

    async def delete_session(self, key: SessionKey) -> bool:
        return await self._write(partial(ops.delete_session, key=key))

    async def append_events(
        self,
        key: SessionKey,
        events: Sequence[event_pb2.Event],
        expected_last_sequence: int | None,
    ) -> AppendOutcome:
        return await self._write(
            partial(
                ops.append_events,
                key=key,
                events=[copy_event(event) for event in events],
                expected_last_sequence=expected_last_sequence,
                now=self._clock(),
            )
        )

    async def list_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[event_pb2.Event], int]:
        return await self._read(
            partial(reads.list_events, key=key, after_sequence=after_sequence, limit=limit)
        )

    def add_commit_listener(self, listener: CommitListener) -> Callable[[], None]:
        return self._listeners.add(listener)

    async def list_logged_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[LoggedEvent], int]:
        return await self._read(
            partial(reads.list_logged_events, key=key, after_sequence=after_sequence, limit=limit)
        )

    async def list_events_after_position(
        self, app_name: str, user_id: str | None, after_position: int, limit: int
    ) -> list[LoggedEvent]:
        return await self._read(
            partial(
                reads.list_events_after_position,
                app_name=app_name,
                user_id=user_id,
                after_position=after_position,
                limit=limit,
            )
        )

    async def last_position(self) -> int:
        return await self._read(reads.last_position)

    async def get_state(self, key: SessionKey) -> StateAt:
        return await self._read(partial(reads.get_state, key=key))

    async def get_app_config(self, app_name: str) -> config_pb2.AppConfig | None:
        return await self._read(partial(reads.get_app_config, app_name=app_name))

    async def get_content_measures(
        self, key: SessionKey, counter: str, digests: Collection[bytes] | None = None
    ) -> dict[bytes, tuple[int, int]]:
        return await self._read(
            partial(
                measures_table.get_content_measures,
                key=key,
                counter=counter,
                digests=None if digests is None else list(digests),
            )
        )

    async def put_content_measures(
        self, key: SessionKey, counter: str, measures: Mapping[bytes, tuple[int, int]]
    ) -> None:
        await self._write(
            partial(
                measures_table.put_content_measures,
                key=key,
                counter=counter,
                measures=dict(measures),
            )
        )

    async def put_app_config(self, config: config_pb2.AppConfig) -> config_pb2.AppConfig:
        owned = config_pb2.AppConfig()
        owned.CopyFrom(config)
        return await self._write(partial(ops.put_app_config, config=owned, now=self._clock()))

    async def get_session_config(self, key: SessionKey) -> config_pb2.SessionConfig:
        return await self._read(partial(reads.get_session_config, key=key))

    async def put_session_config(
        self, key: SessionKey, config: config_pb2.SessionConfig
    ) -> config_pb2.SessionConfig:
        owned = config_pb2.SessionConfig()
        owned.CopyFrom(config)
        return await self._write(
            partial(ops.put_session_config, key=key, config=owned, now=self._clock())
        )

    async def page_token_key(self) -> bytes:
        return await self._read(_secrets.read_page_token_key)

    def _open_writer(self) -> BatchWriter:
        if self._writer is None:
            raise _not_open(self._closed)
        return self._writer

    async def _write(self, op: Callable[[WriteTx], T]) -> T:
        writer = self._open_writer()
        telemetry = self.telemetry
        if telemetry is NO_TELEMETRY:
            return await writer.submit(op)
        start = time.perf_counter()
        ok = False
        try:
            with telemetry.span("store.commit", {"db.system": "sqlite"}):
                result = await writer.submit(op)
            ok = True
            return result
        finally:
            telemetry.store_commit(time.perf_counter() - start, ok)

    async def _read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        if self._reader is None:
            raise _not_open(self._closed)
        try:
            return await run(self._reader, query)
        except sqlite3.Error as error:
            problem = storage_error(error)
            if problem is None:
                raise
            raise problem from error


def _not_open(closed: bool) -> Exception:
    if closed:
        return ContextEngineError("SHUTTING_DOWN", "the store is closed")
    return RuntimeError("SqliteStore.open() has not been called")


def _no_autocheckpoint(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA wal_autocheckpoint = 0").fetchall()


def _no_listener() -> None:
    """What removing a configuration listener of a store no other process shares does."""
