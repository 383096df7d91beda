"""Runs compactions: one at a time per session, in the background when nobody has to wait.

* ``end_invocation`` schedules ADK's post-invocation compaction (token threshold, then sliding
  window) as a background task and returns at once. A trigger that arrives while the session's
  compaction runs is remembered and runs once after it (single flight, no pile-up).
* ``before_context`` is ADK's in-flow token check: it reads the latest prompt token count without
  waiting for anything; only when the threshold is reached does it take the session's lock (so it
  waits for a running compaction), plan again and summarise, and the context is built after.
* ``compact`` runs a trigger now and waits; ``exclusive`` holds the session's lock while a
  client's summary is checked and appended (``CommitCompaction``).

A summary is appended only if the log did not move in a way that invalidates its plan: a rewind
or another summary appended after the plan was made, or the session deleted and created again,
discards it (ADK discards a summary whose append conflicts, too). Summarizer failures (errors,
timeouts, nothing or garbage returned) append nothing, are logged and counted, and put the
session in an exponential backoff during which triggers do not summarise (nor does a trigger that
was waiting for the session's lock when the failure happened); appends and contexts are never
affected.

Per-session state (lock, task, counters, the size gate's memo) is dropped once no call uses it
and it holds nothing to keep: no counters (``GetCompactionStatus`` reads them) and no sizes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from contextengine.compaction.summarizers.summarizer import Summarizer, SummaryInput
from contextengine.core.compaction import (
    SLIDING_WINDOW,
    TOKEN_THRESHOLD,
    CompactionPlan,
    PlanResult,
    RecordedScan,
    TokenReading,
    has_live_root_events,
    latest_prompt_token_count,
    plan_after_invocation,
    plan_sliding_window,
    plan_token_threshold,
    render_events,
    scan_recorded,
    summary_event,
)
from contextengine.core.context import DEFAULT_OTHER_AGENT_PREAMBLE, ContextOptions
from contextengine.core.errors import ContextEngineError
from contextengine.core.events import normalize_for_append
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.event_cache import SessionEventCache, SessionLog
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import EventStore, SessionKey
from contextengine.v1 import config_pb2, content_pb2, event_pb2

__all__ = [
    "CompactionPolicy",
    "Compactor",
    "ContextCheck",
    "Outcome",
    "SessionStatus",
    "SummarizerFactory",
    "View",
    "invalidated_since",
]

_LOG = logging.getLogger("contextengine.compaction")

#: How many times an append is retried when other appends keep moving the log's end.
_APPEND_ATTEMPTS = 8
#: recorded-count scans kept for the token check (least recently used dropped)
_MAX_SCANS = 10_000
#: Backoff doubles per consecutive failure up to this exponent (far beyond any maximum delay;
#: an unbounded power of two stops converting to float after 1024 failures).
_MAX_BACKOFF_DOUBLINGS = 60

AFTER_INVOCATION = "after_invocation"

#: Why nothing was appended (besides the planners' reasons).
CLIENT_SUMMARIZER = "client_summarizer"
SUMMARIZER_FAILED = "summarizer_failed"
SUMMARIZER_RETURNED_NOTHING = "summarizer_returned_nothing"
PLAN_STALE = "plan_stale"
NOT_CONFIGURED = "not_configured"
NOTHING_TO_COMPACT = "nothing_to_compact"
DEFERRED = "deferred"


def _configures(config: config_pb2.EventsCompactionConfig, trigger: str) -> bool:
    """Whether ``config`` sets the pair ``trigger`` needs (any pair for after_invocation)."""
    if trigger == SLIDING_WINDOW:
        return config.HasField("compaction_interval") and config.HasField("overlap_size")
    if trigger == TOKEN_THRESHOLD:
        return config.HasField("token_threshold") and config.HasField("event_retention_size")
    return True


#: The characters of the contents the options give over the log (see ``before_context``).
ContentsChars = Callable[[SessionLog, ContextOptions], int]

#: Builds the summarizer for an app's summarizer configuration (None: client summaries only).
SummarizerFactory = Callable[[config_pb2.SummarizerConfig | None], Summarizer | None]


class CompactionPolicy(Protocol):
    """Adjusts the automatic passes (the prompt-cache-aware policy,
    ``contextengine.prompt_cache.compaction_policy``): the token check before a context and the
    post-invocation pass, also when ``Compact`` runs the latter (its default trigger). ``Compact``
    with an explicit sliding-window or token-threshold trigger is not reviewed."""

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
class ContextCheck:
    """What the token check before a context did."""

    #: the summary it appended (None: none)
    summary: event_pb2.Event | None = None
    #: the log it read, when it went no further (no compaction due): the context can be built
    #: from it instead of reading the log again
    log: SessionLog | None = None


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
    #: the background post-invocation task (``end_invocation``)
    task: asyncio.Task[None] | None = None
    #: a trigger arrived while ``task`` ran: run once more after it
    rerun: bool = False
    #: calls using this entry now (``Compactor._using``)
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


def _is_invalidating(event: event_pb2.Event) -> bool:
    return bool(event.actions.rewind_before_invocation_id) or event.actions.HasField("compaction")


def invalidated_since(events: list[event_pb2.Event], based_on: int) -> event_pb2.Event | None:
    """The first event of the log ``events`` after sequence ``based_on`` that invalidates a plan
    made there (a rewind or a summary), if any."""
    for event in events[based_on:]:  # sequences start at 1, without gaps
        if event.sequence > based_on and _is_invalidating(event):
            return event
    return None


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
        session_configs: SessionConfigs | None = None,
    ) -> None:
        """``session_configs``: sessions' own compaction configurations, which replace their
        app's (None: the app's always applies)."""
        #: reviews automatic compactions (None: google-adk's triggers and ranges unchanged)
        self.policy = policy
        self._store = store
        self._events = events
        self._configs = configs
        self._session_configs = session_configs
        self._summarizer_factory = summarizers
        self._summarizers: dict[bytes, Summarizer | None] = {}
        self._clock = clock
        self._new_id = new_id
        self._backoff = backoff_seconds
        self._max_backoff = max_backoff_seconds
        self._sessions: dict[SessionKey, _Session] = {}
        #: the last recorded-count scan per (session, agent, scope), with its log's generation
        self._scans: OrderedDict[tuple[SessionKey, str, str | None], tuple[int, RecordedScan]] = (
            OrderedDict()
        )
        self._closed = False

    def new_id(self) -> str:
        return self._new_id()

    def now(self) -> float:
        return self._clock()

    # -- configuration -------------------------------------------------------------------------

    async def _app(self, key: SessionKey) -> config_pb2.AppConfig | None:
        return await self._configs.get(key.app_name)

    async def compaction_config(self, key: SessionKey) -> config_pb2.EventsCompactionConfig | None:
        """The configuration in effect for the session (its own, else its app's); None: the
        session is not compacted."""
        if self._session_configs is not None:
            return await self._session_configs.compaction(key)
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

    @contextmanager
    def _using(self, key: SessionKey) -> Iterator[_Session]:
        """The session's state, kept at least until the block is left. Every use of a session's
        entry goes through here (or is its background task), so an entry is only ever dropped
        when nobody holds or waits for its lock."""
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session()
        session.users += 1
        try:
            yield session
        finally:
            session.users -= 1
            self._drop_if_disposable(key, session)

    def _drop_if_disposable(self, key: SessionKey, session: _Session) -> None:
        if session.disposable() and self._sessions.get(key) is session:
            del self._sessions[key]

    def _backing_off(self, session: _Session) -> bool:
        return session.retry_after > self._clock()

    # -- planning ------------------------------------------------------------------------------

    async def _log(self, key: SessionKey, session: _Session) -> SessionLog:
        log = await self._events.log(key)
        if session.sizes_generation != log.generation:
            session.sizes = {}
            session.sizes_generation = log.generation
        return log

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
        with self._using(key) as session:
            log = await self._log(key, session)
            preamble = await self._preamble(key)
            return self._plan(log.events, config, trigger, view, preamble, session, ignore_trigger)

    async def _require_config(
        self, key: SessionKey, trigger: str
    ) -> config_pb2.EventsCompactionConfig:
        await self._events.log(key)  # NOT_FOUND first
        config = await self.compaction_config(key)
        if config is None:
            raise ContextEngineError(
                "COMPACTION_NOT_CONFIGURED",
                f"neither session {key.session_id!r} nor its app {key.app_name!r} has an "
                "events_compaction_config",
                app_name=key.app_name,
            )
        if not _configures(config, trigger):
            raise ContextEngineError(
                "COMPACTION_NOT_CONFIGURED",
                f"the compaction configuration of session {key.session_id!r} (app "
                f"{key.app_name!r}) does not configure the {trigger} trigger",
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
        reading: Callable[[], TokenReading] | None = None,
    ) -> PlanResult:
        """``reading`` (token threshold): the token reading, when the caller has a cheaper way to
        it than the planner's own."""
        if trigger == SLIDING_WINDOW:
            return plan_sliding_window(
                log, config, ignore_trigger=ignore_trigger, memo=session.sizes
            )
        if trigger == TOKEN_THRESHOLD:
            return plan_token_threshold(
                log,
                config,
                agent_name=view.agent_name,
                branch=view.branch,
                isolation_scope=view.isolation_scope,
                other_agent_preamble=preamble,
                ignore_trigger=ignore_trigger,
                memo=session.sizes,
                reading=reading,
            )
        return plan_after_invocation(
            log,
            config,
            other_agent_preamble=preamble,
            ignore_trigger=ignore_trigger,
            memo=session.sizes,
        )

    # -- triggers ------------------------------------------------------------------------------

    async def end_invocation(self, key: SessionKey) -> bool:
        """Schedules post-invocation compaction in the background; False when the app has no
        compaction configuration or the session is backing off after failures."""
        await self._events.log(key)  # NOT_FOUND for a missing session
        if self._closed or await self.compaction_config(key) is None:
            return False
        with self._using(key) as session:
            if self._backing_off(session):
                return False
            if session.running():
                session.rerun = True
                return True
            task = session.task = asyncio.create_task(self._background(key, session))
            # Runs even when the task is cancelled before it starts.
            task.add_done_callback(lambda _: self._drop_if_disposable(key, session))
            return True

    async def _background(self, key: SessionKey, session: _Session) -> None:
        while True:
            session.rerun = False
            try:
                async with session.lock:
                    if self._backing_off(session):
                        # A pass (this task's previous one, or another trigger's) failed while
                        # this one waited: the trigger falls in the backoff and does not run.
                        return
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

    async def _after_invocation(self, key: SessionKey, session: _Session) -> Outcome:
        """ADK's post-invocation pass: a token-threshold summary, if one is appended, ends it;
        otherwise (nothing planned, deferred, or its summarizer failed) the sliding window runs.
        When neither appends anything, the reason is the sliding window's, or the token
        threshold's if the sliding window is not configured."""
        config = await self.compaction_config(key)
        if config is None:
            return Outcome(None, NOT_CONFIGURED)
        preamble = await self._preamble(key)
        log = await self._log(key, session)
        if not has_live_root_events(log.events):
            return Outcome(None, NOTHING_TO_COMPACT)
        token = self._plan(log.events, config, TOKEN_THRESHOLD, View(), preamble, session)
        token_skipped = token.skipped
        if token.plan is not None:
            plan = await self._review(key, TOKEN_THRESHOLD, View(), log.events, token.plan)
            if plan is None:
                token_skipped = DEFERRED
            else:
                outcome = await self._summarize_and_append(key, session, plan, log.create_time)
                if outcome.summary is not None:
                    return outcome
                token_skipped = outcome.skipped
                log = await self._log(key, session)
        sliding = self._plan(log.events, config, SLIDING_WINDOW, View(), preamble, session)
        if sliding.plan is None:
            return Outcome(
                None, token_skipped if sliding.skipped == NOT_CONFIGURED else sliding.skipped
            )
        plan = await self._review(key, SLIDING_WINDOW, View(), log.events, sliding.plan)
        if plan is None:
            return Outcome(None, DEFERRED)
        return await self._summarize_and_append(key, session, plan, log.create_time)

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
        with self._using(key) as session:
            async with session.lock:
                if trigger == AFTER_INVOCATION:
                    return await self._after_invocation(key, session)
                log = await self._log(key, session)
                preamble = await self._preamble(key)
                result = self._plan(log.events, config, trigger, view, preamble, session)
                if result.plan is None:
                    return Outcome(None, result.skipped)
                return await self._summarize_and_append(key, session, result.plan, log.create_time)

    async def before_context(
        self, key: SessionKey, view: View, *, contents_chars: ContentsChars | None = None
    ) -> ContextCheck:
        """ADK's in-flow token check before a model call of ``view``'s agent; compacts first when
        it is due. Waits (for a running compaction, then the summarizer) only then.

        ``contents_chars(log, options)``: the characters of the contents ``options`` give over
        ``log``, for the estimate when no prompt token count is recorded (the context service
        answers from its incrementally built views; without it the contents are built here)."""
        config = await self.compaction_config(key)
        if config is None or not _configures(config, TOKEN_THRESHOLD):
            return ContextCheck()
        with self._using(key) as session:
            if self._backing_off(session):
                return ContextCheck()
            preamble = await self._preamble(key)
            log = await self._log(key, session)
            reading = self._reading(key, view, log, preamble, contents_chars)
            reached = reading.tokens is not None and reading.tokens >= config.token_threshold
            due = reached
            if self.policy is not None:
                due = await self.policy.due(key, view, log.events, reached)
            if not due:
                return ContextCheck(log=log)
            async with session.lock:
                if self._backing_off(session):
                    return ContextCheck()  # the compaction this call waited for failed
                log = await self._log(key, session)
                latest = log
                result = self._plan(
                    log.events,
                    config,
                    TOKEN_THRESHOLD,
                    view,
                    preamble,
                    session,
                    not reached,
                    # The log may have moved while this call waited: read again, the cheap way.
                    reading=lambda: self._reading(key, view, latest, preamble, contents_chars),
                )
                plan = await self._review(key, TOKEN_THRESHOLD, view, log.events, result.plan)
                if plan is None:
                    return ContextCheck()
                outcome = await self._summarize_and_append(key, session, plan, log.create_time)
                return ContextCheck(outcome.summary)

    def _reading(
        self,
        key: SessionKey,
        view: View,
        log: SessionLog,
        preamble: str,
        contents_chars: ContentsChars | None,
    ) -> TokenReading:
        """ADK's token reading for ``view``'s agent over ``log``, without O(n) passes where the
        caches allow: a log without rewinds is its own rewound log and the walk for a recorded
        count resumes the previous one; the estimate comes from ``contents_chars``."""
        rewinds = any(item.rewind_target for item in log.items)
        return latest_prompt_token_count(
            log.events,
            rewound=None if rewinds else log.events,
            scan=None if rewinds else self._scan(key, view, log),
            agent_name=view.agent_name,
            branch=view.branch,
            isolation_scope=view.isolation_scope,
            other_agent_preamble=preamble,
            contents_chars=None if contents_chars is None else lambda o: contents_chars(log, o),
        )

    def _scan(self, key: SessionKey, view: View, log: SessionLog) -> RecordedScan:
        """``scan_recorded`` of a log without rewinds, resumed from the previous call's scan of
        the same cached log (same generation: it has only grown since)."""
        memo_key = (key, view.agent_name, view.isolation_scope)
        memo = self._scans.pop(memo_key, None)
        previous = None
        if memo is not None and memo[0] == log.generation and memo[1].count <= len(log.events):
            previous = memo[1]
        scan = scan_recorded(log.events, view.agent_name, view.isolation_scope, previous)
        self._scans[memo_key] = (log.generation, scan)
        while len(self._scans) > _MAX_SCANS:
            self._scans.popitem(last=False)
        return scan

    # -- summarising and appending -------------------------------------------------------------

    def _fail(self, key: SessionKey, session: _Session, reason: str, detail: str) -> Outcome:
        session.failures += 1
        session.consecutive_failures += 1
        doublings = min(session.consecutive_failures - 1, _MAX_BACKOFF_DOUBLINGS)
        delay = min(self._max_backoff, self._backoff * 2**doublings)
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
        self, key: SessionKey, session: _Session, plan: CompactionPlan, created: float
    ) -> Outcome:
        """Summarises ``plan`` (made from the log of the session created at ``created``) and
        appends the summary if the plan still holds."""
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
        appended = await self.append_summary(key, event, plan.based_on_sequence, created=created)
        if appended is None:
            _LOG.info(
                "compaction of %s discarded: the log moved (rewind, summary, new session)", key
            )
            return Outcome(None, PLAN_STALE)
        session.summaries += 1
        session.consecutive_failures = 0
        session.retry_after = 0.0
        session.last_error = ""
        return Outcome(appended)

    async def stale_since(self, key: SessionKey, based_on: int) -> event_pb2.Event | None:
        """The first event after ``based_on`` that invalidates a plan made there, if any."""
        return invalidated_since((await self._events.log(key)).events, based_on)

    async def append_summary(
        self, key: SessionKey, event: event_pb2.Event, based_on: int, *, created: float
    ) -> event_pb2.Event | None:
        """Appends ``event`` to the session created at ``created`` unless a rewind or a summary
        was appended after ``based_on``, or the session is another one by now (then None).
        Appends concurrent with the check are detected by the store's sequence check and the
        check is repeated."""
        normalized = normalize_for_append(event, event.id or self._new_id())
        for _ in range(_APPEND_ATTEMPTS):
            log = await self._events.log(key)
            if log.create_time != created or invalidated_since(log.events, based_on) is not None:
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

    @asynccontextmanager
    async def exclusive(self, key: SessionKey) -> AsyncIterator[None]:
        """Holds the session's compaction lock: no compaction of it runs meanwhile."""
        with self._using(key) as session:
            async with session.lock:
                yield

    # -- status and shutdown -------------------------------------------------------------------

    def status(self, key: SessionKey) -> SessionStatus:
        session = self._sessions.get(key)
        if session is None:  # never used, or dropped with nothing to show
            return SessionStatus(False, 0, 0, 0, "", 0.0)
        running = session.lock.locked() or session.running()
        retry_after = session.retry_after if self._backing_off(session) else 0.0
        return SessionStatus(
            running,
            session.attempts,
            session.summaries,
            session.failures,
            session.last_error,
            retry_after,
        )

    def tracked_sessions(self) -> int:
        """How many sessions have per-session state now (diagnostics and tests)."""
        return len(self._sessions)

    async def idle(self, key: SessionKey) -> None:
        """Waits until the session's background compaction (if any) has finished."""
        session = self._sessions.get(key)
        while session is not None and session.task is not None and session.running():
            await asyncio.wait({session.task})

    async def close(self) -> None:
        """Cancels background compactions and waits for them to end (nothing half-done is ever
        appended), then closes the summarizers."""
        self._closed = True
        tasks = [s.task for s in self._sessions.values() if s.task is not None and s.running()]
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
