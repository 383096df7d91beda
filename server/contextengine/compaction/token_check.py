"""ADK's in-flow token check before a model call, and the compaction it triggers.

The check reads the latest prompt token count without waiting for anything; only when the
threshold is reached (or the policy says the check is due) does it take the session's lock, so it
waits for a running compaction, plan again and summarise; the context is built after. The token
reading avoids O(n) passes where the caches allow (see :meth:`TokenCheck.reading`).
"""

from __future__ import annotations

from contextengine.compaction.planning import configures, make_plan
from contextengine.compaction.runner import Runner
from contextengine.compaction.sessions import Sessions
from contextengine.compaction.types import ContentsChars, ContextCheck, View
from contextengine.core.compaction import (
    TOKEN_THRESHOLD,
    RecordedScan,
    TokenReading,
    latest_prompt_token_count,
    scan_recorded,
)
from contextengine.runtime.event_cache import SessionLog
from contextengine.runtime.lru import BoundedLru
from contextengine.runtime.resolver import ConfigResolver
from contextengine.store import SessionKey

__all__ = ["TokenCheck"]

#: recorded-count scans kept for the token check (least recently used dropped)
_MAX_SCANS = 10_000


class TokenCheck:
    def __init__(self, resolver: ConfigResolver, sessions: Sessions, runner: Runner) -> None:
        self._resolver = resolver
        self._sessions = sessions
        self._runner = runner
        #: the last recorded-count scan per (session, agent, scope), with its log's generation
        self._scans: BoundedLru[tuple[SessionKey, str, str | None], tuple[int, RecordedScan]] = (
            BoundedLru(_MAX_SCANS)
        )

    async def before_context(
        self, key: SessionKey, view: View, contents_chars: ContentsChars | None
    ) -> ContextCheck:
        """The check before a model call of ``view``'s agent; compacts first when it is due."""
        config = await self._resolver.compaction(key)
        if config is None or not configures(config, TOKEN_THRESHOLD):
            return ContextCheck()
        with self._sessions.using(key) as state:
            if self._sessions.backing_off(state):
                return ContextCheck()
            preamble = await self._resolver.preamble(key.app_name)
            log = await self._runner.log(key, state)
            reading = self.reading(key, view, log, preamble, contents_chars)
            reached = reading.tokens is not None and reading.tokens >= config.token_threshold
            due = reached
            policy = self._runner.policy
            if policy is not None:
                due = await policy.due(key, view, log.events, reached)
            if not due:
                return ContextCheck(log=log)
            async with self._sessions.lock(key):
                if self._sessions.backing_off(state):
                    return ContextCheck()  # the compaction this call waited for failed
                log = await self._runner.log(key, state)
                latest = log
                result = make_plan(
                    log.events,
                    config,
                    TOKEN_THRESHOLD,
                    view,
                    preamble,
                    state.sizes,
                    not reached,
                    # The log may have moved while this call waited: read again, the cheap way.
                    reading=lambda: self.reading(key, view, latest, preamble, contents_chars),
                )
                plan = await self._runner.review(key, view, log, result.plan)
                if plan is None:
                    return ContextCheck()
                outcome = await self._runner.summarize_and_append(key, state, plan, log.create_time)
                return ContextCheck(outcome.summary)

    def reading(
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
        memo = self._scans.pop(memo_key)
        previous = None
        if memo is not None and memo[0] == log.generation and memo[1].count <= len(log.events):
            previous = memo[1]
        scan = scan_recorded(log.events, view.agent_name, view.isolation_scope, previous)
        self._scans.put(memo_key, (log.generation, scan))
        return scan
