"""BuildContext's prompt-cache fields: cacheable prefix, fingerprint and ADK's cache decision.

Used only for apps with a ``context_cache_config`` (the caller resolves it and passes it).
:meth:`PromptCache.prepare` validates the request's system instruction, tools and tool config
first (INVALID_MODEL_INPUT), before anything else happens; :meth:`PromptCache.fields` computes the fields once the contents are built
(a :class:`PromptCacheFields`, which the caller copies into its response), and (managed apps,
Gemini models) creates and deletes caches through google-genai.

Kept per (session, agent, view options), all bounded and in memory: the canonical JSON of the
view's contents (a view only ever grows by appending, so each content is canonicalized once),
and the scan of the log for the agent's newest cache metadata and prompt token count (extended
with what was appended). Per (session, agent): the request's fixed parts, which the cache-aware
compaction policy uses to check whether a cache's prefix still matches.
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from contextengine.core.context import ContextOptions
from contextengine.core.context.incremental import View
from contextengine.core.prompt_cache import (
    Action,
    CacheScan,
    CacheSettings,
    Decision,
    Fingerprints,
    PromptPrefix,
    cache_info,
    cacheable_count,
    decide,
    scan_cache_events,
    text_chars,
)
from contextengine.core.validate import check_id
from contextengine.prompt_cache.gemini_caches import CacheRequest, ManagedCaches
from contextengine.prompt_cache.request import (
    ModelRequestParts,
    PromptCacheInputs,
    read_model_request_parts,
)
from contextengine.runtime.lru import BoundedLru
from contextengine.store import SessionKey
from contextengine.v1 import (
    config_pb2,
    content_pb2,
    context_service_pb2 as pb,
    event_pb2,
)

__all__ = [
    "Prepared",
    "PromptCache",
    "PromptCacheFields",
    "Seen",
    "decision_proto",
    "settings_of",
]

_ACTIONS = {
    Action.FINGERPRINT_ONLY: pb.CACHE_ACTION_FINGERPRINT_ONLY,
    Action.REUSE: pb.CACHE_ACTION_REUSE,
    Action.CREATE: pb.CACHE_ACTION_CREATE,
}
_GEMINI = (pb.MODEL_PROVIDER_GEMINI, pb.MODEL_PROVIDER_UNSPECIFIED)


def settings_of(config: config_pb2.ContextCacheConfig) -> CacheSettings:
    """The config with ADK's defaults for unset fields."""
    defaults = CacheSettings()
    return CacheSettings(
        cache_intervals=(
            config.cache_intervals
            if config.HasField("cache_intervals")
            else defaults.cache_intervals
        ),
        ttl_seconds=config.ttl_seconds if config.HasField("ttl_seconds") else defaults.ttl_seconds,
        min_tokens=config.min_tokens if config.HasField("min_tokens") else defaults.min_tokens,
    )


@dataclass(frozen=True)
class Prepared:
    """A validated request of an app with prompt caching."""

    config: config_pb2.ContextCacheConfig
    parts: ModelRequestParts
    inputs: PromptCacheInputs
    options: ContextOptions


@dataclass(frozen=True)
class PromptCacheFields:
    """The prompt-cache fields of a BuildContextResponse."""

    cacheable_contents_count: int
    fingerprint: str
    decision: Decision
    #: whether the sidecar manages the cache (created and deleted it through google-genai)
    managed: bool
    #: the cache lifetime a CREATE the agent performs itself asks for
    ttl_seconds: int

    def decision_proto(self) -> pb.CacheDecision:
        """``BuildContextResponse.cache_decision`` (a new message each call)."""
        return decision_proto(self.decision, managed=self.managed, ttl_seconds=self.ttl_seconds)


@dataclass(frozen=True)
class Seen:
    """An agent's latest BuildContext request (what the cache-aware compaction checks)."""

    prefix: PromptPrefix
    invocation_id: str
    options: ContextOptions


@dataclass
class _ViewMemo:
    view: weakref.ref[View]
    canonical: list[str]
    generation: int
    scan: CacheScan


def decision_proto(decision: Decision, *, managed: bool, ttl_seconds: int) -> pb.CacheDecision:
    message = pb.CacheDecision(
        action=_ACTIONS[decision.action],
        managed=managed,
        not_created_reason="" if decision.degraded else decision.not_created_reason,
        degraded_reason=decision.not_created_reason if decision.degraded else "",
    )
    message.cache_metadata.CopyFrom(decision.metadata.to_proto())
    if decision.invalidated_cache_name:
        message.invalidated_cache_name = decision.invalidated_cache_name
    if decision.action is not Action.FINGERPRINT_ONLY:
        message.send_from_index = decision.send_from_index
        if decision.cache_name:
            message.cache_name = decision.cache_name
    if decision.action is Action.CREATE and not managed:
        message.ttl_seconds = ttl_seconds
    return message


