"""Every change of a PostgreSQL database, told to one store's commit listeners: in position
order, exactly once, whichever sidecar committed it.

Every sidecar on a database caches and streams what it knows of the log: its subscriptions and
state watches are fed by the store's commit listeners, its app and session configurations are
cached. This feed brings every committed change with a position to those listeners, as the same
``Change`` objects a local commit makes, so nothing above the store knows there is more than one
sidecar (docs/design/scaling-out.md).

* **The table is the truth; readers stop at the bound.** Positions come from transaction ids
  (``_positions``) and commits finish in any order, so the feed reads the events (joined with
  their session's key) and the sessions created with shared state after ``delivered``, the last
  position it told, and below the bound of the same statement's snapshot: every position there
  is final. It tells them in position order, one listener call per session and transaction (a
  transaction's positions are consecutive and share its id; a transaction of grouped appends,
  ``_group``, touches several sessions), and moves ``delivered`` to the bound minus one.
  Nothing below the bound can appear later, so nothing is skipped, and nothing at or below
  ``delivered`` is read again, so nothing is told twice. Local commits take the same way: their
  writer is answered at once, their listeners hear them once they are final (a few milliseconds
  later when no older transaction is in flight).
* **Wake-ups.** A local commit that took positions wakes the feed (``committed``); another
  sidecar's ``wake`` notification does too (``_wake``, ``_listen``). Reads are at least
  ``min_interval`` apart: under load one read covers many commits. While committed changes wait
  above the bound (an older transaction is in flight: ``_hold``) the feed reads again after
  5 ms, doubling to 200 ms, since a transaction that rolls back or is killed wakes nobody.
* **Without a position**: a session deleted or created without shared state, here, is told at
  once (``tell``); another sidecar's deletion and configuration changes come as notifications
  (sent inside their transaction) and are told when they arrive. When the listening connection
  was lost, the configuration listeners are told that anything may have changed.
* **Safety net**: every ``poll_seconds`` the table is read anyway (a lost wake-up delays a change
  by at most that); while the listening connection is down, every ``lost_poll_seconds``.
* **Own connections**: the feed reads on a connection of its own, never the store's pool (a
  pool whose connections all wait for locks must not stop delivery), with the store's timeouts.
* **Health**: when the table cannot be read because the database is unreachable, the store is
  told (``report_problem``: STORAGE_UNAVAILABLE until its probe succeeds), so readiness follows
  even with no traffic. A busy database (a lock or statement timeout) is retried, never reported:
  contention is not an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import asyncpg

from contextengine._compat import timeout
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
from contextengine.store._rows import load_event, load_state
from contextengine.store.postgres._errors import busy_cause, storage_error
from contextengine.store.postgres._hold import BLOCKER, HoldWatch, describe
from contextengine.store.postgres._listen import Listener, Notice, ended
from contextengine.store.postgres._positions import BOUND, transaction_of

__all__ = ["ChangeFeed"]

T = TypeVar("T")

_LOG = logging.getLogger("contextengine.store")

#: rows read per query
_PAGE = 500
#: the first and the longest pause between reads while committed changes wait (seconds)
_HELD_FIRST = 0.005
_HELD_LONGEST = 0.2

#: the bound, the highest committed position, and the changes after $1 below the bound:
#: events (joined with their session's key) and sessions created with shared state, in
#: position order (two index ranges: the events' primary key, 0003's partial index)
_READ = f"""
WITH w AS MATERIALIZED (SELECT {BOUND} AS bound)
SELECT w.bound,
    GREATEST(
        (SELECT max(position) FROM events),
        (SELECT max(create_position) FROM sessions WHERE create_position > 0),
        0
    ),
    c.position, c.app_name, c.user_id, c.session_id, c.data, c.shared
