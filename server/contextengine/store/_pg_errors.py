"""Which asyncpg errors mean "the database cannot be used now", and their gRPC-facing form.

Connection-level failures (refused, reset, the server shutting down or restarting, too many
connections, a read-only standby) become STORAGE_UNAVAILABLE, a full disk STORAGE_FULL: the
client gets a clear, retryable status and the sidecar's health follows. Serialization failures
and deadlocks are retried by the store (``retryable``). Anything else is a bug or bad data and
propagates unchanged.
"""

from __future__ import annotations

import asyncpg

from contextengine.core.errors import ContextEngineError

_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable (ConnectionError is one)
    TimeoutError,
    asyncpg.PostgresConnectionError,  # SQLSTATE class 08
    asyncpg.ConnectionDoesNotExistError,  # the connection was lost mid-query
    asyncpg.InterfaceError,  # "connection is closed", pool closing
    asyncpg.OperatorInterventionError,  # class 57: admin shutdown, crash shutdown, starting up
    asyncpg.InsufficientResourcesError,  # class 53: too many connections, out of memory
    asyncpg.ReadOnlySQLTransactionError,  # a standby (after a failover, before DNS follows)
    # "cannot switch to state ...; another operation is in progress": a connection the server
    # dropped mid-operation (seen when PostgreSQL restarts under load); the store drops it
    asyncpg.InternalClientError,
)


def storage_error(error: BaseException) -> ContextEngineError | None:
    """STORAGE_FULL / STORAGE_UNAVAILABLE for an error that says the database cannot be used,
    else None. The message names no DSN (it may hold a password)."""
    if isinstance(error, asyncpg.DiskFullError):
        return ContextEngineError(
            "STORAGE_FULL",
            "the PostgreSQL server's disk is full: nothing was written (acknowledged events are "
            "safe); writes succeed again once space is freed",
            postgres_error=type(error).__name__,
        )
    if isinstance(error, _UNAVAILABLE):
        return ContextEngineError(
            "STORAGE_UNAVAILABLE",
            "the PostgreSQL database cannot be reached: nothing was written by this call unless "
            "it reports success on retry (appends are idempotent by event id); retry later",
            postgres_error=type(error).__name__,
        )
    return None


def retryable(error: BaseException) -> bool:
    """A transaction that failed only because of a concurrent one (serialization failure,
    deadlock, a unique key a concurrent insert took first): run it again."""
    return isinstance(
        error,
        asyncpg.SerializationError | asyncpg.DeadlockDetectedError | asyncpg.UniqueViolationError,
    )