class PromptCache:
    """The prompt-cache fields of apps that configure prompt caching (which apps do is the
    caller's to resolve: it passes their ``context_cache_config``)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        managed: ManagedCaches | None = None,
        max_entries: int = 512,
    ) -> None:
        self._clock = clock
        self._managed = managed
        self._max = max_entries
        self._views: BoundedLru[tuple[SessionKey, ContextOptions, bytes], _ViewMemo] = BoundedLru(
            max_entries
        )
        self._seen: OrderedDict[tuple[SessionKey, str], Seen] = OrderedDict()
        #: the fixed parts of the agent's last call that used a cache (REUSE or CREATE)
        self._in_use: OrderedDict[tuple[SessionKey, str], PromptPrefix] = OrderedDict()

    async def aclose(self) -> None:
        if self._managed is not None:
            await self._managed.aclose()

    def prepare(
        self,
        config: config_pb2.ContextCacheConfig,
        inputs: PromptCacheInputs,
        options: ContextOptions,
    ) -> Prepared:
        """Validates a request of an app with prompt caching (``config``): raises
        INVALID_ARGUMENT (invocation id) or INVALID_MODEL_INPUT (system instruction, tools, tool
        config). Records the call as the agent's latest (:meth:`seen`)."""
        check_id(inputs.invocation_id, "invocation_id", required=False)
        parts = read_model_request_parts(
            inputs.model, inputs.system_instruction, inputs.tools, inputs.tool_config
        )
        seen_key = (inputs.key, inputs.agent_name)
        self._seen.pop(seen_key, None)
        self._seen[seen_key] = Seen(parts.prefix, inputs.invocation_id, options)
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)
        return Prepared(config, parts, inputs, options)

    def seen(self, key: SessionKey, agent_name: str) -> Seen | None:
        """The agent's latest BuildContext request in this session (None: none seen)."""
        return self._seen.get((key, agent_name))

    def cache_in_use(self, key: SessionKey, agent_name: str) -> PromptPrefix | None:
        """The fixed parts of the agent's last call, if that call used a cache."""
        return self._in_use.get((key, agent_name))

    def _memo(
        self,
        key: SessionKey,
        options: ContextOptions,
        view: View,
        events: Sequence[event_pb2.Event],
        generation: int,
    ) -> _ViewMemo:
        user_content = (
            b"" if options.user_content is None else options.user_content.SerializeToString()
        )
        memo_key = (key, replace(options, user_content=None), user_content)
        memo = self._views.pop(memo_key)
        if memo is None or memo.view() is not view:
            memo = _ViewMemo(weakref.ref(view), [], generation, CacheScan())
        if memo.generation != generation or memo.scan.scanned > len(events):
            memo.generation = generation
            memo.scan = CacheScan()
        memo.scan = scan_cache_events(events, options.agent_name, memo.scan)
        self._views.put(memo_key, memo)
        return memo

    async def fields(
        self,
        prepared: Prepared,
        view: View,
        contents: Sequence[content_pb2.Content],
        events: Sequence[event_pb2.Event],
        generation: int,
    ) -> PromptCacheFields:
        """The prompt-cache fields of a response whose ``contents`` ``view`` built from
        ``events`` (the view itself may have been extended since: it only keys the memos).
        Managed apps on Gemini models: creates and deletes the caches the decision needs."""
        inputs, options, parts = prepared.inputs, prepared.options, prepared.parts
        key = inputs.key
        roles = [content.role for content in contents]
        memo = self._memo(key, options, view, events, generation)
        fingerprints = Fingerprints(parts.prefix, contents, memo.canonical)
        prefix_count = cacheable_count(roles)
        fingerprint = fingerprints.of(prefix_count)
        info = cache_info(events, memo.scan, inputs.invocation_id)
        settings = settings_of(prepared.config)
        decision = decide(
            info,
            roles=roles,
            fingerprint=fingerprints.of,
            settings=settings,
            now=self._clock(),
            model=inputs.model,
            fixed_chars=parts.fixed_chars,
            content_chars=lambda: [text_chars(content) for content in contents],
        )
        managed = (
            prepared.config.managed_gemini_caches
            and self._managed is not None
            and inputs.provider in _GEMINI
            and not inputs.use_interactions_api
        )
        if managed and self._managed is not None:
            owner = (key, options.agent_name)
            based_on = (
                info.metadata_sequence,
                info.metadata.fingerprint if info.metadata is not None else "",
            )
            async with self._managed.lock(owner):
                decision = await self._managed.apply(
                    owner,
                    based_on,
                    decision,
                    contents,
                    CacheRequest(
                        model=inputs.model,
                        system_instruction=parts.system_instruction,
                        tools=parts.tools,
                        tool_config=parts.tool_config,
                        ttl_seconds=settings.ttl_seconds,
                    ),
                )
        in_use_key = (key, options.agent_name)
        self._in_use.pop(in_use_key, None)
        if decision.action is not Action.FINGERPRINT_ONLY:
            self._in_use[in_use_key] = parts.prefix
            while len(self._in_use) > self._max:
                self._in_use.popitem(last=False)
        return PromptCacheFields(
            cacheable_contents_count=prefix_count,
            fingerprint=fingerprint,
            decision=decision,
            managed=managed,
            ttl_seconds=settings.ttl_seconds,
        )
