"""What other sidecars on the same PostgreSQL database commit, told to this store's listeners.

Every sidecar on a database caches and streams what it knows of the log: its subscriptions and
state watches are fed by the store's commit listeners, its app and session configurations are
cached. A local commit reaches the listeners in process; this module brings the others' commits
to the same listeners, as the same ``Change`` objects, so nothing above the store knows there is
more than one sidecar (docs/design/scaling-out.md).

* **Wake-up, not data.** A dedicated connection ``LISTEN``\\s on the store's channel; the payloads
  (``migrations/postgres/0001_init.sql``) say what kind of change committed, where, and which
  positions it took. Positions are in commit order and a reader that sees position *p* sees every
  position below it, so the events themselves are read from the table: everything after the last
  position delivered, up to the notified one.
* **Exactly once, in position order**, local and remote interleaved: ``delivered`` is the last
  position handed to the listeners. A local transaction whose first position is not the next one
  (another sidecar committed in between, its notification not processed yet) first reads the
  missing positions, then is told; positions already read from the table are not told twice.
  Changes without a position (a session deleted, a session created without shared state) are
  told when their notification is processed (local ones at once).
* **Configurations**: another sidecar's ``app_config`` / ``session_config`` notification tells
  the configuration listeners (the caches drop the entry); when notifications may have been
  missed (the listening connection was lost), they are told that anything may have changed.
* **Safety net**: every ``poll_seconds`` the table is read after ``delivered`` anyway (a lost
  notification delays an event by at most that), and a ``SELECT 1`` on the listening connection
  finds a connection that died silently. While the connection is down it is reconnected with
  backoff, and the table is read every ``lost_poll_seconds``: events keep arriving, later.
* **Own connections**: the feed reads on a connection of its own, never the store's pool: a local
  commit waiting for the feed holds the store's commit section, for which the pool's other
  connections may all be waiting.
* **Health**: when the table cannot be read (the database is unreachable) the store is told
  (``report_problem``: STORAGE_UNAVAILABLE, until its probe succeeds), so readiness follows even
  with no traffic. A lost listening connection alone does not stop the sidecar from serving (the
  pool still reads and writes, polling still delivers, later); it is logged at WARNING, and once
  more when listening again.

What is not recovered: a session deleted by another sidecar while this one was not listening is
not told as ``SessionDeleted`` (its events are gone from the table); caches that depend on it
re-check the store (the event cache compares creation times) and configuration caches are
cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import asyncpg

from contextengine.core.errors import ContextEngineError
from contextengine.store._base import (
    Change,
    CommitListener,
    ConfigChanged,
    ConfigListener,
    LoggedEvent,
    SessionCreated,
    SessionDeleted,
    SessionKey,
)
from contextengine.store._pg_dsn import mask_dsn
from contextengine.store._pg_errors import storage_error
from contextengine.store._sqlite_rows import load_event, load_state

__all__ = ["CHANNEL", "ChangeFeed"]

T = TypeVar("T")

_LOG = logging.getLogger("contextengine.store")

#: the NOTIFY channel of every store on a database (``_pg_ops`` sends on it)
CHANNEL = "contextengine"

#: rows read per query while catching up
_PAGE = 500
#: the longest a read of the table may take before the database counts as unreachable
_READ_TIMEOUT = 10.0
#: above every position a database will take
_NO_LIMIT = (1 << 62) - 1

#: events (joined with their session's key) and sessions created with shared state, by position
_READ_AFTER = (
    "SELECT position, app_name, user_id, session_id, data, shared FROM ("
    " SELECT e.position, s.app_name, s.user_id, s.session_id, e.data, NULL::text AS shared"
    " FROM events e JOIN sessions s ON s.id = e.session"
    " WHERE e.position > $1 AND e.position <= $2"
    " UNION ALL"
    " SELECT create_position, app_name, user_id, session_id, NULL::bytea, created_shared"
    " FROM sessions WHERE create_position > 0"  # the partial index of 0003
    " AND create_position > $1 AND create_position <= $2"
    ") AS c ORDER BY position LIMIT $3"
)


@dataclass(frozen=True)
class _Notice:
    """One parsed notification of another sidecar."""

    origin: str
    kind: str
    app_name: str
    key: SessionKey | None
    #: the last position its transaction took (0: none)
    last: int


def _parse(payload: str) -> _Notice | None:
    message = json.loads(payload)
    if not isinstance(message, dict):
        return None
    kind = message.get("k")
    app_name = message.get("a")
    if not isinstance(kind, str) or not isinstance(app_name, str):
        return None
    user_id, session_id = message.get("u"), message.get("s")
    key = (
        SessionKey(app_name, user_id, session_id)
        if isinstance(user_id, str) and isinstance(session_id, str)
        else None
    )
    last = message.get("q", 0)
    origin = message.get("o")
    return _Notice(
        origin if isinstance(origin, str) else "",
        kind,
        app_name,
        key,
        last if isinstance(last, int) else 0,
    )


def _position(change: Change) -> int:
    return 0 if isinstance(change, SessionDeleted) else change.position


def _changes_of(rows: Sequence[asyncpg.Record]) -> list[list[Change]]:
    """The rows as changes, one list per run of one session's consecutive positions (the
    listeners' unit: one transaction, as near as the table tells)."""
    batches: list[list[Change]] = []
    previous: SessionKey | None = None
    for position, app_name, user_id, session_id, data, shared in rows:
        key = SessionKey(app_name, user_id, session_id)
        change: Change
        if data is not None:
            change = LoggedEvent(key, load_event(data), int(position))
        else:
            change = SessionCreated(key, load_state(shared), int(position))
        if key != previous or not batches:
            batches.append([])
        batches[-1].append(change)
        previous = key
    return batches


