"""The cache-aware compaction policy (``ContextCacheConfig.cache_aware_compaction``), plugged
into the compactor's automatic triggers (``Compactor.policy``). Apps without the option are left
exactly as google-adk would have them.

For an app with the option, given a trigger's plan:

1. The cache to protect is the newest cache metadata of the agent the context is built for (after
   an invocation: of any agent). None: fall back (6).
2. The prompt size is predicted: the agent's newest recorded prompt token count plus
   characters / 4 of what was appended since. The cache is *warm* when the prediction is below
   the hard limit (``hard_token_limit``, else the token threshold) and the cache is active,
   unexpired by the server's clock and has invocations left for the next call.
3. Token threshold, warm, and the agent's last call used this cache with its current fixed parts:
   defer, without building anything.
4. If the prefix no longer matches what the agent's last BuildContext request would fingerprint,
   nothing is left to protect: fall back (6).
5. Narrow the plan to the events after the prefix (``restricted_plan``) and run that if the
   prefix survives it byte for byte (checked on contents built with a placeholder summary) and,
   when cold, the predicted size afterwards (less the removed characters / 4) is at most
   ``NARROWED_TARGET`` of the hard limit. The cache then stays valid (or ADK re-creates it in
   the same request, since the old prefix still matches). Otherwise: warm, defer; cold, fall
   back (6).
6. Fallback: the token threshold consolidates (one summary of everything before the retained
   tail, all earlier summaries rolled in); the sliding window runs ADK's plan, or at the hard
   limit consolidates everything.

Before a context, the token check is also due when the predicted size reaches the hard limit,
so the prompt that would overshoot it is compacted first (ADK only looks at the previous
prompt's recorded size).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from contextengine.compaction.types import View
from contextengine.core.compaction import TOKEN_THRESHOLD, CompactionPlan
from contextengine.core.context import (
    ContextOptions,
    build_contents,
    latest_non_subsumed_compaction,
)
from contextengine.core.prompt_cache import (
    Fingerprints,
    cached_prefix,
    consolidated_plan,
    contents_chars,
    is_warm,
    predicted_prompt_tokens,
    prefix_survives,
    restricted_plan,
    with_placeholder_summary,
)
from contextengine.prompt_cache.service import PromptCache, settings_of
from contextengine.runtime.resolver import ConfigResolver
from contextengine.store import SessionKey
from contextengine.v1 import config_pb2, content_pb2, event_pb2

__all__ = ["NARROWED_TARGET", "CacheAwarePolicy"]

#: a narrowed compaction must bring the predicted prompt down to this share of the hard limit
NARROWED_TARGET = 0.6
#: size of the summary assumed when predicting a narrowed compaction's result (no summary yet)
_DEFAULT_SUMMARY_CHARS = 2000


class CacheAwarePolicy:
    def __init__(
        self,
        resolver: ConfigResolver,
        prompt_cache: PromptCache,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``resolver``: the configuration in effect (a session's compaction configuration
        replaces its app's)."""
        self._resolver = resolver
        self._prompt_cache = prompt_cache
        self._clock = clock

    async def _app(self, key: SessionKey) -> config_pb2.AppConfig | None:
        app = await self._resolver.app(key.app_name)
        if app is None or not app.context_cache_config.HasField("cache_aware_compaction"):
            return None
        return app

    async def _compaction(self, key: SessionKey) -> config_pb2.EventsCompactionConfig:
        """The compaction configuration in effect for the session (empty: none)."""
        config = await self._resolver.compaction(key)
        return config if config is not None else config_pb2.EventsCompactionConfig()

    @staticmethod
    def hard_limit(
        app: config_pb2.AppConfig, compaction: config_pb2.EventsCompactionConfig
    ) -> int | None:
        """The app's ``hard_token_limit``, else the session's token threshold."""
        aware = app.context_cache_config.cache_aware_compaction
        if aware.HasField("hard_token_limit"):
            return aware.hard_token_limit
        if compaction.HasField("token_threshold"):
            return compaction.token_threshold
        return None

    async def due(self, key: SessionKey, view: View, log: list[event_pb2.Event], due: bool) -> bool:
        app = await self._app(key)
        if app is None or due:
            return due
        limit = self.hard_limit(app, await self._compaction(key))
        if limit is None:
            return False
        predicted = predicted_prompt_tokens(log, view.agent_name)
        return predicted is not None and predicted >= limit

    async def _options(self, key: SessionKey, owner: str, event: event_pb2.Event) -> ContextOptions:
        seen = self._prompt_cache.seen(key, owner)
        if seen is not None:
            return seen.options
        return ContextOptions(
            agent_name=owner,
            branch=event.branch if event.HasField("branch") else None,
            isolation_scope=event.isolation_scope if event.HasField("isolation_scope") else None,
            other_agent_preamble=await self._resolver.preamble(key.app_name),
        )

    def _fallback(
        self,
        compaction: config_pb2.EventsCompactionConfig,
        log: list[event_pb2.Event],
        plan: CompactionPlan,
        at_limit: bool,
    ) -> CompactionPlan | None:
        if plan.trigger != TOKEN_THRESHOLD and not at_limit:
            return plan
        config = compaction
        if plan.trigger != TOKEN_THRESHOLD:
            config = config_pb2.EventsCompactionConfig(event_retention_size=0)
        return consolidated_plan(log, config, plan.isolation_scope) or plan

    async def review(
        self, key: SessionKey, view: View, log: list[event_pb2.Event], plan: CompactionPlan
    ) -> CompactionPlan | None:
        app = await self._app(key)
        if app is None:
            return plan
        compaction = await self._compaction(key)
        limit = self.hard_limit(app, compaction)
        prefix = cached_prefix(log, view.agent_name or None)
        if prefix is None:
            return self._fallback(compaction, log, plan, at_limit=False)
        predicted = predicted_prompt_tokens(log, prefix.owner)
        at_limit = limit is not None and predicted is not None and predicted >= limit
        seen = self._prompt_cache.seen(key, prefix.owner)
        invocation = seen.invocation_id if seen is not None and view.agent_name else None
        settings = settings_of(app.context_cache_config)
        warm = not at_limit and is_warm(prefix, settings, self._clock(), invocation)
        if (
            warm
            and plan.trigger == TOKEN_THRESHOLD
            and seen is not None
            and self._prompt_cache.cache_in_use(key, prefix.owner) == seen.prefix
        ):
            # Before a context, below the hard limit: the agent's last call used this cache
            # with the same fixed parts, so defer without building anything.
            return None
        options = await self._options(key, prefix.owner, prefix.event)
        contents = build_contents(log, options)
        count = prefix.metadata.contents_count
        if seen is not None and (
            Fingerprints(seen.prefix, contents).of(count) != prefix.metadata.fingerprint
        ):
            return self._fallback(compaction, log, plan, at_limit)  # the prefix is gone already
        narrowed = restricted_plan(plan, log, prefix.boundary_sequence)
        if narrowed is not None and self._narrowed_is_enough(
            log, narrowed, contents, options, count, predicted, None if warm else limit
        ):
            return narrowed
        if warm:
            return None
        return self._fallback(compaction, log, plan, at_limit)

    def _narrowed_is_enough(
        self,
        log: list[event_pb2.Event],
        narrowed: CompactionPlan,
        contents: list[content_pb2.Content],
        options: ContextOptions,
        count: int,
        predicted: int | None,
        limit: int | None,
    ) -> bool:
        """Whether the narrowed plan keeps the first ``count`` contents and (with a ``limit``)
        brings the predicted prompt under ``NARROWED_TARGET`` of it."""
        previous = latest_non_subsumed_compaction(log)
        summary_chars = (
            contents_chars([previous.actions.compaction.compacted_content])
            if previous is not None
            else _DEFAULT_SUMMARY_CHARS
        )
        stamp = max((event.timestamp for event in log), default=0.0) + 1.0
        after_log = with_placeholder_summary(log, narrowed, "x" * summary_chars, stamp)
        survives, after = prefix_survives(contents, after_log, options, count)
        if not survives:
            return False
        if limit is None or predicted is None:
            return True
        removed = contents_chars(contents) - contents_chars(after)
        return predicted - removed / 4 <= NARROWED_TARGET * limit
