"""ADK's post-invocation compaction, in the background: ``end_invocation`` schedules the pass
as a task of the session and returns at once. A trigger that arrives while the session's pass
runs is remembered and runs once after it (single flight, no pile-up); a trigger that finds the
session backing off after failures, or that waited for the lock while a pass failed, does not
summarise.
"""

from __future__ import annotations

import asyncio
import logging

from contextengine.compaction.runner import Runner
from contextengine.compaction.sessions import Sessions, SessionState
from contextengine.core.errors import ContextEngineError
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.runtime.resolver import ConfigResolver
from contextengine.store import SessionKey

__all__ = ["Scheduler"]

_LOG = logging.getLogger("contextengine.compaction")


class Scheduler:
    def __init__(
        self,
        events: SessionEventCache,
        resolver: ConfigResolver,
        sessions: Sessions,
        runner: Runner,
    ) -> None:
        self._events = events
        self._resolver = resolver
        self._sessions = sessions
        self._runner = runner
        self._closed = False

    async def end_invocation(self, key: SessionKey) -> bool:
        """Schedules the post-invocation pass; False when no compaction configuration is in
        effect, the session is backing off after failures, or the scheduler is closed."""
        await self._events.log(key)  # NOT_FOUND for a missing session
        if self._closed or await self._resolver.compaction(key) is None:
            return False
        with self._sessions.using(key) as state:
            if self._sessions.backing_off(state):
                return False
            if state.running():
                state.rerun = True
                return True
            task = state.task = asyncio.create_task(self._background(key, state))
            # Runs even when the task is cancelled before it starts.
            task.add_done_callback(lambda _: self._sessions.drop_if_disposable(key, state))
            return True

    async def _background(self, key: SessionKey, state: SessionState) -> None:
        while True:
            state.rerun = False
            try:
                async with self._sessions.lock(key):
                    if self._sessions.backing_off(state):
                        # A pass (this task's previous one, or another trigger's) failed while
                        # this one waited: the trigger falls in the backoff and does not run.
                        return
                    await self._runner.after_invocation(key, state)
            except asyncio.CancelledError:
                raise
            except ContextEngineError as error:
                if error.reason != "SESSION_NOT_FOUND":
                    _LOG.warning("background compaction of %s failed: %s", key, error)
            except Exception:
                _LOG.exception("background compaction of %s failed", key)
            if not state.rerun or self._closed:
                return

    async def idle(self, key: SessionKey) -> None:
        """Waits until the session's background pass (if any) has finished."""
        state = self._sessions.get(key)
        while state is not None and state.task is not None and state.running():
            await asyncio.wait({state.task})

    async def close(self) -> None:
        """Stops scheduling, cancels the running passes and waits for them to end (nothing
        half-done is ever appended)."""
        self._closed = True
        tasks = self._sessions.running_tasks()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
