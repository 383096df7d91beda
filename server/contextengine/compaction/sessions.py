"""Per-session compaction state: the session's lock, its background task, its counters and
failure backoff, and the size gate's memo.

A session's state is dropped once no call uses it and it holds nothing to keep: no counters
(``GetCompactionStatus`` reads them) and no sizes. The lock lives in a
:class:`~contextengine.runtime.locks.KeyedLocks`, so it too exists only while held or awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass, field

from contextengine.compaction.types import SessionStatus
from contextengine.runtime.event_cache import SessionLog
from contextengine.runtime.locks import KeyedLocks
from contextengine.store import SessionKey

__all__ = ["SessionState", "Sessions"]

#: Backoff doubles per consecutive failure up to this exponent (far beyond any maximum delay;
#: an unbounded power of two stops converting to float after 1024 failures).
_MAX_BACKOFF_DOUBLINGS = 60


@dataclass
class SessionState:
    #: the background post-invocation task (``Compactor.end_invocation``)
    task: asyncio.Task[None] | None = None
    #: a trigger arrived while ``task`` ran: run once more after it
    rerun: bool = False
    #: calls using this entry now (``Sessions.using``)
    users: int = 0
    attempts: int = 0
    summaries: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_error: str = ""
    retry_after: float = 0.0
    #: content sizes by sequence for the size gate, valid for one generation of the cached log
    sizes: dict[int, int] = field(default_factory=dict)
    sizes_generation: int = -1

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def disposable(self) -> bool:
        """Nothing to keep once no call uses it: no counters (so no error or backoff either),
        no sizes to reuse, no background task."""
        return self.users == 0 and not self.running() and self.attempts == 0 and not self.sizes

    def sizes_for(self, log: SessionLog) -> dict[int, int]:
        """The size gate's memo for ``log`` (emptied when the cached log was rebuilt)."""
        if self.sizes_generation != log.generation:
            self.sizes = {}
            self.sizes_generation = log.generation
        return self.sizes


class Sessions:
    """The sessions' compaction state, their locks and their failure backoff."""

    def __init__(
        self,
        clock: Callable[[], float],
        backoff: float,
        max_backoff: float,
        shared_lock: Callable[[SessionKey], AbstractAsyncContextManager[None]] | None = None,
    ) -> None:
        """``backoff``: the delay after a first failure, doubled per consecutive failure up to
        ``max_backoff`` (seconds). ``shared_lock``: the store's lock of a session's compaction
        among the processes sharing it (``EventStore.compaction_lock``), taken inside this
        process's own lock (None: this process's lock alone)."""
        self._clock = clock
        self._shared_lock = shared_lock
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._states: dict[SessionKey, SessionState] = {}
        self._locks: KeyedLocks[SessionKey] = KeyedLocks()

    @contextmanager
    def using(self, key: SessionKey) -> Iterator[SessionState]:
        """The session's state, kept at least until the block is left. Every use of a session's
        state goes through here (or is its background task), so a state is only ever dropped
        when nobody holds or waits for the session's lock."""
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = SessionState()
        state.users += 1
        try:
            yield state
        finally:
            state.users -= 1
            self.drop_if_disposable(key, state)

    def drop_if_disposable(self, key: SessionKey, state: SessionState) -> None:
        if state.disposable() and self._states.get(key) is state:
            del self._states[key]

    def lock(self, key: SessionKey) -> AbstractAsyncContextManager[None]:
        """Holds the session's compaction lock: one compaction of a session at a time, in this
        process and (with ``shared_lock``) in every process sharing the store."""
        return self._hold(key)

    @asynccontextmanager
    async def _hold(self, key: SessionKey) -> AsyncIterator[None]:
        async with self._locks.hold(key):
            shared = self._shared_lock(key) if self._shared_lock is not None else nullcontext()
            async with shared:
                yield

    def backing_off(self, state: SessionState) -> bool:
        return state.retry_after > self._clock()

    def failed(self, state: SessionState, detail: str) -> float:
        """Counts a failed attempt and starts (or lengthens) the backoff; returns its delay."""
        state.failures += 1
        state.consecutive_failures += 1
        doublings = min(state.consecutive_failures - 1, _MAX_BACKOFF_DOUBLINGS)
        delay = min(self._max_backoff, self._backoff * (1 << doublings))
        state.retry_after = self._clock() + delay
        state.last_error = detail
        return delay

    @staticmethod
    def succeeded(state: SessionState) -> None:
        """Counts an appended summary and ends any backoff."""
        state.summaries += 1
        state.consecutive_failures = 0
        state.retry_after = 0.0
        state.last_error = ""

    def get(self, key: SessionKey) -> SessionState | None:
        """The session's state, if it has any now (does not keep it)."""
        return self._states.get(key)

    def status(self, key: SessionKey) -> SessionStatus:
        state = self._states.get(key)
        if state is None:  # never used, or dropped with nothing to show
            return SessionStatus(False, 0, 0, 0, "", 0.0)
        running = self._locks.locked(key) or state.running()
        retry_after = state.retry_after if self.backing_off(state) else 0.0
        return SessionStatus(
            running,
            state.attempts,
            state.summaries,
            state.failures,
            state.last_error,
            retry_after,
        )

    def running_tasks(self) -> list[asyncio.Task[None]]:
        """The background tasks still running."""
        return [s.task for s in self._states.values() if s.task is not None and s.running()]

    def __len__(self) -> int:
        """How many sessions have state now (diagnostics and tests)."""
        return len(self._states)
