"""One process per database file: an exclusive lock on ``<db>.lock``, held while the store is open.

The store's writer is the only writer of its file (it keeps sessions' last sequences in memory),
so a second process appending to the same file would break it (every other append failing with
an IntegrityError). ``SqliteStore.open`` therefore takes ``flock(LOCK_EX | LOCK_NB)`` on a
lock file next to the database before it touches the database, writes its pid and host into it,
and fails with :class:`DatabaseLockedError` (naming that pid) when another process holds it.

What it covers: every process on the same host (containers sharing a volume included, they share
the kernel), whatever their working directory (the path is resolved, symlinks followed). The
kernel drops the lock when the process ends in any way, kill -9 included, so a stale lock file is
never a problem: it is left in place on purpose (deleting it would let a third process lock a
new file while a second one still holds the old one). A second store in the same process
conflicts too (flock belongs to the open file, not the process).

What it does not cover: other hosts on a network file system. On NFS, Linux turns flock into a
byte-range lock on the server, which works only when the NFS lock manager does (NFSv4, or v3 with
lockd); on file systems without locking (some FUSE or SMB mounts) flock may succeed in both
processes. Hard links to one database under two names are two lock files. SQLite over a network
file system is unsafe anyway; give each replica its own database.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket

SUFFIX = ".lock"


class DatabaseLockedError(RuntimeError):
    """Another process (or another open store in this one) holds the database's lock."""

    def __init__(self, database: str, lock_file: str, holder: str) -> None:
        who = holder or "another process"
        super().__init__(
            f"database {database} is in use by {who} (it holds {lock_file}); a database has "
            "one sidecar at a time: stop the other one, or give this one its own --db"
        )
        self.database = database
        self.lock_file = lock_file
        #: what the holder wrote into the lock file ("pid <n> on <host>"), or ""
        self.holder = holder


class DatabaseLock:
    """The lock of one database file; ``acquire`` once, ``release`` when the store closes."""

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self.database = os.fspath(database)
        self.path = os.path.realpath(self.database) + SUFFIX
        self._fd: int | None = None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _read_holder(fd)
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DatabaseLockedError(self.database, self.path, holder) from None
            raise
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        except OSError:
            pass  # a full disk must not keep the store from opening: the lock itself is held
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # releases the flock


def _read_holder(fd: int) -> str:
    with contextlib.suppress(OSError):
        return os.pread(fd, 200, 0).decode(errors="replace").strip()
    return ""
