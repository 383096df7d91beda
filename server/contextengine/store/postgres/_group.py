"""Group commit of one PostgreSQL store's appends: callers that wait together share a transaction.

Each append costs a transaction four round trips and a durable commit (``_ops``). When many
callers append at once (one sidecar serving many agents), a transaction per call spends the
sidecar's CPU on round trips and holds a pooled connection through every commit's flush: at a
few milliseconds per commit the pool, not the database, caps the sidecar. So appends queue here
and a transaction takes everything queued when it starts (up to ``max_events``): a caller alone
goes at once, callers that arrive meanwhile go together in the next one. One transaction, one
commit, four round trips for the whole group. The database's own group commit (``commit_delay``)
then shares flushes between sidecars.

When does the next transaction start? The fewer transactions are in flight at once, the larger
the groups and the less CPU per event (measured: 419 us of sidecar CPU per event with one
transaction at a time against 702 with five, docs/design/concurrent-commits.md). So one starts
when none is in flight, and otherwise only when each one in flight either has been committing
for ``overlap_seconds`` (a slow commit spends its time waiting for the flush, with nothing left
to do here: the next group is built meanwhile, and consecutive flushes overlap) or has been
building for ``stall_seconds`` (it waits before its COMMIT: a lock a foreign transaction holds,
a slow statement; it must not hold up every append of the sidecar). At most ``in_flight`` run
at once.

Each append is planned on its own (``_group_plan``): one whose plan fails gets its error and
the others are written. A database error fails the whole transaction; the group's appends are
then run again one transaction each, so that one session's trouble (a foreign lock, a bad row)
fails only its own caller; when the database cannot be reached (STORAGE_UNAVAILABLE,
STORAGE_FULL, SHUTTING_DOWN) they all fail with that error at once. A caller that stops waiting
(cancelled) does not stop its append: it commits with its group.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from contextengine.core.errors import ContextEngineError
from contextengine.store._base import AppendOutcome
from contextengine.store.postgres._group_plan import AppendRequest, Result

__all__ = ["GroupCommit"]

#: errors for which running the appends one by one would only repeat them
_FAILS_EVERYONE = frozenset({"STORAGE_UNAVAILABLE", "STORAGE_FULL", "SHUTTING_DOWN"})

#: commits a group in one transaction, calling its second argument as it sends the COMMIT
Run = Callable[[Sequence[AppendRequest], Callable[[], None]], Awaitable[list[Result]]]


class GroupCommit:
    """The queue of one store's appends and the transactions that take them (see the module)."""

    def __init__(
        self,
        run: Run,
        *,
        in_flight: int,
        max_events: int,
        stall_seconds: float = 0.025,
        overlap_seconds: float = 0.0005,
    ) -> None:
        """``run`` commits a group in one transaction (the store's ``_ops.append_group`` on a
        pooled connection, with its error handling)."""
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, not {in_flight}")
        self._run = run
        self._in_flight = in_flight
        self._max_events = max_events
        self._stall = stall_seconds
        self._overlap = overlap_seconds
        #: the transactions in flight: when each started, when it sent its COMMIT (None: not yet)
        self._flights: list[_Flight] = []
        self._check: asyncio.TimerHandle | None = None
        self._queue: deque[tuple[AppendRequest, asyncio.Future[AppendOutcome]]] = deque()
        self._running = 0
        self._tasks: set[asyncio.Task[None]] = set()
        #: transactions run and appends committed through them (for diagnostics and tests)
        self.transactions = 0
        self.appends = 0

    async def append(self, request: AppendRequest) -> AppendOutcome:
        """Appends with the next group; returns its outcome or raises its error."""
        future: asyncio.Future[AppendOutcome] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)
        self._queue.append((request, future))
        self._start()
        return await asyncio.shield(future)

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        while self._running < self._in_flight and self._queue:
            now = loop.time()
            waits = [flight.until(self._stall, self._overlap) for flight in self._flights]
            later = [at for at in waits if at > now]
            if later:
                # A transaction in flight is building or has just sent its COMMIT: the appends
                # that wait go with the next one, once it commits, stalls or ends.
                if self._check is None:
                    self._check = loop.call_at(min(later), self._checked)
                return
            group = [self._queue.popleft()]
            events = len(group[0][0].events)
            while self._queue and events + len(self._queue[0][0].events) <= self._max_events:
                events += len(self._queue[0][0].events)
                group.append(self._queue.popleft())
            self._running += 1
            flight = _Flight(now)
            self._flights.append(flight)
            task = loop.create_task(self._commit(group, flight))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _checked(self) -> None:
        self._check = None
        self._start()

    async def _commit(
        self, group: list[tuple[AppendRequest, asyncio.Future[AppendOutcome]]], flight: _Flight
    ) -> None:
        loop = asyncio.get_running_loop()

        def committing() -> None:
            if flight.committing is None:
                flight.committing = loop.time()
                self._start()

        try:
            results = await self._results([request for request, _ in group], committing)
        except asyncio.CancelledError:
            for _, future in group:
                future.cancel()
            raise
        finally:
            self._flights.remove(flight)
            self._running -= 1
            self._start()
        for (_, future), result in zip(group, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def _results(
        self, requests: list[AppendRequest], committing: Callable[[], None]
    ) -> list[Result | BaseException]:
        self.transactions += 1
        try:
            results: list[Result | BaseException] = list(await self._run(requests, committing))
        except Exception as error:
            if len(requests) == 1 or (
                isinstance(error, ContextEngineError) and error.reason in _FAILS_EVERYONE
            ):
                return [error] * len(requests)
            # One of them may be the cause: each in a transaction of its own.
            committing()
            return list(await asyncio.gather(*(self._alone(r) for r in requests)))
        self.appends += len(requests)
        return results

    async def _alone(self, request: AppendRequest) -> Result | BaseException:
        self.transactions += 1
        try:
            (result,) = await self._run([request], _nothing)
        except Exception as error:
            return error
        self.appends += 1
        return result


def _retrieve(future: asyncio.Future[AppendOutcome]) -> None:
    """Marks an append's error as seen (its caller may have stopped waiting for it)."""
    if not future.cancelled():
        future.exception()


@dataclass
class _Flight:
    """A transaction of appends in flight: when it started, when it sent its COMMIT."""

    started: float
    committing: float | None = None

    def until(self, stall: float, overlap: float) -> float:
        """Until when the next transaction waits for this one (loop time)."""
        if self.committing is None:
            return self.started + stall
        return self.committing + overlap


def _nothing() -> None:
    """What a transaction of one append run alone tells as it commits: nothing."""
