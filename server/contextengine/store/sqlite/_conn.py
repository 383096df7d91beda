"""Opening SQLite connections with the store's settings, and running code on their threads.

Every aiosqlite call is one round trip between the event loop and the connection's thread
(about 40 µs of latency, and more CPU than that: two thread wake-ups and a GIL hand-over each
way). The store therefore runs each unit of work (a whole write batch, a whole read) as one
synchronous function on that thread: one round trip instead of one per statement; and its
writer, with ``durability="normal"``, runs its batches on the event loop's thread itself
(``direct``: no round trip at all).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

import aiosqlite

Durability = Literal["normal", "full"]

#: how long a statement waits for another process's lock before failing with SQLITE_BUSY
BUSY_TIMEOUT_MS = 5000

_SYNCHRONOUS: dict[Durability, str] = {"normal": "NORMAL", "full": "FULL"}

T = TypeVar("T")


@dataclass(frozen=True)
class ConnectionSettings:
    """The pragmas in effect on a connection (see ``SqliteStore.diagnostics``)."""

    journal_mode: str
    #: SQLite's numbering: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
    synchronous: int
    foreign_keys: bool
    busy_timeout_ms: int
    query_only: bool


async def connect(
    path: str | os.PathLike[str],
    *,
    durability: Durability,
    read_only: bool,
    any_thread: bool = False,
) -> aiosqlite.Connection:
    """A connection in autocommit mode (the store issues BEGIN/COMMIT itself), WAL journal,
    foreign keys on and ``synchronous`` per ``durability``. The writer must connect first: it
    switches the file to WAL, which is persistent. With ``any_thread`` the underlying
    ``sqlite3.Connection`` may also be used from other threads than the connection's own
    (``direct``), one at a time: its owner sees to that."""
    conn = await aiosqlite.connect(
        os.fspath(path), isolation_level=None, check_same_thread=not any_thread
    )
    try:
        await run(conn, lambda db: _configure(db, durability=durability, read_only=read_only))
    except BaseException:
        await conn.close()
        raise
    return conn


async def run(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Calls ``fn`` with the underlying ``sqlite3.Connection`` on the connection's own thread.

    Uses aiosqlite's (private) queue of thread calls, which is exactly how its public methods run
    statements; aiosqlite is pinned, and every store test goes through here.
    """
    queue_call = cast(Callable[..., Awaitable[T]], conn._execute)
    return await queue_call(_call_with_connection, conn, fn)


def direct(conn: aiosqlite.Connection) -> sqlite3.Connection:
    """The underlying connection of ``conn``, to be used on the calling thread (``conn`` must
    be made with ``connect(any_thread=True)``, and nothing may run on its own thread then)."""
    return conn._conn


def _call_with_connection(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    return fn(conn._conn)


def _configure(db: sqlite3.Connection, *, durability: Durability, read_only: bool) -> None:
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if not read_only:
        (mode,) = db.execute("PRAGMA journal_mode = WAL").fetchone()
        if str(mode).lower() != "wal":
            raise RuntimeError(f"could not switch the database to WAL (journal_mode is {mode})")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[durability]}")
    if read_only:
        db.execute("PRAGMA query_only = ON")


def settings(db: sqlite3.Connection) -> ConnectionSettings:
    def pragma(name: str) -> object:
        return db.execute(f"PRAGMA {name}").fetchone()[0]

    return ConnectionSettings(
        journal_mode=str(pragma("journal_mode")),
        synchronous=int(cast(int, pragma("synchronous"))),
        foreign_keys=bool(pragma("foreign_keys")),
        busy_timeout_ms=int(cast(int, pragma("busy_timeout"))),
        query_only=bool(pragma("query_only")),
    )
