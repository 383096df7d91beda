"""Runs compactions: one at a time per session, in the background when nobody has to wait.

* ``end_invocation`` schedules ADK's post-invocation compaction (token threshold, then sliding
  window) as a background task and returns at once. A trigger that arrives while the session's
  compaction runs is remembered and runs once after it (single flight, no pile-up).
* ``before_context`` is ADK's in-flow token check: it reads the latest prompt token count without
  waiting for anything; only when the threshold is reached does it take the session's lock (so it
  waits for a running compaction), plan again and summarise, and the context is built after.
* ``compact`` runs a trigger now and waits; ``commit`` appends a client's summary.

A summary is appended only if the log did not move in a way that invalidates its plan: a rewind
or another summary appended after the plan was made discards it (ADK discards a summary whose
append conflicts, too). Summarizer failures (errors, timeouts, nothing or garbage returned) append
nothing, are logged and counted, and put the session in an exponential backoff during which
triggers do not summarise; appends and contexts are never affected.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from contextengine.compaction.summarizer import Summarizer, SummaryInput
from contextengine.core.compaction import (
    CompactionPlan,
    PlanResult,
    TokenReading,
    latest_prompt_token_count,
    plan_sliding_window,
    plan_token_threshold,
    render_events,
    summary_event,
)
from contextengine.core.context import DEFAULT_OTHER_AGENT_PREAMBLE
from contextengine.core.events import normalize_for_append
from contextengine.errors import ContextEngineError
from contextengine.service._app_configs import AppConfigs
from contextengine.service._event_cache import SessionEventCache
from contextengine.store import EventStore, SessionKey
from contextengine.v1 import config_pb2, content_pb2, event_pb2

__all__ = ["Compactor", "Outcome", "SessionStatus", "View"]

_LOG = logging.getLogger("contextengine.compaction")

#: How many times an append is retried when other appends keep moving the log's end.
_APPEND_ATTEMPTS = 8

CLIENT_SUMMARIZER = "client_summarizer"
SUMMARIZER_FAILED = "summarizer_failed"
SUMMARIZER_RETURNED_NOTHING = "summarizer_returned_nothing"
PLAN_STALE = "plan_stale"
NOT_CONFIGURED = "not_configured"


def _configures(config: config_pb2.EventsCompactionConfig, trigger: str) -> bool:
    """Whether ``config`` sets the pair an explicitly requested ``trigger`` needs."""
    if trigger == "sliding_window":
        return config.HasField("compaction_interval") and config.HasField("overlap_size")
    if trigger == "token_threshold":
        return config.HasField("token_threshold") and config.HasField("event_retention_size")
    return True


#: Builds the summarizer for an app's summarizer configuration (None: client summaries only).
SummarizerFactory = Callable[[config_pb2.SummarizerConfig | None], Summarizer | None]
DEFERRED = "deferred"


class CompactionPolicy(Protocol):
    """Adjusts the automatic triggers (the prompt-cache-aware policy,
    ``contextengine.cache.compaction_policy``). Explicit ``compact`` calls are not reviewed."""

    async def due(self, key: SessionKey, view: View, log: list[event_pb2.Event], due: bool) -> bool:
        """Whether the token check before a context runs (``due``: ADK's answer)."""
        ...

    async def review(
        self,
        key: SessionKey,
        trigger: str,
        view: View,
        log: list[event_pb2.Event],
        plan: CompactionPlan,
    ) -> CompactionPlan | None:
        """The plan to run instead of ``plan`` (None: defer)."""
        ...


@dataclass(frozen=True)
class View:
    """Whose prompt the token threshold is measured for."""

    agent_name: str = ""
    branch: str | None = None
    isolation_scope: str | None = None


@dataclass(frozen=True)
class Outcome:
    #: the appended summary event (with its sequence), or None
    summary: event_pb2.Event | None
    #: why nothing was appended ('' when a summary was)
    skipped: str = ""


@dataclass(frozen=True)
class SessionStatus:
    running: bool
    attempts: int
    summaries: int
    failures: int
    last_error: str
    retry_after: float


@dataclass
class _Session:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None
    rerun: bool = False
    attempts: int = 0
    summaries: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_error: str = ""
    retry_after: float = 0.0
    #: content sizes by sequence for the size gate, valid for one generation of the cached log
    sizes: dict[int, int] = field(default_factory=dict)
    sizes_generation: int = -1


def _is_invalidating(event: event_pb2.Event) -> bool:
    return bool(event.actions.rewind_before_invocation_id) or event.actions.HasField("compaction")


def _usable(content: content_pb2.Content) -> bool:
    return any(part.text.strip() for part in content.parts if not part.thought)


class Compactor:
    def __init__(
        self,
        store: EventStore,
        events: SessionEventCache,
        configs: AppConfigs,
        summarizers: SummarizerFactory,
        *,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        backoff_seconds: float = 2.0,
        max_backoff_seconds: float = 300.0,
        policy: CompactionPolicy | None = None,
    ) -> None:
        #: reviews automatic compactions (None: google-adk's triggers and ranges unchanged)
        self.policy = policy
        self._store = store
        self._events = events
        self._configs = configs
        self._summarizer_factory = summarizers
        self._summarizers: dict[bytes, Summarizer | None] = {}
        self._clock = clock
        self._new_id = new_id
        self._backoff = backoff_seconds
        self._max_backoff = max_backoff_seconds
        self._sessions: dict[SessionKey, _Session] = {}
        self._closed = False

    def new_id(self) -> str:
        return self._new_id()

    def now(self) -> float:
        return self._clock()

    # -- configuration -------------------------------------------------------------------------

    async def _app(self, key: SessionKey) -> config_pb2.AppConfig | None:
        return await self._configs.get(key.app_name)

    async def compaction_config(self, key: SessionKey) -> config_pb2.EventsCompactionConfig | None:
        app = await self._app(key)
        if app is None or not app.HasField("events_compaction_config"):
            return None
        return app.events_compaction_config

    async def _preamble(self, key: SessionKey) -> str:
        app = await self._app(key)
        if app is not None and app.HasField("other_agent_preamble"):
            return app.other_agent_preamble
        return DEFAULT_OTHER_AGENT_PREAMBLE

    async def summarizer(self, key: SessionKey) -> Summarizer | None:
        app = await self._app(key)
        config = app.summarizer if app is not None and app.HasField("summarizer") else None
        cache_key = b"" if config is None else config.SerializeToString(deterministic=True)
        if cache_key not in self._summarizers:
            self._summarizers[cache_key] = self._summarizer_factory(config)
        return self._summarizers[cache_key]

    async def prompt_template(self, key: SessionKey) -> str | None:
        """The app's Gemini prompt template, if it configures one."""
        app = await self._app(key)
        if app is None or not app.summarizer.HasField("gemini"):
            return None
        gemini = app.summarizer.gemini
        return gemini.prompt_template if gemini.HasField("prompt_template") else None

    def _session(self, key: SessionKey) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session()
        return session

    # -- planning ------------------------------------------------------------------------------

    async def _log(self, key: SessionKey, session: _Session) -> list[event_pb2.Event]:
        log = await self._events.log(key)
        if session.sizes_generation != log.generation:
            session.sizes = {}
            session.sizes_generation = log.generation
        return log.events

    async def plan(
        self,
        key: SessionKey,
        trigger: str,
        view: View = View(),
        *,
        ignore_trigger: bool = False,
    ) -> PlanResult:
        """The plan ``trigger`` ("after_invocation", "sliding_window", "token_threshold") makes
        now. Raises COMPACTION_NOT_CONFIGURED without a configuration."""
        config = await self._require_config(key, trigger)
        session = self._session(key)
        log = await self._log(key, session)
        preamble = await self._preamble(key)
        return self._plan(log, config, trigger, view, preamble, session, ignore_trigger)

    async def _require_config(
        self, key: SessionKey, trigger: str
    ) -> config_pb2.EventsCompactionConfig:
        await self._events.log(key)  # NOT_FOUND first
        config = await self.compaction_config(key)
        if config is None:
            raise ContextEngineError(
                "COMPACTION_NOT_CONFIGURED",
                f"app {key.app_name!r} has no events_compaction_config",
                app_name=key.app_name,
            )
        if not _configures(config, trigger):
            raise ContextEngineError(
                "COMPACTION_NOT_CONFIGURED",
                f"app {key.app_name!r} does not configure the {trigger} trigger",
                app_name=key.app_name,
            )
        return config

    def _plan(
        self,
        log: list[event_pb2.Event],
        config: config_pb2.EventsCompactionConfig,
        trigger: str,
        view: View,
        preamble: str,
        session: _Session,
        ignore_trigger: bool = False,
    ) -> PlanResult:
        if trigger == "sliding_window":
            return plan_sliding_window(
                log, config, ignore_trigger=ignore_trigger, memo=session.sizes
            )
        if trigger == "token_threshold":
            return plan_token_threshold(
                log,
                config,
                agent_name=view.agent_name,
                branch=view.branch,
                isolation_scope=view.isolation_scope,
                other_agent_preamble=preamble,
                ignore_trigger=ignore_trigger,
                memo=session.sizes,
            )
        token = plan_token_threshold(
            log,
            config,
            other_agent_preamble=preamble,
            ignore_trigger=ignore_trigger,
            memo=session.sizes,
        )
        if token.plan is not None:
            return token
        sliding = plan_sliding_window(
            log, config, ignore_trigger=ignore_trigger, memo=session.sizes
        )
        return token if sliding.skipped == NOT_CONFIGURED else sliding

    # -- triggers ------------------------------------------------------------------------------

    async def end_invocation(self, key: SessionKey) -> bool:
        """Schedules post-invocation compaction in the background; False when the app has no
        compaction configuration or the session is backing off after failures."""
        await self._events.log(key)  # NOT_FOUND for a missing session
        if self._closed or await self.compaction_config(key) is None:
            return False
        session = self._session(key)
        if session.retry_after > self._clock():
            return False
        if session.task is not None and not session.task.done():
            session.rerun = True
            return True
        session.task = asyncio.create_task(self._background(key, session))
        return True

    async def _background(self, key: SessionKey, session: _Session) -> None:
        while True:
            session.rerun = False
            try:
                async with session.lock:
                    await self._after_invocation(key, session)
            except asyncio.CancelledError:
                raise
            except ContextEngineError as error:
                if error.reason != "SESSION_NOT_FOUND":
                    _LOG.warning("background compaction of %s failed: %s", key, error)
            except Exception:
                _LOG.exception("background compaction of %s failed", key)
            if not session.rerun or self._closed:
                return
            if session.retry_after > self._clock():
                # This pass failed: the queued trigger falls in the backoff and does not run.
                session.rerun = False
                return

    async def _after_invocation(self, key: SessionKey, session: _Session) -> Outcome:
        """ADK's post-invocation pass: a token-threshold summary, if one is appended, ends it;
        otherwise (nothing planned, or its summarizer failed) the sliding window runs."""
        config = await self.compaction_config(key)
        if config is None:
            return Outcome(None, NOT_CONFIGURED)
        preamble = await self._preamble(key)
        log = await self._log(key, session)
        if not any(not event.HasField("isolation_scope") for event in log):
            return Outcome(None, "nothing_to_compact")
        token = self._plan(log, config, "token_threshold", View(), preamble, session)
        token_plan = await self._review(key, "token_threshold", View(), log, token.plan)
        if token_plan is not None:
            outcome = await self._summarize_and_append(key, session, token_plan)
            if outcome.summary is not None:
                return outcome
            log = await self._log(key, session)
        sliding = self._plan(log, config, "sliding_window", View(), preamble, session)
        sliding_plan = await self._review(key, "sliding_window", View(), log, sliding.plan)
        if sliding_plan is None:
            if sliding.plan is not None:
                return Outcome(None, DEFERRED)
            return Outcome(
                None, token.skipped if sliding.skipped == NOT_CONFIGURED else sliding.skipped
            )
        return await self._summarize_and_append(key, session, sliding_plan)

    async def _review(
        self,
        key: SessionKey,
        trigger: str,
        view: View,
        log: list[event_pb2.Event],
        plan: CompactionPlan | None,
    ) -> CompactionPlan | None:
        if plan is None or self.policy is None:
            return plan
        return await self.policy.review(key, trigger, view, log, plan)

    async def compact(self, key: SessionKey, trigger: str, view: View = View()) -> Outcome:
        """Runs ``trigger`` now (ignoring any failure backoff) and waits for the outcome."""
        config = await self._require_config(key, trigger)
        session = self._session(key)
        async with session.lock:
            if trigger == "after_invocation":
                return await self._after_invocation(key, session)
            log = await self._log(key, session)
            preamble = await self._preamble(key)
            result = self._plan(log, config, trigger, view, preamble, session)
            if result.plan is None:
                return Outcome(None, result.skipped)
            return await self._summarize_and_append(key, session, result.plan)

    def token_reading(self, log: list[event_pb2.Event], view: View, preamble: str) -> TokenReading:
        return latest_prompt_token_count(
            log,
            agent_name=view.agent_name,
            branch=view.branch,
            isolation_scope=view.isolation_scope,
            other_agent_preamble=preamble,
        )

    async def before_context(self, key: SessionKey, view: View) -> event_pb2.Event | None:
        """ADK's in-flow token check before a model call. Returns the appended summary, if any.
        Waits only when the threshold is reached."""
        config = await self.compaction_config(key)
        if config is None or not (
            config.HasField("token_threshold") and config.HasField("event_retention_size")
        ):
            return None
        session = self._session(key)
        if session.retry_after > self._clock():
            return None
        preamble = await self._preamble(key)
        log = await self._log(key, session)
        reading = self.token_reading(log, view, preamble)
        reached = reading.tokens is not None and reading.tokens >= config.token_threshold
        due = reached
        if self.policy is not None:
            due = await self.policy.due(key, view, log, reached)
        if not due:
            return None
        async with session.lock:
            log = await self._log(key, session)
            result = self._plan(
                log, config, "token_threshold", view, preamble, session, not reached
            )
            plan = await self._review(key, "token_threshold", view, log, result.plan)
            if plan is None:
                return None
            outcome = await self._summarize_and_append(key, session, plan)
            return outcome.summary

    # -- summarising and appending -------------------------------------------------------------

    def _fail(self, key: SessionKey, session: _Session, reason: str, detail: str) -> Outcome:
        session.failures += 1
        session.consecutive_failures += 1
        delay = min(self._max_backoff, self._backoff * 2 ** (session.consecutive_failures - 1))
        session.retry_after = self._clock() + delay
        session.last_error = detail
        _LOG.warning(
            "compaction of %s: %s (%s); no summary appended, next attempt in %.0f s or later",
            key,
            reason,
            detail,
            delay,
        )
        return Outcome(None, reason)

    async def _summarize_and_append(
        self, key: SessionKey, session: _Session, plan: CompactionPlan
    ) -> Outcome:
        summarizer = await self.summarizer(key)
        if summarizer is None:
            return Outcome(None, CLIENT_SUMMARIZER)
        session.attempts += 1
        request = SummaryInput(plan.window, render_events(plan.window))
        try:
            summary = await summarizer.summarize(request)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # any summarizer failure must leave the log untouched
            return self._fail(key, session, SUMMARIZER_FAILED, f"{summarizer.name}: {error!r}")
        if summary is None or not _usable(summary.content):
            return self._fail(
                key, session, SUMMARIZER_RETURNED_NOTHING, f"{summarizer.name}: no summary text"
            )
        event = summary_event(
            plan,
            summary.content,
            event_id=self._new_id(),
            invocation_id=self._new_id(),
            timestamp=self._clock(),
            usage_metadata=summary.usage_metadata,
        )
        appended = await self.append_summary(key, event, plan.based_on_sequence)
        if appended is None:
            _LOG.info("compaction of %s discarded: the log moved (rewind or summary)", key)
            return Outcome(None, PLAN_STALE)
        session.summaries += 1
        session.consecutive_failures = 0
        session.retry_after = 0.0
        session.last_error = ""
        return Outcome(appended)

    async def stale_since(self, key: SessionKey, based_on: int) -> event_pb2.Event | None:
        """The first event after ``based_on`` that invalidates a plan made there, if any."""
        log = await self._events.log(key)
        for event in log.events[based_on:]:
            if event.sequence > based_on and _is_invalidating(event):
                return event
        return None

    async def append_summary(
        self, key: SessionKey, event: event_pb2.Event, based_on: int
    ) -> event_pb2.Event | None:
        """Appends ``event`` unless a rewind or a summary was appended after ``based_on``
        (then None). Appends concurrent with the check are detected by the store's sequence
        check and the check is repeated."""
        normalized = normalize_for_append(event, event.id or self._new_id())
        for _ in range(_APPEND_ATTEMPTS):
            log = await self._events.log(key)
            for logged in log.events[based_on:]:
                if logged.sequence > based_on and _is_invalidating(logged):
                    return None
            try:
                outcome = await self._store.append_events(key, [normalized], log.last_sequence)
            except ContextEngineError as error:
                if error.reason == "SEQUENCE_MISMATCH":
                    continue
                raise
            return outcome.events[0]
        # The log kept moving under the check: give up rather than append unguarded.
        return None

    def lock(self, key: SessionKey) -> asyncio.Lock:
        """The session's compaction lock (held while a compaction of it runs)."""
        return self._session(key).lock

    # -- status and shutdown -------------------------------------------------------------------

    def status(self, key: SessionKey) -> SessionStatus:
        session = self._sessions.get(key)
        if session is None:
            return SessionStatus(False, 0, 0, 0, "", 0.0)
        running = session.lock.locked() or (session.task is not None and not session.task.done())
        retry_after = session.retry_after if session.retry_after > self._clock() else 0.0
        return SessionStatus(
            running,
            session.attempts,
            session.summaries,
            session.failures,
            session.last_error,
            retry_after,
        )

    async def idle(self, key: SessionKey) -> None:
        """Waits until the session's background compaction (if any) has finished."""
        session = self._sessions.get(key)
        while session is not None and session.task is not None and not session.task.done():
            await asyncio.wait({session.task})

    async def close(self) -> None:
        """Cancels background compactions (nothing half-done is ever appended)."""
        self._closed = True
        tasks = [
            s.task for s in self._sessions.values() if s.task is not None and not s.task.done()
        ]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for summarizer in self._summarizers.values():
            if summarizer is None:
                continue
            close = getattr(summarizer, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # closing must not stop the shutdown
                    _LOG.exception("closing summarizer %s failed", summarizer.name)
        self._summarizers.clear()
