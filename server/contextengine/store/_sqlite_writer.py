"""The single writer: batches concurrent write operations into one transaction per batch.

Callers ``submit`` an operation (a synchronous function of a ``WriteTx``) and wait. One task takes
everything queued (up to ``max_batch``), and on the connection's thread runs it inside one
``BEGIN IMMEDIATE`` transaction, each operation under its own SAVEPOINT so that a failing operation
rolls back only itself, then COMMITs once. Only after the commit are the callers answered, so an
acknowledged write is durable. If the commit itself fails, every operation of the batch fails.

Operations record what they changed (``WriteTx.changes``); right after a COMMIT, on the event loop,
the changes of the batch's successful operations are handed to ``on_commit`` in commit order (the
store's commit listeners), in the same synchronous step that resolves the callers' futures, so
before any caller runs again.

The writer is the only writer of the file, so it keeps each session's row id and last sequence in
memory (``SessionCache``), read from the database only on a miss.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import aiosqlite

from contextengine.errors import ContextEngineError
from contextengine.store._base import Change, SessionKey
from contextengine.store._sqlite_conn import run

T = TypeVar("T")


@dataclass(frozen=True)
class SessionRow:
    pk: int
    last_sequence: int


class SessionCache:
    """Committed ``SessionRow``s by key, least recently used dropped beyond ``capacity``.
    Only touched on the connection's thread."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._rows: OrderedDict[SessionKey, SessionRow] = OrderedDict()

    def get(self, key: SessionKey) -> SessionRow | None:
        row = self._rows.get(key)
        if row is not None:
            self._rows.move_to_end(key)
        return row

    def put(self, key: SessionKey, row: SessionRow | None) -> None:
        if row is None:
            self._rows.pop(key, None)
            return
        self._rows[key] = row
        self._rows.move_to_end(key)
        while len(self._rows) > self._capacity:
            self._rows.popitem(last=False)

    def clear(self) -> None:
        self._rows.clear()


class BatchSessions:
    """Session rows as seen inside a batch: the current operation's changes, then the changes of
    the batch's earlier successful operations, then the cache, then the database."""

    def __init__(self, db: sqlite3.Connection, cache: SessionCache) -> None:
        self._db = db
        self._cache = cache
        self._batch: dict[SessionKey, SessionRow | None] = {}
        self._op: dict[SessionKey, SessionRow | None] = {}

    def get(self, key: SessionKey) -> SessionRow | None:
        for changes in (self._op, self._batch):
            if key in changes:
                return changes[key]
        row = self._cache.get(key)
        if row is None:
            found = self._db.execute(
                "SELECT id, last_sequence FROM sessions"
                " WHERE app_name = ? AND user_id = ? AND session_id = ?",
                (key.app_name, key.user_id, key.session_id),
            ).fetchone()
            if found is not None:
                row = SessionRow(pk=found[0], last_sequence=found[1])
                # Untouched by this batch, so this is the committed row.
                self._cache.put(key, row)
        return row

    def set(self, key: SessionKey, row: SessionRow | None) -> None:
        """Records the current operation's change (None: the session no longer exists)."""
        self._op[key] = row

    def end_operation(self, *, succeeded: bool) -> None:
        if succeeded:
            self._batch.update(self._op)
        self._op.clear()

    def publish(self) -> None:
        """After COMMIT: the batch's changes become the cache's truth."""
        for key, row in self._batch.items():
            self._cache.put(key, row)


@dataclass(frozen=True)
class WriteTx:
    """What a write operation works with: the connection, inside a transaction and a savepoint."""

    db: sqlite3.Connection
    sessions: BatchSessions
    #: what the operation changed, in order; notified only if it commits
    changes: list[Change] = field(default_factory=list)


WriteOp = Callable[[WriteTx], Any]


@dataclass(frozen=True)
class _Failed:
    error: Exception


@dataclass(frozen=True)
class _Recorded:
    """An operation's result with the changes it recorded."""

    result: Any
    changes: list[Change]


def _recording(op: WriteOp, tx: WriteTx) -> _Recorded:
    """Runs ``op`` with a change list of its own, so that a rolled-back operation's changes are
    dropped with it."""
    own = WriteTx(tx.db, tx.sessions)
    return _Recorded(op(own), own.changes)


def run_batch(
    db: sqlite3.Connection, cache: SessionCache, ops: Sequence[WriteOp]
) -> list[Any | _Failed]:
    """Runs ``ops`` in one transaction (on the connection's thread); one result per operation.
    Raises, with everything rolled back, when the transaction as a whole fails."""
    sessions = BatchSessions(db, cache)
    tx = WriteTx(db, sessions)
    results: list[Any | _Failed] = []
    db.execute("BEGIN IMMEDIATE")
    try:
        for op in ops:
            db.execute("SAVEPOINT op")
            try:
                result = op(tx)
            except Exception as error:
                if not db.in_transaction:
                    raise  # SQLite rolled the whole transaction back (I/O error, disk full, ...)
                db.execute("ROLLBACK TO op")
                db.execute("RELEASE op")
                sessions.end_operation(succeeded=False)
                results.append(_Failed(error))
            else:
                db.execute("RELEASE op")
                sessions.end_operation(succeeded=True)
                results.append(result)
        db.execute("COMMIT")
    except BaseException:
        cache.clear()
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    sessions.publish()
    return results


class BatchWriter:
    """Owns the writer connection; see the module docstring."""

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        max_batch: int = 256,
        cache_size: int = 100_000,
        on_commit: Callable[[Sequence[Change]], None] | None = None,
    ) -> None:
        self._conn = conn
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._cache = SessionCache(cache_size)
        self._queue: list[tuple[WriteOp, asyncio.Future[Any]]] = []
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    @property
    def connection(self) -> aiosqlite.Connection:
        return self._conn

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._drain(), name="sqlite-writer")

    async def submit(self, op: Callable[[WriteTx], T]) -> T:
        """Queues ``op`` and returns its result once its batch is committed (or raises its error)."""
        if self._closing or self._task is None:
            raise ContextEngineError("SHUTTING_DOWN", "the store is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append((op, future))
        self._wakeup.set()
        return await future

    async def close(self) -> None:
        """Commits everything queued, then stops and closes the connection. Idempotent."""
        self._closing = True
        self._wakeup.set()
        task, self._task = self._task, None
        try:
            if task is not None:
                await task
        finally:
            await self._conn.close()

    async def _drain(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
            ops = [partial(_recording, op) for op, _ in batch]
            try:
                results = await run(self._conn, partial(run_batch, cache=self._cache, ops=ops))
            except Exception as error:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            except BaseException:
                # The writer itself is cancelled: the batch's outcome is unknown, and nothing
                # queued will run.
                self._closing = True
                for _, future in [*batch, *self._queue]:
                    future.cancel()
                self._queue.clear()
                raise
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():  # the caller gave up waiting
                    continue
                if isinstance(result, _Failed):
                    future.set_exception(result.error)
                else:
                    future.set_result(result.result)
            # Resolving a future only schedules its caller, which cannot run before this
            # synchronous block ends: the listeners still hear of the commit before anyone else
            # does. Resolving first puts the writers ahead of the subscribers the listeners wake
            # up, so an acknowledgement never waits for a fan-out.
            if self._on_commit is not None:
                self._on_commit(
                    [
                        change
                        for result in results
                        if isinstance(result, _Recorded)
                        for change in result.changes
                    ]
                )
