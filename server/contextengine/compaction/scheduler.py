"""ADK's post-invocation compaction, in the background: :meth:`Scheduler.schedule` starts the
pass as a task of the session and returns at once (``Compactor.end_invocation``). A trigger that arrives while the session's pass
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
from contextengine.store import SessionKey

__all__ = ["Scheduler"]

_LOG = logging.getLogger("contextengine.compaction")


class Scheduler:
    def __init__(self, sessions: Sessions, runner: Runner) -> None:
        self._sessions = sessions
        self._runner = runner
        #: closed: nothing is scheduled any more
        self.closed = False

    def schedule(self, key: SessionKey) -> bool:
        """Schedules the post-invocation pass of a session that has a compaction configuration;
        False when the session is backing off after failures."""
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
            if not state.rerun or self.closed:
                return

    async def idle(self, key: SessionKey) -> None:
        """Waits until the session's background pass (if any) has finished."""
        state = self._sessions.get(key)
        while state is not None and state.task is not None and state.running():
            await asyncio.wait({state.task})

    async def close(self) -> None:
        """Stops scheduling, cancels the running passes and waits for them to end (nothing
        half-done is ever appended)."""
        self.closed = True
        tasks = self._sessions.running_tasks()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
