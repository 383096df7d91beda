"""The LISTEN side of the change feed: other sidecars' notifications, parsed, on one connection.

A dedicated connection ``LISTEN``\\s on the store's channel (asyncpg's ``add_listener``). Each
notification of another origin (payloads: ``migrations/postgres/0001_init.sql`` and ``0005``) is
parsed into a ``Notice`` and handed to ``on_notice``; this store's own are skipped (its listeners
were told in process). Every ``check_seconds`` a ``SELECT 1`` finds a connection that died
silently; a lost connection (the server restarted, an administrator or a proxy ended it) is made
again with backoff (0.1 s doubling to ``max_backoff_seconds``). ``on_listening`` is told False
when it is lost and True once it is back (notifications may have been missed meanwhile). A lost
connection is logged at WARNING, and again when it is back; it never stops the sidecar from
serving (the feed polls).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from contextengine._compat import timeout
from contextengine.store._base import SessionKey
from contextengine.store._dsn import mask_dsn
from contextengine.store.postgres._ops import CHANNEL

__all__ = ["Listener", "Notice", "ended", "parse"]

_LOG = logging.getLogger("contextengine.store")


@dataclass(frozen=True)
class Notice:
    """One parsed notification of another sidecar: its ``kind`` ("wake", "deleted",
    "app_config", "session_config"; any other kind is read as "wake"), the app, and the
    session when it names one."""

    origin: str
    kind: str
    app_name: str
    key: SessionKey | None


def parse(payload: str) -> Notice | None:
    """The notice of a payload; None for one this version cannot read."""
    try:
        message = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    kind = message.get("k")
    if not isinstance(kind, str):
        return None
    app_name = message.get("a", "")
    user_id, session_id = message.get("u"), message.get("s")
    key = (
        SessionKey(app_name, user_id, session_id)
        if isinstance(app_name, str) and isinstance(user_id, str) and isinstance(session_id, str)
        else None
    )
    origin = message.get("o")
    return Notice(
        origin if isinstance(origin, str) else "",
        kind,
        app_name if isinstance(app_name, str) else "",
        key,
    )


class Listener:
    """Keeps a LISTEN connection up and hands other origins' notices to ``on_notice``."""

    def __init__(
        self,
        *,
        dsn: str,
        origin: str,
        on_notice: Callable[[Notice], None],
        on_listening: Callable[[bool], None],
        server_settings: dict[str, str],
        check_seconds: float = 2.0,
        connect_timeout: float = 5.0,
        max_backoff_seconds: float = 5.0,
    ) -> None:
        self._dsn = dsn
        self._origin = origin
        self._on_notice = on_notice
        self._on_listening = on_listening
        self._settings = server_settings
        self._check_seconds = check_seconds
        self._connect_timeout = connect_timeout
        self._max_backoff = max_backoff_seconds
        #: set when the listening connection ends (the server closed it)
        self._lost = asyncio.Event()
        self._conn: asyncpg.Connection | None = None
        self._closed = False
        self.listening = False
        #: times the connection was made again (for diagnostics and tests)
        self.reconnects = 0

    async def connect(self) -> None:
        """The first connection (raises when it cannot be made: ``keep_listening`` retries)."""
        conn = await asyncpg.connect(
            self._dsn, timeout=self._connect_timeout, server_settings=self._settings
        )
        try:
            await conn.add_listener(CHANNEL, self._on_notification)
            conn.add_termination_listener(lambda _conn: self._lost.set())
        except BaseException:
            conn.terminate()
            raise
        self._lost.clear()
        self._conn = conn
        self.listening = True

    def close(self) -> None:
        self._closed = True

    def _on_notification(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        notice = parse(payload)
        if notice is None:
            _LOG.warning("store: a notification this sidecar cannot read: %.200s", payload)
            return
        if notice.origin != self._origin:
            self._on_notice(notice)

    async def disconnect(self) -> None:
        conn, self._conn = self._conn, None
        self.listening = False
        if conn is not None and not conn.is_closed():
            try:
                async with timeout(self._connect_timeout):
                    await conn.close()
            except Exception:  # closing a broken connection
                conn.terminate()

    async def _alive(self) -> bool:
        conn = self._conn
        if conn is None or conn.is_closed():
            return False
        try:
            async with timeout(self._connect_timeout):
                await conn.fetchval("SELECT 1")
        except Exception:  # any failure means the connection is gone
            return False
        return True

    async def keep_listening(self) -> None:
        """Checks the connection every ``check_seconds``; makes it again with backoff when it
        is gone. Returns once closed."""
        backoff = 0.1
        while not self._closed:
            if self.listening:
                with contextlib.suppress(TimeoutError):
                    async with timeout(self._check_seconds):
                        await self._lost.wait()
                if not self._lost.is_set() and await self._alive():
                    continue
                _LOG.warning(
                    "store: lost the LISTEN connection to PostgreSQL at %s: reconnecting; "
                    "other sidecars' changes arrive by polling meanwhile",
                    mask_dsn(self._dsn),
                )
                await self.disconnect()
                self._on_listening(False)
                backoff = 0.1
            try:
                await self.connect()
            except asyncio.CancelledError:
                raise
            except Exception:  # retried with backoff
                await asyncio.sleep(backoff)
                backoff = min(self._max_backoff, backoff * 2)
                continue
            self.reconnects += 1
            _LOG.warning("store: listening to PostgreSQL at %s again", mask_dsn(self._dsn))
            self._on_listening(True)


async def ended(task: asyncio.Task[None]) -> None:
    """Waits for a cancelled ``task`` to end, cancelling it again while it goes on: a
    cancellation can be lost on the way (Python 3.11's ``asyncio.wait_for`` returns the result
    instead when what it waits for completes in the same turn, as asyncpg's internals may), and
    a feed loop that lost one would keep the store's ``close`` waiting forever."""
    while not task.done():
        await asyncio.wait((task,), timeout=0.1)
        task.cancel()
    if not task.cancelled() and task.exception() is not None:
        _LOG.warning("store: a background task of the store failed: %r", task.exception())