FROM w LEFT JOIN LATERAL (
    SELECT * FROM (
        SELECT e.position, s.app_name, s.user_id, s.session_id, e.data, NULL::text AS shared
        FROM events e JOIN sessions s ON s.id = e.session
        WHERE e.position > $1 AND e.position < w.bound
        UNION ALL
        SELECT create_position, app_name, user_id, session_id, NULL::bytea, created_shared
        FROM sessions
        WHERE create_position > 0 AND create_position > $1 AND create_position < w.bound
    ) AS u ORDER BY position LIMIT $2
) AS c ON TRUE
ORDER BY c.position
"""


def _position(change: Change) -> int:
    return 0 if isinstance(change, SessionDeleted) else change.position


def _changes_of(rows: Sequence[asyncpg.Record]) -> list[list[Change]]:
    """The rows as changes, one list per transaction (consecutive rows of one transaction id
    and one session)."""
    batches: list[list[Change]] = []
    previous: tuple[int, SessionKey] | None = None
    for row in rows:
        position = int(row[2])
        key = SessionKey(row[3], row[4], row[5])
        change: Change
        if row[6] is not None:
            change = LoggedEvent(key, load_event(row[6]), position)
        else:
            change = SessionCreated(key, load_state(row[7]), position)
        group = (transaction_of(position), key)
        if group != previous:
            batches.append([])
            previous = group
        batches[-1].append(change)
    return batches


class ChangeFeed:
    """The changes of one ``PostgresStore``'s database, told to its listeners (see the
    module)."""

    def __init__(
        self,
        *,
        dsn: str,
        origin: str,
        deliver: CommitListener,
        config_changed: ConfigListener,
        report_problem: Callable[[ContextEngineError], None],
        report_held: Callable[[float], None],
        server_settings: dict[str, str],
        own_limit: float = 10.0,
        answer_seconds: float = 35.0,
        poll_seconds: float = 2.0,
        lost_poll_seconds: float = 0.25,
        min_interval: float = 0.005,
        connect_timeout: float = 5.0,
        max_backoff_seconds: float = 5.0,
    ) -> None:
        """``deliver``: the store's commit listeners; ``config_changed``: its configuration
        listeners; ``report_problem``: told when the database cannot be read (the store's
        health; its probe tells when it can again); ``report_held``: how long committed changes
        have waited for an older transaction (seconds; 0: none wait); ``own_limit``: the
        longest one of the store's transactions stays open (for the log)."""
        self._dsn = dsn
        self._deliver = deliver
        self._config_changed = config_changed
        self._report_problem = report_problem
        self._settings = server_settings
        self._own_limit = own_limit
        self._answer_seconds = answer_seconds
        self._poll_seconds = poll_seconds
        self._lost_poll_seconds = lost_poll_seconds
        self._min_interval = min_interval
        self._connect_timeout = connect_timeout
        self._hold = HoldWatch(report_held)
        self._listener = Listener(
            dsn=dsn,
            origin=origin,
            on_notice=self._on_notice,
            on_listening=self._on_listening,
            server_settings=server_settings,
            check_seconds=poll_seconds,
            connect_timeout=connect_timeout,
            max_backoff_seconds=max_backoff_seconds,
        )
        #: the feed's own connection for reading the table
        self._reader: asyncpg.Connection | None = None
        #: the last position told to the listeners
        self.delivered = 0
        self._inbox: list[Notice] = []
        self._wake = asyncio.Event()
        self._held_pause = 0.0
        self._last_read = 0.0
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        #: counters, for diagnostics and tests
        self.reads = 0
        self.changes_read = 0

    @property
    def listening(self) -> bool:
        """Whether the LISTEN connection is up (else the table is polled more often)."""
        return self._listener.listening

    @property
    def reconnects(self) -> int:
        return self._listener.reconnects

    @property
    def held_seconds(self) -> float:
        """How long committed changes have waited for an older transaction (0: none wait)."""
        return self._hold.seconds

    async def start(self) -> None:
        """Starts listening (a failure is retried in the background), then takes the bound as
        the start: what is final before it is the stores' history, which subscribers read from
        the table; everything committed from now on is told."""
        try:
            await self._listener.connect()
        except Exception as error:  # retried by the listening task
            _LOG.warning(
                "store: cannot LISTEN on PostgreSQL (%s): retrying; other sidecars' changes "
                "arrive by polling meanwhile",
                type(error).__name__,
            )
        try:
            self.delivered = await self._read(_start)
        except BaseException:
            await self.close()
            raise
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._listener.keep_listening()),
            loop.create_task(self._work()),
        ]

    async def close(self) -> None:
        self._closed = True
        self._listener.close()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            await ended(task)
        await self._listener.disconnect()
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.terminate()

    # -- this store's own transactions -------------------------------------------------------

    def committed(self) -> None:
        """A local transaction committed positions: read them once they are final."""
        self._wake.set()

    def tell(self, changes: Sequence[Change]) -> None:
        """Tells a local transaction's changes without a position at once."""
        if changes:
            self._deliver(changes)

    # -- reading -----------------------------------------------------------------------------

    async def _read(self, query: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """Runs ``query`` on the reader connection (made again if it was lost); raises
        STORAGE_UNAVAILABLE (and reports it) when the database cannot be read, STORAGE_BUSY when
        it is busy."""
        try:
            if self._reader is None or self._reader.is_closed():
                self._reader = await asyncpg.connect(
                    self._dsn, timeout=self._connect_timeout, server_settings=self._settings
                )
            async with timeout(self._answer_seconds):
                return await query(self._reader)
        except Exception as error:
            problem = storage_error(error)
            if problem is None:
                raise
            if busy_cause(error) is None:
                reader, self._reader = self._reader, None
                if reader is not None:
                    reader.terminate()
                if not self._closed:
                    self._report_problem(problem)
            raise problem from error

    async def _catch_up(self) -> None:
        """Tells every final change after ``delivered``, read from the table."""
        while True:
            after = self.delivered
            rows = await self._read(functools.partial(_read_after, after=after))
            self.reads += 1
            bound, top = int(rows[0][0]), int(rows[0][1])
            changes = [row for row in rows if row[2] is not None]
            for batch in _changes_of(changes):
                self.delivered = max(self.delivered, max(map(_position, batch)))
                self.changes_read += len(batch)
                self._deliver(batch)
            if len(changes) == _PAGE:
                continue
            # Everything below the bound was read: what is missing never will be.
            self.delivered = max(self.delivered, bound - 1)
            if self._hold.observe(bound, top):
                found = await self._read(lambda conn: conn.fetchrow(BLOCKER))
                self._hold.explained(describe(found), self._own_limit)
            held = top > self.delivered
            self._held_pause = (
                min(_HELD_LONGEST, max(_HELD_FIRST, self._held_pause * 2)) if held else 0.0
            )
            return

    # -- other sidecars' notifications -------------------------------------------------------

    def _on_notice(self, notice: Notice) -> None:
        if notice.kind in ("deleted", "app_config", "session_config"):
            self._inbox.append(notice)
        self._wake.set()

    def _on_listening(self, listening: bool) -> None:
        if listening:
            # Configuration notifications may have been missed: every cache entry may be stale.
            self._tell_config(ConfigChanged(None))
        self._wake.set()

    def _apply(self, notices: Sequence[Notice]) -> None:
        for notice in notices:
            if notice.kind == "deleted" and notice.key is not None:
                self._deliver([SessionDeleted(notice.key)])
            elif notice.kind == "app_config":
                self._tell_config(ConfigChanged(notice.app_name))
            elif notice.kind == "session_config" and notice.key is not None:
                self._tell_config(ConfigChanged(notice.app_name, notice.key))

    def _tell_config(self, change: ConfigChanged) -> None:
        try:
            self._config_changed(change)
        except Exception:
            _LOG.exception("a configuration listener failed")

    def _pause(self) -> float:
        """How long the feed waits for a wake-up before it reads anyway."""
        if self._held_pause:
            return self._held_pause
        return self._poll_seconds if self.listening else self._lost_poll_seconds

    async def _work(self) -> None:
        """Reads when woken, and at least every ``_pause()``."""
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                async with timeout(self._pause()):
                    await self._wake.wait()
            since = time.monotonic() - self._last_read
            if since < self._min_interval:
                await asyncio.sleep(self._min_interval - since)
            self._wake.clear()
            notices, self._inbox = self._inbox, []
            self._last_read = time.monotonic()
            try:
                self._apply(notices)
                await self._catch_up()
            except asyncio.CancelledError:
                raise
            except ContextEngineError as error:
                # The database cannot be read now (unreachable: the store's health says so;
                # busy: retried).
                _LOG.debug("store: reading the change feed failed: %s", error.reason)
                await asyncio.sleep(self._lost_poll_seconds)
            except Exception:
                _LOG.exception("store: reading the change feed failed")
                await asyncio.sleep(self._lost_poll_seconds)


async def _start(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(f"SELECT {BOUND} - 1"))


async def _read_after(conn: asyncpg.Connection, *, after: int) -> list[asyncpg.Record]:
    return list(await conn.fetch(_READ, after, _PAGE))
