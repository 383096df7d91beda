"""One compaction of a session at a time across every sidecar of a PostgreSQL database.

Two sidecars told to compact the same session must not both summarise the same range: the
guarded append (``compaction.guarded_append``) already refuses the second summary, but only
after its summarizer call was paid for. So ``PostgresStore.compaction_lock`` holds a session-level
advisory lock, ``pg_advisory_lock(namespace, hashtext(session key))``, around each compaction:
the second sidecar waits, then plans on a log that holds the first one's summary.

The lock lives on a connection of a small pool of its own (a compaction holds it for its
summarizer call, seconds; the store's pool stays free for appends and reads). It ends with the
connection: a sidecar that dies mid-compaction (kill -9) frees it when PostgreSQL notices the
closed socket, and a connection given back to the pool drops every advisory lock it held
(asyncpg resets it with ``pg_advisory_unlock_all()``). Two sessions whose keys hash alike share
a lock: they are compacted one after the other, never wrongly at the same time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from contextengine._compat import timeout
from contextengine.core.errors import ContextEngineError
from contextengine.store._base import SessionKey
from contextengine.store.postgres._errors import storage_error

__all__ = ["CompactionLocks"]

#: the advisory lock space of compaction (``classid`` of ``pg_advisory_lock(int, int)``): "ce"+1
NAMESPACE = 0x63650001


def lock_name(key: SessionKey) -> str:
    """The text hashed into the lock's id (unambiguous: ids may hold any character)."""
    return json.dumps([key.app_name, key.user_id, key.session_id], ensure_ascii=False)


class CompactionLocks:
    """Advisory locks per session on their own pool (opened on first use)."""

    def __init__(self, dsn: str, *, max_connections: int = 4, connect_timeout: float = 5.0) -> None:
        """``max_connections``: how many of this sidecar's compactions can hold or wait for a
        lock at once (more wait for a connection)."""
        self._dsn = dsn
        self._max_connections = max_connections
        self._connect_timeout = connect_timeout
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()

    async def _get_pool(self) -> asyncpg.Pool:
        async with self._opening:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self._dsn,
                    min_size=0,
                    max_size=self._max_connections,
                    timeout=self._connect_timeout,
                )
            return self._pool

    @asynccontextmanager
    async def hold(self, key: SessionKey) -> AsyncIterator[None]:
        """Holds the session's compaction lock for the block (waits while another sidecar, or
        another compaction of this one, holds it). STORAGE_UNAVAILABLE when the database
        cannot be reached."""
        try:
            pool = await self._get_pool()
            conn = await pool.acquire(timeout=self._connect_timeout)
        except Exception as error:
            raise _unavailable(error) from error
        try:
            try:
                await conn.execute(
                    "SELECT pg_advisory_lock($1, hashtext($2))", NAMESPACE, lock_name(key)
                )
            except Exception as error:
                raise _unavailable(error) from error
            yield
        finally:
            # Releasing resets the connection, which drops its advisory locks; a connection
            # the server closed has none left.
            try:
                await pool.release(conn, timeout=self._connect_timeout)
            except Exception:  # a broken connection: drop it
                conn.terminate()

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                async with timeout(self._connect_timeout):
                    await pool.close()
            except Exception:  # the server is gone: drop the connections
                pool.terminate()


def _unavailable(error: Exception) -> Exception:
    """STORAGE_UNAVAILABLE / STORAGE_FULL for an unreachable database, else ``error``."""
    problem: ContextEngineError | None = storage_error(error)
    return problem if problem is not None else error
