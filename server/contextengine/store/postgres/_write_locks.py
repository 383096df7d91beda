"""The PostgreSQL store's write transactions: begun with their locks, before any transaction id.

A write transaction first takes a transaction-level advisory lock for each thing whose order it
changes: the session (its sequences, its state, its existence), and the user's or the app's
shared state when it writes ``user:`` or ``app:`` keys. They are taken in the transaction's first
round trip (``BEGIN; SELECT pg_advisory_xact_lock(...), ...``), before any row is written, so
before the transaction has an id; its id is assigned at its first write, after every lock is
held, and the locks are released only after its commit is visible.

So of two transactions that change one thing, the one that locked it first has the smaller
transaction id, and positions (``_positions``: transaction id first) follow the order in
which each session, user state and app state was changed: a session's events are in sequence
order by position, and replaying the state deltas of an app or a user in position order gives
what the table holds. (A row lock could not give this: the first row lock assigns the id, and a
later one may wait for a transaction with a higher id.) Nothing shared by unrelated sessions is
locked: writes to different sessions without shared state never wait for each other.

Locks are taken in one order (namespace, then key) by every transaction, so two never wait for
each other in a cycle. The keys are 32-bit hashes of the ids: two things whose ids hash alike
share a lock, and are then written one after the other, never wrongly at the same time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg

from contextengine.core.state import APP_PREFIX, USER_PREFIX
from contextengine.store._base import SessionKey

__all__ = [
    "WriteLock",
    "app_lock",
    "session_lock",
    "state_locks",
    "transaction",
    "user_lock",
]

#: the advisory lock spaces (``classid`` of ``pg_advisory_xact_lock(int, int)``): "ce" + 2, 3, 4
#: (``_lock``'s compaction locks are "ce" + 1, held on other connections)
SESSION_SPACE = 0x63650002
USER_SPACE = 0x63650003
APP_SPACE = 0x63650004


@dataclass(frozen=True, order=True)
class WriteLock:
    """One advisory lock: its space and its key (both 32-bit signed integers)."""

    space: int
    key: int


def _key(*ids: str) -> int:
    """A stable 32-bit hash of ``ids`` (the same in every sidecar and every version)."""
    text = json.dumps(list(ids), ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def session_lock(key: SessionKey) -> WriteLock:
    return WriteLock(SESSION_SPACE, _key(key.app_name, key.user_id, key.session_id))


def user_lock(app_name: str, user_id: str) -> WriteLock:
    return WriteLock(USER_SPACE, _key(app_name, user_id))


def app_lock(app_name: str) -> WriteLock:
    return WriteLock(APP_SPACE, _key(app_name))


def state_locks(key: SessionKey, keys: Iterable[str]) -> list[WriteLock]:
    """The locks of the user's and the app's state that writing state ``keys`` needs."""
    user = app = False
    for name in keys:
        if name.startswith(USER_PREFIX):
            user = True
        elif name.startswith(APP_PREFIX):
            app = True
    locks: list[WriteLock] = []
    if user:
        locks.append(user_lock(key.app_name, key.user_id))
    if app:
        locks.append(app_lock(key.app_name))
    return locks


def _begin(locks: Iterable[WriteLock]) -> str:
    """``BEGIN`` and the locks in the canonical order, as one simple query (integers only)."""
    ordered = sorted(set(locks))
    if not ordered:
        return "BEGIN"
    taken = ", ".join(f"pg_advisory_xact_lock({lock.space}, {lock.key})" for lock in ordered)
    return f"BEGIN; SELECT {taken}"


@asynccontextmanager
async def transaction(
    conn: asyncpg.Connection,
    locks: Iterable[WriteLock],
    committing: Callable[[], None] | None = None,
) -> AsyncIterator[None]:
    """A READ COMMITTED transaction holding ``locks`` from its first round trip; committed when
    the block ends (``committing`` is called as the COMMIT is sent), rolled back when it raises
    (or when the COMMIT itself fails before the server ended the transaction). A connection
    that cannot even roll back is closed (the pool then makes a new one)."""
    try:
        await conn.execute(_begin(locks))
        yield
        if committing is not None:
            committing()
        await conn.execute("COMMIT")
    except BaseException:
        try:
            if conn.is_in_transaction():
                await conn.execute("ROLLBACK")
        except Exception:  # the connection is broken or gone: whatever it held ends with it
            with contextlib.suppress(Exception):
                conn.terminate()
        raise
