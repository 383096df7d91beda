"""How long committed changes wait for an older transaction still in flight, told and explained.

A reader passes no position whose transaction may still commit (``_positions``): while a
transaction with a smaller id is open, changes committed after it wait, on every sidecar of the
database. That is a delay, never a loss or a reordering; this module makes it visible. After each
complete read the change feed says whether committed changes wait above the bound (``observe``,
with the highest waiting position). The changes seen waiting first are followed until the bound
passes them: their wait, so far, is reported to ``report`` (the store's metric
``contextengine_store_delivery_held_seconds``; 0 when nothing waits). Once a wait reaches
``log_after`` seconds the feed asks who holds it (``BLOCKER``: the oldest transaction in flight,
from ``pg_stat_activity``) and logs one WARNING line naming it; when it ends, one INFO line says
how long it lasted.

The store bounds how long its own transactions stay open (``_timeouts``); a foreign one (an
administrator's session, another application on the same cluster: transaction ids are the
cluster's) holds delivery back until it commits or rolls back, which the WARNING line says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import asyncpg

__all__ = ["BLOCKER", "HoldWatch", "describe"]

_LOG = logging.getLogger("contextengine.store")

#: the oldest transaction in flight and what ``pg_stat_activity`` says of it (no row there: a
#: prepared transaction, or a backend this user may not see)
BLOCKER = """
SELECT x.xmin::text, a.pid, a.datname, a.application_name, a.usename, a.state,
    extract(epoch FROM clock_timestamp() - a.xact_start)::float8
FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) x
    LEFT JOIN pg_stat_activity a ON a.backend_xid = x.xmin::xid
"""


def describe(row: asyncpg.Record | None) -> str:
    """A ``BLOCKER`` row as words for the log."""
    if row is None:
        return "an unknown transaction"
    xid, pid, database, application, user, state, age = row
    if pid is None:
        return f"transaction {xid} (not in pg_stat_activity: a prepared transaction?)"
    opened = f", open {age:.1f} s" if age is not None else ""
    return (
        f"transaction {xid} (pid {pid}, database {database!r}, user {user!r}, application "
        f"{application!r}, {state}{opened})"
    )


class HoldWatch:
    """Follows the committed changes that wait for an older transaction (see the module)."""

    def __init__(
        self,
        report: Callable[[float], None],
        *,
        log_after: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._report = report
        self._log_after = log_after
        self._clock = clock
        #: the highest position seen waiting first, and when it was seen (None: nothing waits)
        self._waiting: tuple[int, float] | None = None
        self._explained = False

    @property
    def seconds(self) -> float:
        """How long the followed changes have waited so far (0 when nothing waits)."""
        return 0.0 if self._waiting is None else self._clock() - self._waiting[1]

    def observe(self, bound: int, top: int) -> bool:
        """After a complete read at ``bound``, with ``top`` the highest committed position:
        True when the wait should now be explained (``explained``)."""
        now = self._clock()
        if self._waiting is not None and bound > self._waiting[0]:
            waited = now - self._waiting[1]
            if self._explained:
                _LOG.info(
                    "store: changes held back by an older transaction are delivered, after %.1f s",
                    waited,
                )
            self._waiting = None
            self._explained = False
        if self._waiting is None and top >= bound:
            self._waiting = (top, now)
        seconds = self.seconds
        self._report(seconds)
        return not self._explained and seconds >= self._log_after

    def explained(self, blocker: str, own_limit: float) -> None:
        """Logs who holds the changes back (once per wait)."""
        self._explained = True
        _LOG.warning(
            "store: changes committed %.1f s ago wait for an older transaction still in "
            "flight, %s: subscribers and state watches on every sidecar of the database receive "
            "them once it commits or rolls back (never out of order, never lost); this store's "
            "own transactions end within %.0f s, others only when their client ends them",
            self.seconds,
            blocker,
            own_limit,
        )
