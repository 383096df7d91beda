"""The single writer: batches concurrent write operations into one transaction per batch.

Callers ``submit`` an operation (a synchronous function of a ``WriteTx``) and wait. One task takes
everything queued (up to ``max_batch``), and runs it inside one ``BEGIN IMMEDIATE`` transaction, each operation under its own SAVEPOINT so that a failing operation
rolls back only itself, then COMMITs once. Only after the commit are the callers answered, so an
acknowledged write is durable. If the commit itself fails, every operation of the batch fails.

Where the batch runs: on the connection's own thread (aiosqlite's), or, ``direct``, on the event
loop's thread. A commit that does not wait for the disk (``synchronous=NORMAL`` in WAL mode:
the frames are written to the WAL, fsync happens at checkpoints) costs less CPU than the round
trip to another thread and back (two wake-ups and GIL hand-overs, about as much as the insert
itself), so the store runs those batches directly. The WAL checkpoints, which do wait for the
disk, then run on a connection of their own (``checkpointer``) on its thread, after every
``checkpoint_every`` batches, instead of inside a commit (the writer's connection has
``wal_autocheckpoint = 0``); the next batch waits for the checkpoint, as a batch waited for the
checkpoint inside the commit before it, so that it catches up with the WAL's end. Commits that
fsync (``synchronous=FULL``) stay on the thread.

Operations record what they changed (``WriteTx.changes``); right after a COMMIT, on the event loop,
the changes of the batch's successful operations are handed to ``on_commit`` in commit order (the
store's commit listeners), in the same synchronous step that resolves the callers' futures, so
before any caller runs again.

The writer is the only writer of the file, so it keeps each session's row id and last sequence in
memory (``SessionCache``), read from the database only on a miss.

Storage failures (the disk is full, the file is read-only or gives I/O errors) fail the batch's
operations with STORAGE_FULL / STORAGE_UNAVAILABLE instead of a bare SQLite error. Nothing is
committed then, so nothing acknowledged is lost. The writer tells ``on_storage`` when the store
stops being writable and when it is writable again: while it is not, it tries a one-page probe
write every ``probe_seconds`` (idle or not), and only a probe that commits says it is writable
again (a batch of operations that failed by themselves commits nothing and proves nothing). After
a full disk the probe also wants ``RECOVERY_FREE_BYTES`` free on the file system: a nearly full
disk lets small writes through (into the WAL's slack) while larger ones fail, and health would
flap between the two.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import aiosqlite

from contextengine._compat import timeout
from contextengine.core.errors import ContextEngineError
from contextengine.store._base import Change, SessionKey
from contextengine.store.sqlite._conn import direct, run

_LOG = logging.getLogger("contextengine.store")

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

#: SQLite's primary result codes of a store that cannot write (``sqlite_errorcode & 0xFF``)
_SQLITE_FULL = 13
_UNWRITABLE = {
    10: "I/O error",  # SQLITE_IOERR (and its extended codes)
    8: "the database is read-only",  # SQLITE_READONLY
    14: "the database file cannot be opened",  # SQLITE_CANTOPEN
    5: "the database file is locked",  # SQLITE_BUSY (past the busy timeout)
    15: "the file system's locking failed",  # SQLITE_PROTOCOL
}
#: SQLite's message for each of those codes (``sqlite3_errstr``), with its name: what identifies
#: the error where the exception carries no ``sqlite_errorcode`` (Python 3.10)
_BY_MESSAGE = {
    "database or disk is full": (13, "SQLITE_FULL"),
    "disk I/O error": (10, "SQLITE_IOERR"),
    "attempt to write a readonly database": (8, "SQLITE_READONLY"),
    "unable to open database file": (14, "SQLITE_CANTOPEN"),
    "database is locked": (5, "SQLITE_BUSY"),
    "locking protocol": (15, "SQLITE_PROTOCOL"),
}


def storage_error(error: BaseException) -> ContextEngineError | None:
    """STORAGE_FULL or STORAGE_UNAVAILABLE for a SQLite error that says the store cannot write
    (its ``sqlite_error`` metadata is SQLite's name for it), else None."""
    if not isinstance(error, sqlite3.Error):
        return None
    code = getattr(error, "sqlite_errorcode", None)
    name = str(getattr(error, "sqlite_errorname", "") or "")
    if not isinstance(code, int):
        # Python 3.10's sqlite3 has no error codes: SQLite's own text for the code says it
        code, name = _BY_MESSAGE.get(str(error), (None, ""))
        if code is None:
            return None
    if code & 0xFF == _SQLITE_FULL:
        return ContextEngineError(
            "STORAGE_FULL",
            "the disk holding the database is full: nothing was written (acknowledged events "
            "are safe); writes succeed again once space is freed",
            sqlite_error=name or "SQLITE_FULL",
        )
    what = _UNWRITABLE.get(code & 0xFF)
    if what is None:
        return None
    return ContextEngineError(
        "STORAGE_UNAVAILABLE",
        f"the database cannot be written ({what}): nothing was written (acknowledged events "
        "are safe); retry later",
        sqlite_error=name or str(code),
    )


#: free bytes a file system needs, after it was full, for the store to count as writable again:
#: a WAL's worth between two automatic checkpoints (1000 pages of 4 KiB)
RECOVERY_FREE_BYTES = 4 * 1024 * 1024


class _StillFullError(Exception):
    """The probe committed, but the disk has too little room to call it recovered."""


def _probe(db: sqlite3.Connection, free_bytes: Callable[[], int] | None) -> None:
    """The smallest real write: the database header's user_version (unused by the store) set to
    itself, which commits one page to the WAL; then, after a full disk, the room left."""
    db.execute("BEGIN IMMEDIATE")
    try:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        db.execute(f"PRAGMA user_version = {int(version)}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    if free_bytes is not None and free_bytes() < RECOVERY_FREE_BYTES:
        raise _StillFullError


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


def _run_alone(
    db: sqlite3.Connection, cache: SessionCache, sessions: BatchSessions, tx: WriteTx, op: WriteOp
) -> list[Any | _Failed]:
    """``run_batch`` of one operation, inside the transaction it began."""
    try:
        try:
            result = op(tx)
        except Exception as error:
            if not db.in_transaction:
                raise  # SQLite rolled the whole transaction back (I/O error, disk full, ...)
            db.execute("ROLLBACK")
            return [_Failed(error)]
        db.execute("COMMIT")
    except BaseException:
        cache.clear()
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    sessions.end_operation(succeeded=True)
    sessions.publish()
    return [result]


def run_batch(
    db: sqlite3.Connection, cache: SessionCache, ops: Sequence[WriteOp]
) -> list[Any | _Failed]:
    """Runs ``ops`` in one transaction (where the writer runs batches); one result per
    operation. Raises, with everything rolled back, when the transaction as a whole fails.

    A lone operation needs no savepoint: if it fails, rolling the transaction back undoes just
    it (two statements fewer for the commonest batch)."""
    sessions = BatchSessions(db, cache)
    tx = WriteTx(db, sessions)
    results: list[Any | _Failed] = []
    db.execute("BEGIN IMMEDIATE")
    if len(ops) == 1:
        return _run_alone(db, cache, sessions, tx, ops[0])
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
        direct: bool = False,
        checkpointer: aiosqlite.Connection | None = None,
        checkpoint_every: int = 64,
        max_batch: int = 256,
        cache_size: int = 100_000,
        on_commit: Callable[[Sequence[Change]], None] | None = None,
        on_storage: Callable[[ContextEngineError | None], None] | None = None,
        probe_seconds: float = 1.0,
        free_bytes: Callable[[], int] | None = None,
    ) -> None:
        """``direct``: run the batches on the event loop's thread (``conn`` made with
        ``connect(any_thread=True)``); ``checkpointer``: the connection that runs the WAL's
        checkpoints (a PASSIVE one after every ``checkpoint_every`` batches; closed with the
        writer); ``free_bytes``: the room left on the database's file system (checked by the
        probe after a full disk)."""
        self._conn = conn
        self._direct = direct
        self._checkpointer = checkpointer
        self._checkpoint_every = checkpoint_every
        self._batches_since_checkpoint = 0
        self._checkpoint: asyncio.Task[None] | None = None
        self._on_commit = on_commit
        self._on_storage = on_storage
        self._probe_seconds = probe_seconds
        self._free_bytes = free_bytes
        #: why the store cannot write, while it cannot
        self.storage_problem: ContextEngineError | None = None
        self._next_probe = 0.0
        self._max_batch = max_batch
        self._cache = SessionCache(cache_size)
        self._queue: list[tuple[WriteOp, asyncio.Future[Any]]] = []
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    @property
    def connection(self) -> aiosqlite.Connection:
        return self._conn

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` with the writer's connection, where the writer runs its batches (not inside
        one: between two batches, as the writer runs one at a time)."""
        if self._direct:
            return fn(direct(self._conn))
        return await run(self._conn, fn)

    def _checkpoint_due(self) -> None:
        """After a committed batch: a PASSIVE checkpoint on the checkpointer's thread every
        ``checkpoint_every`` batches (it copies what the WAL holds to the database file, without
        blocking the readers or the event loop; the next batch waits for it)."""
        if self._checkpointer is None:
            return
        self._batches_since_checkpoint += 1
        if self._batches_since_checkpoint < self._checkpoint_every:
            return
        if self._checkpoint is not None:
            return
        self._batches_since_checkpoint = 0
        self._checkpoint = asyncio.get_running_loop().create_task(
            self._run_checkpoint(self._checkpointer), name="sqlite-checkpoint"
        )

    @staticmethod
    async def _run_checkpoint(conn: aiosqlite.Connection) -> None:
        try:
            await run(conn, _checkpoint)
        except sqlite3.Error as error:
            # Harmless: the frames stay in the WAL (still durable), the next one copies them.
            _LOG.warning("store: a WAL checkpoint failed (%s); the next one retries", error)

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
            try:
                if self._checkpoint is not None:
                    await self._checkpoint
            finally:
                try:
                    if self._checkpointer is not None:
                        await self._checkpointer.close()
                finally:
                    await self._conn.close()

    def _storage_failed(self, problem: ContextEngineError) -> None:
        self._next_probe = time.monotonic() + self._probe_seconds
        if self.storage_problem is None:
            self.storage_problem = problem
            if self._on_storage is not None:
                self._on_storage(problem)

    async def _try_probe(self) -> None:
        """While the store cannot write: the probe write, when it is due."""
        if time.monotonic() < self._next_probe:
            return
        problem = self.storage_problem
        full = problem is not None and problem.reason == "STORAGE_FULL"
        try:
            await self.call(partial(_probe, free_bytes=self._free_bytes if full else None))
        except _StillFullError:
            self._next_probe = time.monotonic() + self._probe_seconds
            return
        except Exception as error:
            self._storage_failed(storage_error(error) or _unknown_storage_error(error))
            return
        self.storage_problem = None
        if self._on_storage is not None:
            self._on_storage(None)

    async def _idle(self) -> None:
        """Waits for work; while the store cannot write, no longer than until the next probe."""
        self._wakeup.clear()
        if self.storage_problem is None:
            await self._wakeup.wait()
            return
        wait = max(self._next_probe - time.monotonic(), 0.0)
        try:
            async with timeout(wait):
                await self._wakeup.wait()
        except TimeoutError:
            pass

    async def _drain(self) -> None:
        while True:
            if self.storage_problem is not None and not self._closing:
                await self._try_probe()
            if not self._queue:
                if self._closing:
                    return
                await self._idle()
                continue
            checkpoint = self._checkpoint
            if checkpoint is not None:
                # No commit while a checkpoint runs: one that has writes going on beside it
                # never catches up with the WAL's end, and only one that does lets the next
                # commit start the WAL over (else it grows without bound). The callers wait
                # for it as for a checkpoint inside a commit; everything else goes on.
                await asyncio.wait((checkpoint,))
                self._checkpoint = None
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
            ops = [partial(_recording, op) for op, _ in batch]
            try:
                results = await self.call(partial(run_batch, cache=self._cache, ops=ops))
            except Exception as error:
                problem = storage_error(error)
                if problem is not None:
                    self._storage_failed(problem)
                for _, future in batch:
                    if not future.done():
                        future.set_exception(problem or error)
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
                if isinstance(result, _Failed):
                    # A statement that failed for lack of space without ending the transaction.
                    problem = storage_error(result.error)
                    if problem is not None:
                        self._storage_failed(problem)
                    if not future.done():  # else the caller gave up waiting
                        future.set_exception(problem or result.error)
                elif not future.done():
                    future.set_result(result.result)
            self._checkpoint_due()
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


def _checkpoint(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _unknown_storage_error(error: Exception) -> ContextEngineError:
    return ContextEngineError(
        "STORAGE_UNAVAILABLE",
        f"the database cannot be written ({type(error).__name__}); retry later",
        sqlite_error=type(error).__name__,
    )
