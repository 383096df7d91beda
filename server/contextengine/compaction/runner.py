"""Runs one compaction pass of a session: plan, let the policy review the plan, summarise the
planned range, append the summary if the plan still holds.

The caller holds the session's lock (``Sessions.lock``) and its state (``Sessions.using``).
Summarizer failures (errors, timeouts, nothing or garbage returned) append nothing, are logged
and counted, and put the session in an exponential backoff (``Sessions.failed``); appends and
contexts are never affected.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable

from contextengine.compaction.guarded_append import append_summary
from contextengine.compaction.planning import make_plan
from contextengine.compaction.sessions import Sessions, SessionState
from contextengine.compaction.summarizer_pool import SummarizerPool
from contextengine.compaction.summarizers.summarizer import SummaryInput
from contextengine.compaction.types import (
    AFTER_INVOCATION,
    CLIENT_SUMMARIZER,
    DEFERRED,
    NOT_CONFIGURED,
    NOTHING_TO_COMPACT,
    PLAN_STALE,
    SUMMARIZER_FAILED,
    SUMMARIZER_RETURNED_NOTHING,
    CompactionPolicy,
    Outcome,
    View,
)
from contextengine.core.compaction import (
    SLIDING_WINDOW,
    TOKEN_THRESHOLD,
    CompactionPlan,
    has_live_root_events,
    render_events,
    summary_event,
)
from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.runtime.event_cache import SessionEventCache, SessionLog
from contextengine.runtime.resolver import ConfigResolver
from contextengine.store import EventLog, SessionKey
from contextengine.v1 import config_pb2, content_pb2

__all__ = ["Runner"]

_LOG = logging.getLogger("contextengine.compaction")


def _usable(content: content_pb2.Content) -> bool:
    return any(part.text.strip() for part in content.parts if not part.thought)


class Runner:
    def __init__(
        self,
        store: EventLog,
        events: SessionEventCache,
        resolver: ConfigResolver,
        summarizers: SummarizerPool,
        sessions: Sessions,
        *,
        clock: Callable[[], float],
        new_id: Callable[[], str],
        policy: CompactionPolicy | None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self._events = events
        #: told of each pass's outcome and each summarizer call (``core.telemetry``)
        self._telemetry = telemetry
        self._resolver = resolver
        self._summarizers = summarizers
        #: the guarded append of a summary event (``guarded_append.append_summary``)
        self._append = functools.partial(append_summary, store, events, new_id=new_id)
        self._sessions = sessions
        self._clock = clock
        self._new_id = new_id
        #: reviews automatic compactions (None: google-adk's triggers and ranges unchanged)
        self.policy = policy

    async def log(self, key: SessionKey, state: SessionState) -> SessionLog:
        """The session's cached log (the state's size memo follows its generation)."""
        log = await self._events.log(key)
        state.sizes_for(log)
        return log

    async def review(
        self, key: SessionKey, view: View, log: SessionLog, plan: CompactionPlan | None
    ) -> CompactionPlan | None:
        """The plan the policy runs instead of ``plan`` (None: defer, or nothing planned)."""
        if plan is None or self.policy is None:
            return plan
        reviewed = await self.policy.review(key, view, log.events, plan)
        if reviewed is None:
            self._telemetry.compaction("deferred")
        return reviewed

    async def run(
        self,
        key: SessionKey,
        state: SessionState,
        trigger: str,
        view: View,
        config: config_pb2.EventsCompactionConfig,
    ) -> Outcome:
        """Runs ``trigger`` now under ``config`` (``Compact``); explicit triggers are not
        reviewed."""
        if trigger == AFTER_INVOCATION:
            return await self.after_invocation(key, state)
        log = await self.log(key, state)
        preamble = await self._resolver.preamble(key.app_name)
        result = make_plan(log.events, config, trigger, view, preamble, state.sizes)
        if result.plan is None:
            return Outcome(None, result.skipped)
        return await self.summarize_and_append(key, state, result.plan, log.create_time)

    async def after_invocation(self, key: SessionKey, state: SessionState) -> Outcome:
        """ADK's post-invocation pass: a token-threshold summary, if one is appended, ends it;
        otherwise (nothing planned, deferred, or its summarizer failed) the sliding window runs.
        When neither appends anything, the reason is the sliding window's, or the token
        threshold's if the sliding window is not configured."""
        config = await self._resolver.compaction(key)
        if config is None:
            return Outcome(None, NOT_CONFIGURED)
        preamble = await self._resolver.preamble(key.app_name)
        log = await self.log(key, state)
        if not has_live_root_events(log.events):
            return Outcome(None, NOTHING_TO_COMPACT)
        token = make_plan(log.events, config, TOKEN_THRESHOLD, View(), preamble, state.sizes)
        token_skipped = token.skipped
        if token.plan is not None:
            plan = await self.review(key, View(), log, token.plan)
            if plan is None:
                token_skipped = DEFERRED
            else:
                outcome = await self.summarize_and_append(key, state, plan, log.create_time)
                if outcome.summary is not None:
                    return outcome
                token_skipped = outcome.skipped
                log = await self.log(key, state)
        sliding = make_plan(log.events, config, SLIDING_WINDOW, View(), preamble, state.sizes)
        if sliding.plan is None:
            return Outcome(
                None, token_skipped if sliding.skipped == NOT_CONFIGURED else sliding.skipped
            )
        plan = await self.review(key, View(), log, sliding.plan)
        if plan is None:
            return Outcome(None, DEFERRED)
        return await self.summarize_and_append(key, state, plan, log.create_time)

    def _fail(self, key: SessionKey, state: SessionState, reason: str, detail: str) -> Outcome:
        delay = self._sessions.failed(state, detail)
        _LOG.warning(
            "compaction of %s: %s (%s); no summary appended, next attempt in %.0f s or later",
            key,
            reason,
            detail,
            delay,
        )
        return Outcome(None, reason)

    async def summarize_and_append(
        self, key: SessionKey, state: SessionState, plan: CompactionPlan, created: float
    ) -> Outcome:
        """Summarises ``plan`` (made from the log of the session created at ``created``) and
        appends the summary if the plan still holds."""
        summarizer = await self._summarizers.get(key.app_name)
        if summarizer is None:
            return Outcome(None, CLIENT_SUMMARIZER)
        state.attempts += 1
        telemetry = self._telemetry
        telemetry.compaction("started")
        request = SummaryInput(plan.window, render_events(plan.window))
        start = time.perf_counter()
        try:
            with telemetry.span(
                "summarizer.summarize",
                {"summarizer": summarizer.name, "events": len(plan.window)},
            ):
                summary = await summarizer.summarize(request)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # any summarizer failure must leave the log untouched
            telemetry.summarizer_call(summarizer.name, time.perf_counter() - start, False)
            telemetry.compaction("failed")
            return self._fail(key, state, SUMMARIZER_FAILED, f"{summarizer.name}: {error!r}")
        usable = summary is not None and _usable(summary.content)
        telemetry.summarizer_call(summarizer.name, time.perf_counter() - start, usable)
        if summary is None or not usable:
            telemetry.compaction("failed")
            return self._fail(
                key, state, SUMMARIZER_RETURNED_NOTHING, f"{summarizer.name}: no summary text"
            )
        event = summary_event(
            plan,
            summary.content,
            event_id=self._new_id(),
            invocation_id=self._new_id(),
            timestamp=self._clock(),
            usage_metadata=summary.usage_metadata,
        )
        appended = await self._append(key, event, plan.based_on_sequence, created=created)
        if appended is None:
            _LOG.info(
                "compaction of %s discarded: the log moved (rewind, summary, new session)", key
            )
            telemetry.compaction("discarded")
            return Outcome(None, PLAN_STALE)
        telemetry.compaction("succeeded")
        self._sessions.succeeded(state)
        return Outcome(appended)
