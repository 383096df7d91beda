"""Runs compactions: one at a time per session, in the background when nobody has to wait.

:class:`Compactor` is the one object the engine talks to; the work is split by job:

* ``end_invocation`` schedules ADK's post-invocation compaction (token threshold, then sliding
  window) as a background task and returns at once (:mod:`~contextengine.compaction.scheduler`:
  single flight, no pile-up).
* ``before_context`` is ADK's in-flow token check (:mod:`~contextengine.compaction.token_check`):
  it waits for anything only when the threshold is reached.
* ``compact`` runs a trigger now and waits (:mod:`~contextengine.compaction.runner`: plan,
  review, summarise, guarded append); ``exclusive`` holds the session's lock while a client's
  summary is checked and appended (``CommitCompaction``).
* per-session state, locks, failure backoff and status live in
  :mod:`~contextengine.compaction.sessions`; the guarded append of a summary in
  :mod:`~contextengine.compaction.guarded_append`; the configuration in effect comes from the
  :class:`~contextengine.runtime.resolver.ConfigResolver`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from contextengine.compaction import guarded_append
from contextengine.compaction.guarded_append import invalidated_since
from contextengine.compaction.planning import make_plan, require_config
from contextengine.compaction.runner import Runner
from contextengine.compaction.scheduler import Scheduler
from contextengine.compaction.sessions import Sessions
from contextengine.compaction.summarizer_pool import SummarizerPool
from contextengine.compaction.token_check import TokenCheck
from contextengine.compaction.types import (
    AFTER_INVOCATION,
    CompactionPolicy,
    ContentsChars,
    ContextCheck,
    Outcome,
    SessionStatus,
    SummarizerFactory,
    View,
)
from contextengine.core.compaction import PlanResult
from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.runtime.resolver import ConfigResolver
from contextengine.store import EventStore, SessionKey
from contextengine.v1 import event_pb2

__all__ = [
    "AFTER_INVOCATION",
    "CompactionPolicy",
    "Compactor",
    "ContextCheck",
    "Outcome",
    "SessionStatus",
    "SummarizerFactory",
    "View",
    "invalidated_since",
]

#: the default view: no agent, branch or scope (ADK's post-invocation view)
_NO_VIEW = View()


class Compactor:
    def __init__(
        self,
        store: EventStore,
        events: SessionEventCache,
        resolver: ConfigResolver,
        summarizers: SummarizerFactory,
        *,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        backoff_seconds: float = 2.0,
        max_backoff_seconds: float = 300.0,
        policy: CompactionPolicy | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        """``resolver``: the configuration in effect (a session's compaction configuration over
        its app's); ``policy`` reviews automatic compactions (None: google-adk's triggers and
        ranges unchanged)."""
        self._store = store
        self._events = events
        self._resolver = resolver
        self._clock = clock
        self._new_id = new_id
        self._summarizers = SummarizerPool(resolver, summarizers)
        self._sessions = Sessions(
            clock, backoff_seconds, max_backoff_seconds, shared_lock=store.compaction_lock
        )
        self._runner = Runner(
            store,
            events,
            resolver,
            self._summarizers,
            self._sessions,
            clock=clock,
            new_id=new_id,
            policy=policy,
            telemetry=telemetry,
        )
        self._token_check = TokenCheck(resolver, self._sessions, self._runner)
        self._scheduler = Scheduler(self._sessions, self._runner)

    @property
    def policy(self) -> CompactionPolicy | None:
        """Reviews automatic compactions (None: google-adk's triggers and ranges unchanged)."""
        return self._runner.policy

    @policy.setter
    def policy(self, policy: CompactionPolicy | None) -> None:
        self._runner.policy = policy

    def new_id(self) -> str:
        return self._new_id()

    def now(self) -> float:
        return self._clock()

    async def prompt_template(self, key: SessionKey) -> str | None:
        """The app's Gemini prompt template, if it configures one."""
        return await self._resolver.prompt_template(key.app_name)

    # -- planning and triggers -----------------------------------------------------------------

    async def plan(
        self,
        key: SessionKey,
        trigger: str,
        view: View = _NO_VIEW,
        *,
        ignore_trigger: bool = False,
    ) -> PlanResult:
        """The plan ``trigger`` ("after_invocation", "sliding_window", "token_threshold") makes
        now. Raises COMPACTION_NOT_CONFIGURED without a configuration."""
        config = await require_config(self._events, self._resolver, key, trigger)
        with self._sessions.using(key) as state:
            log = await self._runner.log(key, state)
            preamble = await self._resolver.preamble(key.app_name)
            return make_plan(
                log.events, config, trigger, view, preamble, state.sizes, ignore_trigger
            )

    async def end_invocation(self, key: SessionKey) -> bool:
        """Schedules post-invocation compaction in the background; False when no compaction
        configuration is in effect or the session is backing off after failures."""
        await self._events.log(key)  # NOT_FOUND for a missing session
        if self._scheduler.closed or await self._resolver.compaction(key) is None:
            return False
        return self._scheduler.schedule(key)

    async def compact(self, key: SessionKey, trigger: str, view: View = _NO_VIEW) -> Outcome:
        """Runs ``trigger`` now (ignoring any failure backoff) and waits for the outcome."""
        config = await require_config(self._events, self._resolver, key, trigger)
        with self._sessions.using(key) as state:
            async with self._sessions.lock(key):
                return await self._runner.run(key, state, trigger, view, config)

    async def before_context(
        self, key: SessionKey, view: View, *, contents_chars: ContentsChars | None = None
    ) -> ContextCheck:
        """ADK's in-flow token check before a model call of ``view``'s agent; compacts first when
        it is due. Waits (for a running compaction, then the summarizer) only then.

        ``contents_chars(log, options)``: the characters of the contents ``options`` give over
        ``log``, for the estimate when no prompt token count is recorded (the context builder
        answers from its incrementally built views; without it the contents are built here)."""
        return await self._token_check.before_context(key, view, contents_chars)

    # -- client summaries ----------------------------------------------------------------------

    async def stale_since(self, key: SessionKey, based_on: int) -> event_pb2.Event | None:
        """The first event after ``based_on`` that invalidates a plan made there, if any."""
        return invalidated_since((await self._events.log(key)).events, based_on)

    async def append_summary(
        self, key: SessionKey, event: event_pb2.Event, based_on: int, *, created: float
    ) -> event_pb2.Event | None:
        """Appends ``event`` to the session created at ``created`` unless a rewind or a summary
        was appended after ``based_on``, or the session is another one by now (then None)."""
        return await guarded_append.append_summary(
            self._store, self._events, key, event, based_on, created=created, new_id=self._new_id
        )

    @asynccontextmanager
    async def exclusive(self, key: SessionKey) -> AsyncIterator[None]:
        """Holds the session's compaction lock: no compaction of it runs meanwhile."""
        with self._sessions.using(key):
            async with self._sessions.lock(key):
                yield

    # -- status and shutdown -------------------------------------------------------------------

    def status(self, key: SessionKey) -> SessionStatus:
        return self._sessions.status(key)

    def tracked_sessions(self) -> int:
        """How many sessions have per-session state now (diagnostics and tests)."""
        return len(self._sessions)

    async def idle(self, key: SessionKey) -> None:
        """Waits until the session's background compaction (if any) has finished."""
        await self._scheduler.idle(key)

    async def close(self) -> None:
        """Cancels background compactions and waits for them to end (nothing half-done is ever
        appended), then closes the summarizers."""
        await self._scheduler.close()
        await self._summarizers.close()