class ChangeFeed:
    """The changes of one ``PostgresStore``'s database, told to its listeners in position order,
    exactly once, whichever sidecar committed them. ``committed`` is the store's way in for its
    own transactions (awaited in its commit section, right after ``COMMIT``)."""

    def __init__(
        self,
        *,
        dsn: str,
        origin: str,
        deliver: CommitListener,
        config_changed: ConfigListener,
        report_problem: Callable[[ContextEngineError], None],
        poll_seconds: float = 2.0,
        lost_poll_seconds: float = 0.25,
        connect_timeout: float = 5.0,
        max_backoff_seconds: float = 5.0,
    ) -> None:
        """``origin``: the store's id in payloads (its own notifications are skipped);
        ``deliver``: the store's commit listeners; ``config_changed``: its configuration
        listeners; ``report_problem``: told when the database cannot be read (the store's
        health; its probe tells when it can again)."""
        self._dsn = dsn
        self._origin = origin
        self._deliver = deliver
        self._config_changed = config_changed
        self._report_problem = report_problem
        #: the feed's own connection for reading the table (under ``_delivering``): never
        #: waiting for the store's pool, whose connections may all wait for the commit section
        self._reader: asyncpg.Connection | None = None
        self._poll_seconds = poll_seconds
        self._lost_poll_seconds = lost_poll_seconds
        self._connect_timeout = connect_timeout
        self._max_backoff = max_backoff_seconds
        #: the last position told to the listeners
        self.delivered = 0
        #: held while changes are being told (local or remote), so they are told in order
        self._delivering = asyncio.Lock()
        self._inbox: list[_Notice] = []
        self._wake = asyncio.Event()
        #: set when the listening connection ends (the server closed it)
        self._lost = asyncio.Event()
        self._listening = False
        self._conn: asyncpg.Connection | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        #: counters, for diagnostics and tests
        self.reconnects = 0
        self.remote_changes = 0

    @property
    def listening(self) -> bool:
        """Whether the LISTEN connection is up (else the table is polled more often)."""
        return self._listening

    async def start(self) -> None:
        """Starts listening (a failure is retried in the background), then takes the database's
        last position as the start: what was committed before is the stores' history, which
        subscribers read from the table."""
        try:
            await self._connect()
        except Exception as error:  # retried by the listening task
            _LOG.warning(
                "store: cannot LISTEN on PostgreSQL at %s (%s): retrying; other sidecars' "
                "changes arrive by polling meanwhile",
                mask_dsn(self._dsn),
                type(error).__name__,
            )
        try:
            self.delivered = await self._read(_last_position)
        except BaseException:
            await self.close()
            raise
        self._tasks = [
            asyncio.get_running_loop().create_task(self._keep_listening()),
            asyncio.get_running_loop().create_task(self._work()),
        ]

    async def close(self) -> None:
        self._closed = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            await _ended(task)
        await self._disconnect()
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.terminate()

    async def _read(self, query: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """Runs ``query`` on the reader connection (made again if it was lost); raises
        STORAGE_UNAVAILABLE (and reports it) when the database cannot be read."""
        try:
            if self._reader is None or self._reader.is_closed():
                self._reader = await asyncpg.connect(self._dsn, timeout=self._connect_timeout)
            # Bounded: local commits may be waiting for this read (a hung server is unreachable).
            async with asyncio.timeout(_READ_TIMEOUT):
                return await query(self._reader)
        except Exception as error:
            problem = storage_error(error)
            if problem is None:
                raise
            reader, self._reader = self._reader, None
            if reader is not None:
                reader.terminate()
            if not self._closed:
                self._report_problem(problem)
            raise problem from error

    # -- this store's own transactions -------------------------------------------------------

    async def committed(self, changes: Sequence[Change]) -> None:
        """Tells the listeners a local transaction's ``changes`` (after its COMMIT, in the
        store's commit section), after any positions before it that other sidecars took. Never
        raises: if those cannot be read now, the changes are left to the background reader,
        which tells them, in order, once the database can be read (the writer is answered)."""
        first = min((p for p in map(_position, changes) if p > 0), default=0)
        if not self._delivering.locked() and first in (0, self.delivered + 1):
            self._tell_local(changes)
            return
        async with self._delivering:
            if first > self.delivered + 1:
                try:
                    await self._catch_up(first - 1)
                except Exception as error:  # the committed transaction must still answer
                    _LOG.warning("store: reading other sidecars' changes failed: %s", error)
                    if first > self.delivered + 1:
                        self._tell_local([c for c in changes if _position(c) == 0])
                        self._wake.set()
                        return
            self._tell_local(changes)

    def _tell_local(self, changes: Sequence[Change]) -> None:
        fresh = [c for c in changes if (p := _position(c)) == 0 or p > self.delivered]
        self.delivered = max(self.delivered, max(map(_position, changes), default=0))
        if fresh:
            self._deliver(fresh)

    # -- other sidecars' transactions --------------------------------------------------------

    async def _catch_up(self, upto: int) -> None:
        """Tells every position after ``delivered`` up to ``upto`` (all committed), read from
        the table (caller holds ``_delivering``)."""
        while self.delivered < upto:
            after = self.delivered
            rows = await self._read(functools.partial(_read_after, after=after, upto=upto))
            if self.delivered != after:  # cannot happen under the lock; never tell twice
                continue
            for batch in _changes_of(rows):
                self.delivered = max(self.delivered, max(map(_position, batch)))
                self.remote_changes += len(batch)
                self._deliver(batch)
            if len(rows) < _PAGE:
                if upto != _NO_LIMIT:
                    # Everything up to ``upto`` is committed: what is missing was deleted.
                    self.delivered = max(self.delivered, upto)
                return

    async def _apply(self, notices: list[_Notice]) -> None:
        """Handles notifications in commit order, removing each from ``notices`` once handled
        (caller holds ``_delivering``)."""
        while notices:
            notice = notices[0]
            if notice.kind in ("events", "created") and notice.last > 0:
                await self._catch_up(notice.last)
            elif notice.kind == "created" and notice.key is not None:
                self.remote_changes += 1
                self._deliver([SessionCreated(notice.key, {}, 0)])
            elif notice.kind == "deleted" and notice.key is not None:
                self.remote_changes += 1
                self._deliver([SessionDeleted(notice.key)])
            elif notice.kind == "app_config":
                self._tell_config(ConfigChanged(notice.app_name))
            elif notice.kind == "session_config" and notice.key is not None:
                self._tell_config(ConfigChanged(notice.app_name, notice.key))
            notices.pop(0)

    def _tell_config(self, change: ConfigChanged) -> None:
        try:
            self._config_changed(change)
        except Exception:
            _LOG.exception("a configuration listener failed")

    async def _work(self) -> None:
        """Applies notifications as they come, and reads the table every poll anyway."""
        while not self._closed:
            timeout = self._poll_seconds if self._listening else self._lost_poll_seconds
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            notices, self._inbox = self._inbox, []
            try:
                async with self._delivering:
                    await self._apply(notices)
                    await self._catch_up(_NO_LIMIT)
            except asyncio.CancelledError:
                raise
            except ContextEngineError as error:
                # The database cannot be read now (the store's health says so): keep what is
                # left for the next round.
                self._inbox[:0] = notices
                _LOG.debug("store: reading other sidecars' changes failed: %s", error.reason)
                await asyncio.sleep(self._lost_poll_seconds)
            except Exception:
                _LOG.exception("store: reading other sidecars' changes failed")
                await asyncio.sleep(self._lost_poll_seconds)

    # -- the listening connection ------------------------------------------------------------

    def _on_notification(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            notice = _parse(payload)
        except ValueError:
            notice = None
        if notice is None:
            _LOG.warning("store: a notification this sidecar cannot read: %.200s", payload)
            return
        if notice.origin == self._origin:
            return  # this store's own: its listeners were told in process
        self._inbox.append(notice)
        self._wake.set()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self._dsn, timeout=self._connect_timeout)
        try:
            await conn.add_listener(CHANNEL, self._on_notification)
            conn.add_termination_listener(lambda _conn: self._lost.set())
        except BaseException:
            conn.terminate()
            raise
        self._lost.clear()
        self._conn = conn
        self._listening = True

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        self._listening = False
        if conn is not None and not conn.is_closed():
            try:
                async with asyncio.timeout(self._connect_timeout):
                    await conn.close()
            except Exception:  # closing a broken connection
                conn.terminate()

    async def _alive(self) -> bool:
        conn = self._conn
        if conn is None or conn.is_closed():
            return False
        try:
            async with asyncio.timeout(self._connect_timeout):
                await conn.fetchval("SELECT 1")
        except Exception:  # any failure means the connection is gone
            return False
        return True

    async def _keep_listening(self) -> None:
        """Checks the connection every poll; reconnects with backoff when it is gone, then
        reads what may have been missed."""
        backoff = 0.1
        while not self._closed:
            if self._listening:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_seconds):
                        await self._lost.wait()
                if not self._lost.is_set() and await self._alive():
                    continue
                _LOG.warning(
                    "store: lost the LISTEN connection to PostgreSQL at %s: reconnecting; "
                    "other sidecars' changes arrive by polling every %.2f s meanwhile",
                    mask_dsn(self._dsn),
                    self._lost_poll_seconds,
                )
                await self._disconnect()
                self._wake.set()
                backoff = 0.1
            try:
                await self._connect()
            except asyncio.CancelledError:
                raise
            except Exception:  # retried with backoff
                await asyncio.sleep(backoff)
                backoff = min(self._max_backoff, backoff * 2)
                continue
            self.reconnects += 1
            _LOG.warning("store: listening to PostgreSQL at %s again", mask_dsn(self._dsn))
            # Configuration notifications may have been missed: every cache entry may be stale.
            self._tell_config(ConfigChanged(None))
            self._wake.set()


async def _ended(task: asyncio.Task[None]) -> None:
    """Waits for a cancelled ``task`` to end, cancelling it again while it goes on: a
    cancellation can be lost on the way (Python 3.11's ``asyncio.wait_for`` returns the result
    instead when what it waits for completes in the same turn, as asyncpg's internals may), and
    a feed loop that lost one would keep the store's ``close`` waiting forever."""
    while not task.done():
        await asyncio.wait((task,), timeout=0.1)
        task.cancel()
    if not task.cancelled() and task.exception() is not None:
        _LOG.warning("store: the change feed's task failed: %r", task.exception())


async def _last_position(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT last_position FROM positions"))


async def _read_after(conn: asyncpg.Connection, *, after: int, upto: int) -> list[asyncpg.Record]:
    return list(await conn.fetch(_READ_AFTER, after, upto, _PAGE))
