"""The limits the PostgreSQL store sets on every connection of its own.

A foreign transaction holding a lock, a statement that cannot finish, or one of this store's
transactions left open (its sidecar stopped between two statements) must not hold a call, a
pooled connection or the readers' bound (``_positions``) for longer than a known time. So
every connection the store opens (its pool, the change feed's reader, the waker) starts with:

* ``lock_timeout``: the longest a statement waits for a lock (a row, an advisory lock, a
  table); beyond, the call fails with STORAGE_BUSY ``lock_timeout``;
* ``statement_timeout``: the longest a statement runs; beyond, STORAGE_BUSY
  ``statement_timeout``;
* ``idle_in_transaction_session_timeout``: the longest one of the store's transactions may
  stay open between two statements; beyond, PostgreSQL ends the connection and the transaction
  rolls back. This bounds how long a stopped sidecar (SIGSTOP, a frozen VM) holds back every
  reader of the database.

and the client waits at most ``statement_timeout`` plus ``ANSWER_MARGIN`` for any answer: a
server that does not answer at all is unreachable (STORAGE_UNAVAILABLE).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

__all__ = ["ANSWER_MARGIN", "Timeouts", "application_name"]

#: seconds the client waits beyond ``statement_timeout`` before it calls a server unreachable
ANSWER_MARGIN = 5.0


def application_name() -> str:
    """``application_name`` of the store's connections: ``contextengine <host> <pid>``, so that
    ``pg_stat_activity`` (and the log line naming a transaction that holds delivery back) says
    which sidecar a connection belongs to (a pod's host name is the pod's name). At most 63
    bytes, PostgreSQL's limit."""
    name = f"contextengine {socket.gethostname()} {os.getpid()}"
    return name.encode("ascii", "replace")[:63].decode("ascii")


@dataclass(frozen=True)
class Timeouts:
    """The store's connection limits, in seconds (``EngineSettings.postgres_*``)."""

    lock_seconds: float = 2.0
    statement_seconds: float = 30.0
    idle_in_transaction_seconds: float = 5.0

    def __post_init__(self) -> None:
        for name in ("lock_seconds", "statement_seconds", "idle_in_transaction_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")

    def server_settings(self) -> dict[str, str]:
        """The settings a connection starts with (asyncpg's ``server_settings``)."""
        return {
            "application_name": application_name(),
            "lock_timeout": _ms(self.lock_seconds),
            "statement_timeout": _ms(self.statement_seconds),
            "idle_in_transaction_session_timeout": _ms(self.idle_in_transaction_seconds),
        }

    @property
    def answer_seconds(self) -> float:
        """The longest the client waits for an answer (then: unreachable)."""
        return self.statement_seconds + ANSWER_MARGIN


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"
