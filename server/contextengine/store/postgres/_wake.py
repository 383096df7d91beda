"""Waking the other sidecars of a PostgreSQL database after this one committed positions.

Appends and creations do not ``NOTIFY`` inside their transaction: PostgreSQL makes every
committing transaction that notified wait for one lock of the whole cluster, held until its
commit is flushed, so a NOTIFY in every append puts every commit of every sidecar in one lane
again (measured: 179 against 4,276 single-row commits a second at a 5 ms commit latency,
docs/design/concurrent-commits.md). The notification is only a wake-up anyway (the change feeds
read the table), so after a commit that took positions the store asks its ``Waker`` to send one,
from a connection of its own, outside the writer's transaction, with ``synchronous_commit`` off
(nothing waits for a flush; a wake-up lost in a crash costs a safety-net poll).

At most one is in flight: wake-ups asked for meanwhile are sent as one after it, then the waker
rests ``min_interval`` before the next, so a busy sidecar sends a few hundred a second, not one
per commit. A failure is logged at DEBUG and forgotten: the other sidecars' feeds poll anyway.
"""

from __future__ import annotations

import asyncio
import json
import logging

import asyncpg

from contextengine._compat import timeout
from contextengine.store.postgres._listen import ended
from contextengine.store.postgres._ops import CHANNEL

__all__ = ["Waker"]

_LOG = logging.getLogger("contextengine.store")


class Waker:
    """Sends ``{"o": origin, "k": "wake"}`` on the store's channel after local commits."""

    def __init__(
        self,
        dsn: str,
        origin: str,
        *,
        server_settings: dict[str, str],
        connect_timeout: float = 5.0,
        min_interval: float = 0.010,
    ) -> None:
        self._dsn = dsn
        self._payload = json.dumps({"o": origin, "k": "wake"}, separators=(",", ":"))
        self._settings = {**server_settings, "synchronous_commit": "off"}
        self._connect_timeout = connect_timeout
        self._min_interval = min_interval
        self._conn: asyncpg.Connection | None = None
        self._pending = False
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: wake-ups sent (for tests and diagnostics)
        self.sent = 0

    def wake(self) -> None:
        """Asks for a wake-up to be sent soon (never waits, never fails)."""
        if self._closed:
            return
        self._pending = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._send_while_pending())

    async def _send_while_pending(self) -> None:
        while self._pending and not self._closed:
            self._pending = False
            try:
                if self._conn is None or self._conn.is_closed():
                    self._conn = await asyncpg.connect(
                        self._dsn, timeout=self._connect_timeout, server_settings=self._settings
                    )
                async with timeout(self._connect_timeout):
                    await self._conn.execute("SELECT pg_notify($1, $2)", CHANNEL, self._payload)
                self.sent += 1
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the others poll; the next commit tries again
                _LOG.debug("store: a wake-up for other sidecars failed: %r", error)
                self._drop()
            await asyncio.sleep(self._min_interval)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await ended(task)
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                async with timeout(self._connect_timeout):
                    await conn.close()
            except Exception:  # a broken connection: drop it
                conn.terminate()
