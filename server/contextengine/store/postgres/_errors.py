"""Which asyncpg errors mean "the database cannot be used now" or "it is busy", and their form.

Two different conditions, told apart because an operator and a load balancer must react to them
differently:

* **Unreachable** (refused, reset, the server shutting down or restarting, too many connections,
  a read-only standby, no answer at all): STORAGE_UNAVAILABLE (a full disk: STORAGE_FULL). The
  sidecar cannot serve; its health becomes NOT_SERVING until a probe succeeds.
* **Busy** (the database answered, but this call waited too long: a lock held by another
  transaction past ``lock_timeout``, a statement past ``statement_timeout``, a transaction of
  this store idle past ``idle_in_transaction_session_timeout``, no free connection of the pool
  in time, conflicts retried too often, delivery held back by a transaction in flight):
  STORAGE_BUSY. The call failed, nothing of it was written, a retry may succeed; the sidecar
  stays SERVING, because one foreign transaction holding a lock must not take every sidecar of
  the database out of service at once.

Both are UNAVAILABLE to gRPC (transient: clients retry it with backoff); the ErrorInfo reason,
the health and the metrics (``contextengine_store_busy_total``) tell them apart. Serialization
failures and deadlocks are retried by the store first (``retryable``). Anything else is a bug or
bad data and propagates unchanged.
"""

from __future__ import annotations

import asyncpg

from contextengine.core.errors import ContextEngineError

_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable (ConnectionError is one)
    TimeoutError,  # no answer within the client's own limit
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

#: errors of a database that answered but made the call wait too long, by cause (the
#: ``cause`` metadata and the metric's label); checked before ``_UNAVAILABLE``
_BUSY: tuple[tuple[type[BaseException], str], ...] = (
    (asyncpg.LockNotAvailableError, "lock_timeout"),
    (asyncpg.QueryCanceledError, "statement_timeout"),  # (or an administrator's cancel)
    (asyncpg.IdleInTransactionSessionTimeoutError, "idle_in_transaction_timeout"),
    (asyncpg.DeadlockDetectedError, "conflict"),  # (once retried: ``retryable``)
    (asyncpg.SerializationError, "conflict"),
)


def busy_cause(error: BaseException) -> str | None:
    """Why ``error`` means a busy database (``lock_timeout``, ``statement_timeout``, ...), else
    None."""
    for kind, cause in _BUSY:
        if isinstance(error, kind):
            return cause
    return None


def busy(cause: str, detail: str, **metadata: object) -> ContextEngineError:
    """STORAGE_BUSY for ``cause``; ``detail`` says what waited."""
    return ContextEngineError(
        "STORAGE_BUSY",
        f"the PostgreSQL database is busy ({cause}: {detail}): nothing was written by this "
        "call unless it reports success on retry (appends are idempotent by event id); the "
        "server stays in service; retry with backoff",
        cause=cause,
        **metadata,
    )


def held_back(what: str, seconds: float) -> ContextEngineError:
    """STORAGE_BUSY when a read waited ``seconds`` for transactions in flight to end."""
    return busy(
        "held_back",
        f"{what} waited {seconds:.0f} s for an older transaction still in flight to end",
    )


def storage_error(error: BaseException) -> ContextEngineError | None:
    """STORAGE_FULL / STORAGE_BUSY / STORAGE_UNAVAILABLE for an error that says the database
    cannot be used now, else None. The message names no DSN (it may hold a password)."""
    if isinstance(error, asyncpg.DiskFullError):
        return ContextEngineError(
            "STORAGE_FULL",
            "the PostgreSQL server's disk is full: nothing was written (acknowledged events are "
            "safe); writes succeed again once space is freed",
            postgres_error=type(error).__name__,
        )
    cause = busy_cause(error)
    if cause is not None:
        return busy(cause, str(error), postgres_error=type(error).__name__)
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
