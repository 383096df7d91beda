"""``PostgresStore``: the event store in a PostgreSQL database, shared by any number of sidecars.

``--db postgresql://user:password@host:port/database`` (or ``postgres://``) chooses it
(``engine.open_store``). It keeps the ``EventStore`` contract of the SQLite store with several
writers on several hosts, and without a lane they all share: a write transaction locks only what
it changes (its session; the user's and the app's state when it writes them), before it takes
its transaction id (``_write_locks``), and its positions come from that id
(``_positions``), so appends to different sessions commit concurrently, from one sidecar and
from many. Readers stop below the oldest transaction still in flight, so they never pass a
position that may still commit (docs/design/concurrent-commits.md,
docs/adr/0013-concurrent-commits-on-postgresql.md). The schema is migrated once under an
advisory lock (``_migrations``); writes run in the transactions of ``_ops``, reads in the
snapshots of ``_reads``, on an asyncpg pool; the change feed (``_feed``) tells the commit
listeners every change, local or not, once it is final.

Durability is the server's: a write is acknowledged after PostgreSQL committed it with the
server's ``synchronous_commit`` (default ``on``: in its WAL on disk), which this store never
lowers for its writes; ``durability`` ("normal"/"full") is accepted for the same flag as SQLite
and changes nothing (both keep acknowledged events across a crash of the sidecar and of the
database server).

While the database cannot be reached, calls fail with STORAGE_UNAVAILABLE (a full disk:
STORAGE_FULL), one ERROR line is logged, the storage listeners hear of it, and a probe
(``SELECT 1`` every ``probe_seconds``) tells them when it can be used again; the pool reconnects
by itself. A busy database (a lock or statement timeout on the store's own connections,
``_timeouts``; no free pooled connection in time) fails the call with STORAGE_BUSY and leaves
the health alone (``_errors``). The DSN may hold a password: logs show it masked
(``store._dsn.mask_dsn``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, TypeVar

import asyncpg

from contextengine._compat import timeout
from contextengine.core.errors import ContextEngineError
from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.store._append import copy_event
from contextengine.store._base import (
    AppendOutcome,
    Change,
    CommitListener,
    ConfigChanged,
    ConfigListener,
    EventFilter,
    LoggedEvent,
    SessionKey,
    StateAt,
    StorageListener,
    StoredSession,
)
from contextengine.store._dsn import is_postgres_dsn, mask_dsn
from contextengine.store._listeners import CommitListeners
from contextengine.store.postgres import _measures as measures_table, _ops as ops, _reads as reads
from contextengine.store.postgres._errors import busy, held_back, retryable, storage_error
from contextengine.store.postgres._feed import ChangeFeed
from contextengine.store.postgres._group import GroupCommit
from contextengine.store.postgres._group_plan import AppendRequest, Result
from contextengine.store.postgres._lock import CompactionLocks
from contextengine.store.postgres._migrations import load_migrations, migrate
from contextengine.store.postgres._positions import MAX_PER_TRANSACTION
from contextengine.store.postgres._timeouts import Timeouts
from contextengine.store.postgres._wake import Waker
from contextengine.v1 import config_pb2, event_pb2

T = TypeVar("T")

__all__ = ["PostgresStore", "Timeouts", "is_postgres_dsn", "mask_dsn"]

_LOG = logging.getLogger("contextengine.store")

#: how often a transaction that lost a race (serialization failure, deadlock, a unique key taken
#: by a concurrent insert) runs again before its error is raised
_ATTEMPTS = 5
#: the connection limits of a store made without others (``EngineSettings``' defaults)
DEFAULT_TIMEOUTS = Timeouts()
#: at most one WARNING line about a busy database per this many seconds
_BUSY_LOG_SECONDS = 10.0
#: how long ``get_state`` waits for a state it can name at a position (seconds)
STATE_WAIT_SECONDS = 30.0

Query = Callable[[asyncpg.Connection], Awaitable[T]]


class PostgresStore:
    """An ``EventStore`` in a PostgreSQL database (``dsn``: a ``postgresql://`` URL)."""

    def __init__(
        self,
        dsn: str,
        *,
        durability: Literal["normal", "full"] = "normal",
        clock: Callable[[], float] = time.time,
        pool_size: int = 10,
        probe_seconds: float = 1.0,
        connect_timeout: float = 5.0,
        pool_timeout: float = 5.0,
        group_in_flight: int | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        """``pool_size``: the most connections this store opens (each concurrent call holds one
        for its transaction); ``probe_seconds``: while the database cannot be reached, how often
        a probe checks whether it can again; ``connect_timeout``: the limit of one connection
        attempt (seconds); ``pool_timeout``: the longest a call waits for a free pooled
        connection (then STORAGE_BUSY); ``group_in_flight``: how many transactions of appends run
        at once, each taking every append that waits (``_group``; default: half the pool);
        ``timeouts``: the limits set on every connection of the store (``_timeouts``); ``telemetry`` is told of every write transaction
        (``store.commit`` spans, the commit duration metric), as with SQLite, of busy calls and
        of how long committed changes wait for an older transaction."""
        if not is_postgres_dsn(dsn):
            raise ValueError(f"not a postgresql:// URL: {mask_dsn(dsn)}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size}")
        if durability not in ("normal", "full"):
            raise ValueError(f"durability must be 'normal' or 'full', not {durability!r}")
        self._dsn = dsn
        self._durability = durability
        self._clock = clock
        self._pool_size = pool_size
        self._probe_seconds = probe_seconds
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._timeouts = timeouts
        self._telemetry = telemetry
        self._pool: asyncpg.Pool | None = None
        #: the pool's connections as slots: waiting for one is told apart from connecting
        self._slots = asyncio.Semaphore(pool_size)
        self._groups = GroupCommit(
            self._append_group,
            in_flight=group_in_flight or max(1, pool_size // 2),
            max_events=MAX_PER_TRANSACTION,
        )
        self._listeners = CommitListeners()
        self._storage_listeners: list[StorageListener] = []
        self._problem: ContextEngineError | None = None
        self._probe: asyncio.Task[None] | None = None
        #: busy calls not yet logged, and when the last WARNING about them was
        self._busy_unlogged = 0
        self._busy_logged_at = -_BUSY_LOG_SECONDS
        #: this store's id in NOTIFY payloads (other sidecars skip nothing of theirs by it)
        self._origin = secrets.token_hex(8)
        self._closed = False
        self._config_listeners: list[ConfigListener] = []
        #: every change of the database, in position order (``_feed``); set while open
        self._feed: ChangeFeed | None = None
        #: tells other sidecars after local commits (``_wake``); set while open
        self._waker: Waker | None = None
        self._compaction_locks = CompactionLocks(dsn, connect_timeout=connect_timeout)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Connects, and migrates the schema (once, under an advisory lock, whichever sidecar
        comes first). Raises ConnectionError when the database cannot be reached."""
        if self._pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(
                self._dsn,
                min_size=1,
                max_size=self._pool_size,
                timeout=self._connect_timeout,
                command_timeout=self._timeouts.answer_seconds,
                server_settings=self._timeouts.server_settings(),
                reset=_nothing_to_reset,
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            # Unreachable, refused, a wrong password or database: a ConnectionError (an OSError),
            # so the sidecar's start fails with one line naming the masked DSN.
            raise ConnectionError(
                f"cannot connect to PostgreSQL at {self.masked_dsn}: {error}"
            ) from error
        try:
            async with pool.acquire() as conn:
                version = await migrate(conn, load_migrations())
        except BaseException:
            await pool.close()
            raise
        self._pool = pool
        self._closed = False
        settings = self._timeouts.server_settings()
        feed = ChangeFeed(
            dsn=self._dsn,
            origin=self._origin,
            deliver=self._listeners.notify,
            config_changed=self._config_changed,
            report_problem=self._set_problem,
            report_held=self._telemetry.store_delivery_held,
            server_settings=settings,
            own_limit=self._timeouts.idle_in_transaction_seconds,
            answer_seconds=self._timeouts.answer_seconds,
            connect_timeout=self._connect_timeout,
        )
        try:
            await feed.start()
        except BaseException:
            self._pool = None
            await pool.close()
            raise
        self._feed = feed
        self._waker = Waker(
            self._dsn,
            self._origin,
            server_settings=settings,
            connect_timeout=self._connect_timeout,
        )
        _LOG.info("store: PostgreSQL at %s, schema version %d", self.masked_dsn, version)

    async def close(self) -> None:
        self._closed = True
        feed, self._feed = self._feed, None
        if feed is not None:
            await feed.close()
        waker, self._waker = self._waker, None
        if waker is not None:
            await waker.close()
        await self._compaction_locks.close()
        pool, self._pool = self._pool, None
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe
        if pool is not None:
            try:
                async with timeout(self._connect_timeout):
                    await pool.close()
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                pool.terminate()

    # -- what other components of the sidecar use --------------------------------------------

    @property
    def dsn(self) -> str:
        """The connection string (a secret when it holds a password: log ``masked_dsn``)."""
        return self._dsn

    @property
    def masked_dsn(self) -> str:
        return mask_dsn(self._dsn)

    @property
    def durability(self) -> Literal["normal", "full"]:
        return self._durability

    @property
    def origin(self) -> str:
        """This store's id in the NOTIFY payloads it sends (``0001_init.sql``)."""
        return self._origin

    @property
    def pool(self) -> asyncpg.Pool:
        """The open pool (for components keeping their own tables here: memory's index)."""
        if self._pool is None:
            raise _not_open(self._closed)
        return self._pool

    async def run(self, query: Query[T], *, write: bool = True) -> T:
        """Runs ``query`` on a connection of the pool with this store's error handling (races
        retried, unreachable database as STORAGE_UNAVAILABLE and storage health)."""
        return await self._run(query, write=write)

    # -- storage health ----------------------------------------------------------------------

    @property
    def sole_writer(self) -> bool:
        """False: other sidecars may write the database too."""
        return False

    @property
    def storage_problem(self) -> ContextEngineError | None:
        return self._problem

    def add_storage_listener(self, listener: StorageListener) -> Callable[[], None]:
        self._storage_listeners.append(listener)
        return lambda: self._storage_listeners.remove(listener)

    def _set_problem(self, problem: ContextEngineError | None) -> None:
        if (problem is None) == (self._problem is None):
            return
        self._problem = problem
        if problem is not None:
            _LOG.error(
                "storage: PostgreSQL at %s cannot be used (%s): calls fail with %s / %s and "
                "health is NOT_SERVING until a probe succeeds (every %.1f s); acknowledged "
                "events are safe",
                self.masked_dsn,
                problem.metadata.get("postgres_error", "?"),
                problem.code.value,
                problem.reason,
                self._probe_seconds,
            )
            if self._probe is None or self._probe.done():
                self._probe = asyncio.get_running_loop().create_task(self._probe_until_usable())
        else:
            _LOG.warning("storage: PostgreSQL at %s can be used again", self.masked_dsn)
        for listener in list(self._storage_listeners):
            listener(problem)

    async def _probe_until_usable(self) -> None:
        while self._problem is not None and self._pool is not None:
            await asyncio.sleep(self._probe_seconds)
            pool = self._pool
            if pool is None:
                return
            try:
                async with pool.acquire(timeout=self._connect_timeout) as conn:
                    await conn.fetchval("SELECT 1")
            except Exception as error:
                if storage_error(error) is None:
                    _LOG.warning("storage probe failed: %s", type(error).__name__)
                continue
            self._set_problem(None)

    async def _run(self, query: Query[T], *, write: bool) -> T:
        if not write:
            return await self._attempts(query, write=False)
        # A write runs to its end even when its caller is cancelled (a client gone mid-call):
        # cancelled between COMMIT and the commit listeners, a committed change would reach
        # this sidecar's subscribers only at the change feed's next safety-net poll.
        # As with SQLite's writer, the caller stops waiting; the write does not stop.
        task = asyncio.ensure_future(self._write(query))
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def _write(self, query: Query[T]) -> T:
        return await self._measured(self._attempts(query, write=True))

    async def _measured(self, write: Awaitable[T]) -> T:
        """``write``, told to the telemetry (a ``store.commit`` span, the commit duration)."""
        telemetry = self._telemetry
        if telemetry is NO_TELEMETRY:
            return await write
        start = time.perf_counter()
        ok = False
        try:
            with telemetry.span("store.commit", {"db.system": "postgresql"}):
                result = await write
            ok = True
            return result
        finally:
            telemetry.store_commit(time.perf_counter() - start, ok)

    async def _attempts(self, query: Query[T], *, write: bool) -> T:
        # A read may meet a pooled connection the server closed (a restart): it runs once more
        # on a fresh one. A write does not: it may have committed (appends are retried by the
        # client, idempotent by event id).
        lost_connection_retries = 0 if write else 1
        attempt = 0
        while True:
            attempt += 1
            pool = self._pool
            if pool is None:
                raise _not_open(self._closed)
            try:
                async with timeout(self._pool_timeout):
                    await self._slots.acquire()
            except TimeoutError:
                raise self._busy(
                    busy(
                        "pool_timeout",
                        f"no free connection of the sidecar's pool ({self._pool_size}) within "
                        f"{self._pool_timeout:g} s",
                    )
                ) from None
            try:
                async with pool.acquire(timeout=self._connect_timeout) as conn:
                    try:
                        result = await query(conn)
                    except asyncpg.InternalClientError:
                        # The server went away mid-operation (a restart under load) and left
                        # the connection's protocol in a state no later call can use: never
                        # give it back to the pool.
                        conn.terminate()
                        raise
            except ContextEngineError:
                raise
            except Exception as error:
                if retryable(error) and attempt < _ATTEMPTS:
                    continue
                problem = storage_error(error)
                if problem is None:
                    raise
                if self._closed:
                    raise ContextEngineError("SHUTTING_DOWN", "the store is closed") from error
                if problem.reason == "STORAGE_BUSY":
                    raise self._busy(problem) from error
                if lost_connection_retries > 0:
                    lost_connection_retries -= 1
                    continue
                self._set_problem(problem)
                raise problem from error
            finally:
                self._slots.release()
            if self._problem is not None:
                self._set_problem(None)
            return result

    def _busy(self, problem: ContextEngineError) -> ContextEngineError:
        """Counts and logs (at most once every ``_BUSY_LOG_SECONDS``) a busy call; the health
        stays as it is: contention is not an outage."""
        cause = problem.metadata.get("cause", "?")
        self._telemetry.store_busy(cause)
        self._busy_unlogged += 1
        now = time.monotonic()
        if now - self._busy_logged_at >= _BUSY_LOG_SECONDS:
            _LOG.warning(
                "storage: PostgreSQL at %s is busy (%s; %d call(s) since the last such line): "
                "they fail with %s / %s, clients retry; health stays SERVING",
                self.masked_dsn,
                cause,
                self._busy_unlogged,
                problem.code.value,
                problem.reason,
            )
            self._busy_unlogged = 0
            self._busy_logged_at = now
        return problem

    # -- the EventStore operations -----------------------------------------------------------

    def _committer(self) -> ops.Committer:
        return ops.Committer(self._origin, self._tell, self._took_positions)

    def _tell(self, changes: Sequence[Change]) -> None:
        """A local transaction's changes without a position: told at once."""
        feed = self._feed
        if feed is None:
            self._listeners.notify(changes)
        else:
            feed.tell(changes)

    def _took_positions(self) -> None:
        """A local transaction committed positions: this store's feed reads them once final,
        the other sidecars' feeds are woken."""
        feed, waker = self._feed, self._waker
        if feed is not None:
            feed.committed()
        if waker is not None:
            waker.wake()

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
        owned_state = copy.deepcopy(state)
        committer = self._committer()
        return await self._run(
            lambda conn: ops.create_session(
                conn, committer, key=key, state=owned_state, now=now, config=owned
            ),
            write=True,
        )

    async def get_session(self, key: SessionKey, flt: EventFilter) -> StoredSession:
        return await self._run(lambda conn: reads.get_session(conn, key, flt), write=False)

    async def list_sessions(
        self,
        app_name: str,
        user_id: str | None,
        limit: int,
        after: tuple[str, str] | None,
    ) -> list[StoredSession]:
        return await self._run(
            lambda conn: reads.list_sessions(conn, app_name, user_id, limit, after), write=False
        )

    async def list_sessions_by_update(
        self,
        app_name: str,
        user_id: str | None,
        limit: int,
        after: tuple[float, str, str] | None,
    ) -> list[StoredSession]:
        return await self._run(
            lambda conn: reads.list_sessions_by_update(conn, app_name, user_id, limit, after),
            write=False,
        )

    async def list_app_names(self, limit: int, after: str | None) -> list[str]:
        return await self._run(lambda conn: reads.list_app_names(conn, limit, after), write=False)

    async def list_user_ids(self, app_name: str, limit: int, after: str | None) -> list[str]:
        return await self._run(
            lambda conn: reads.list_user_ids(conn, app_name, limit, after), write=False
        )

    async def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._run(
            lambda conn: reads.get_user_state(conn, app_name, user_id), write=False
        )

    async def delete_session(self, key: SessionKey) -> bool:
        committer = self._committer()
        return await self._run(
            lambda conn: ops.delete_session(conn, committer, key=key), write=True
        )

    async def append_events(
        self,
        key: SessionKey,
        events: Sequence[event_pb2.Event],
        expected_last_sequence: int | None,
    ) -> AppendOutcome:
        # The store's own copies (the plan writes sequences and timestamps into them; planned
        # again on a retry, they come out the same).
        request = AppendRequest(
            key, [copy_event(event) for event in events], expected_last_sequence, self._clock()
        )
        return await self._measured(self._groups.append(request))

    async def _append_group(
        self, requests: Sequence[AppendRequest], committing: Callable[[], None]
    ) -> list[Result]:
        """One transaction of appends (``_group``), run to its end however its callers go;
        ``committing`` is called as its COMMIT is sent."""
        committer = self._committer()
        task = asyncio.ensure_future(
            self._attempts(
                lambda conn: ops.append_group(conn, committer, requests, committing), write=True
            )
        )
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def list_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[event_pb2.Event], int]:
        return await self._run(
            lambda conn: reads.list_events(conn, key, after_sequence, limit), write=False
        )

    def add_commit_listener(self, listener: CommitListener) -> Callable[[], None]:
        return self._listeners.add(listener)

    async def list_logged_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[LoggedEvent], int]:
        return await self._run(
            lambda conn: reads.list_logged_events(conn, key, after_sequence, limit), write=False
        )

    async def list_events_after_position(
        self, app_name: str, user_id: str | None, after_position: int, limit: int
    ) -> list[LoggedEvent]:
        return await self._run(
            lambda conn: reads.list_events_after_position(
                conn, app_name, user_id, after_position, limit
            ),
            write=False,
        )

    async def last_position(self) -> int:
        return await self._run(reads.last_position, write=False)

    async def get_state(self, key: SessionKey) -> StateAt:
        """Read again (after 1 ms, doubling to 50 ms, the connection given back meanwhile)
        until the state can be named at a position (``_reads.state_if_exact``); STORAGE_BUSY
        after ``STATE_WAIT_SECONDS``."""
        pause = 0.001
        deadline = time.monotonic() + STATE_WAIT_SECONDS
        while True:
            found = await self._run(lambda conn: reads.state_if_exact(conn, key), write=False)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise self._busy(held_back("reading a state", STATE_WAIT_SECONDS))
            await asyncio.sleep(pause)
            pause = min(0.05, pause * 2)

    async def get_app_config(self, app_name: str) -> config_pb2.AppConfig | None:
        return await self._run(lambda conn: reads.get_app_config(conn, app_name), write=False)

    async def get_content_measures(
        self, key: SessionKey, counter: str, digests: Collection[bytes] | None = None
    ) -> dict[bytes, tuple[int, int]]:
        wanted = None if digests is None else list(digests)
        return await self._run(
            lambda conn: measures_table.get_content_measures(conn, key, counter, wanted),
            write=False,
        )

    async def put_content_measures(
        self, key: SessionKey, counter: str, measures: Mapping[bytes, tuple[int, int]]
    ) -> None:
        owned = dict(measures)
        await self._run(
            lambda conn: measures_table.put_content_measures(conn, key, counter, owned),
            write=True,
        )

    async def put_app_config(self, config: config_pb2.AppConfig) -> config_pb2.AppConfig:
        owned = config_pb2.AppConfig()
        owned.CopyFrom(config)
        now = self._clock()
        return await self._run(
            lambda conn: ops.put_app_config(conn, self._origin, config=owned, now=now), write=True
        )

    async def get_session_config(self, key: SessionKey) -> config_pb2.SessionConfig:
        return await self._run(lambda conn: reads.get_session_config(conn, key), write=False)

    async def put_session_config(
        self, key: SessionKey, config: config_pb2.SessionConfig
    ) -> config_pb2.SessionConfig:
        owned = config_pb2.SessionConfig()
        owned.CopyFrom(config)
        now = self._clock()
        return await self._run(
            lambda conn: ops.put_session_config(conn, self._origin, key=key, config=owned, now=now),
            write=True,
        )

    async def page_token_key(self) -> bytes:
        return await self._run(reads.page_token_key, write=False)

    # -- several sidecars on one database (``_feed``, ``_wake``, ``_lock``) ----------

    @property
    def feed(self) -> ChangeFeed | None:
        """Every change of the database, told to this store's listeners (None while closed)."""
        return self._feed

    @property
    def waker(self) -> Waker | None:
        """What wakes other sidecars after this store's commits (None while closed)."""
        return self._waker

    def add_config_listener(self, listener: ConfigListener) -> Callable[[], None]:
        self._config_listeners.append(listener)
        return lambda: self._config_listeners.remove(listener)

    def _config_changed(self, change: ConfigChanged) -> None:
        for listener in list(self._config_listeners):
            listener(change)

    def compaction_lock(self, key: SessionKey) -> AbstractAsyncContextManager[None]:
        """A session-level advisory lock of the session (``_lock``): one compaction of it
        at a time on every sidecar of the database."""
        return self._compaction_locks.hold(key)


async def _nothing_to_reset(_conn: asyncpg.Connection) -> None:
    """What the pool runs on a connection given back, after asyncpg rolled back a transaction
    left open (never: every transaction of the store ends): nothing. The store sets no session
    state (no ``SET``, ``LISTEN``, cursor or session-level lock on pooled connections), so
    asyncpg's default reset (``RESET ALL``, ``UNLISTEN *``, ...) would only cost every call one
    more round trip."""


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Marks a write's outcome as seen (its caller may have stopped waiting for it)."""
    if not task.cancelled():
        task.exception()


def _not_open(closed: bool) -> Exception:
    if closed:
        return ContextEngineError("SHUTTING_DOWN", "the store is closed")
    return RuntimeError("PostgresStore.open() has not been called")
