"""``contextengine.v1.ContextService``: model contexts, materialized incrementally."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

from contextengine.compaction.compactor import Compactor, View as CompactionView
from contextengine.core.context import (
    DEFAULT_OTHER_AGENT_PREAMBLE,
    ContextOptions,
    IncludeContents,
    Item,
)
from contextengine.core.context.incremental import View, materialize
from contextengine.core.errors import invalid
from contextengine.core.tokens import TokenCounter, default_counter
from contextengine.core.validate import (
    check_agent_name,
    check_branch,
    check_id,
    check_session_address,
)
from contextengine.memory.service import MemoryService
from contextengine.prompt_cache.request import PromptCacheInputs
from contextengine.prompt_cache.service import PromptCache
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.event_cache import SessionEventCache, SessionLog
from contextengine.service.memory_service import preload_proto
from contextengine.store import SessionKey
from contextengine.v1 import content_pb2, context_service_pb2 as pb, event_pb2

_KEEP_IDS = frozenset(
    {
        pb.MODEL_PROVIDER_ANTHROPIC,
        pb.MODEL_PROVIDER_LITELLM,
        pb.MODEL_PROVIDER_OPENAI_RESPONSES,
    }
)


def preserve_function_call_ids(model: pb.ModelIdentity) -> bool:
    """ADK keeps 'adk-' call ids for models that pair calls and responses by id."""
    if model.provider in _KEEP_IDS:
        return True
    return model.provider in (pb.MODEL_PROVIDER_GEMINI, pb.MODEL_PROVIDER_UNSPECIFIED) and (
        model.use_interactions_api
    )


class ContextServicer:
    """Implements ``ContextService``; keeps one incrementally extended view per
    (session, options) in a bounded LRU."""

    def __init__(
        self,
        configs: AppConfigs,
        events: SessionEventCache,
        counter: TokenCounter | None = None,
        max_views: int = 512,
        compactor: Compactor | None = None,
        memory: MemoryService | None = None,
        prompt_cache: PromptCache | None = None,
    ) -> None:
        """``memory`` serves ``preload_memory`` (without it the request field is ignored);
        ``prompt_cache`` adds the prompt-cache fields for apps with a context_cache_config."""
        self._prompt_cache = prompt_cache if prompt_cache is not None else PromptCache(configs)
        self._configs = configs
        self._memory = memory
        self._compactor = compactor
        self._events = events
        self._counter = counter if counter is not None else default_counter()
        self._views: OrderedDict[tuple[SessionKey, ContextOptions, bytes], tuple[int, View]] = (
            OrderedDict()
        )
        self._max_views = max_views

    async def _options(self, request: pb.BuildContextRequest) -> ContextOptions:
        check_agent_name(request.agent_name)
        if request.HasField("branch"):
            check_branch(request.branch)
        if request.HasField("isolation_scope"):
            # '' is a scope of its own (ADK distinguishes it from no scope).
            check_id(request.isolation_scope, "isolation_scope", required=False)
        if request.include_contents not in pb.IncludeContents.values():
            raise invalid(
                "INVALID_ARGUMENT",
                "include_contents",
                f"include_contents {request.include_contents} is not a known value",
            )
        if request.model.provider not in pb.ModelProvider.values():
            raise invalid(
                "INVALID_ARGUMENT",
                "model.provider",
                f"model.provider {request.model.provider} is not a known value",
            )
        config = await self._configs.get(request.app_name)
        preamble = DEFAULT_OTHER_AGENT_PREAMBLE
        if config is not None and config.HasField("other_agent_preamble"):
            preamble = config.other_agent_preamble
        user_content: content_pb2.Content | None = None
        if request.HasField("user_content"):
            user_content = content_pb2.Content()
            user_content.CopyFrom(request.user_content)
        return ContextOptions(
            agent_name=request.agent_name,
            branch=request.branch if request.HasField("branch") else None,
            isolation_scope=(
                request.isolation_scope if request.HasField("isolation_scope") else None
            ),
            include_contents=(
                IncludeContents.NONE
                if request.include_contents == pb.INCLUDE_CONTENTS_NONE
                else IncludeContents.DEFAULT
            ),
            preserve_function_call_ids=preserve_function_call_ids(request.model),
            include_thoughts_from_other_agents=request.include_thoughts_from_other_agents,
            other_agent_preamble=preamble,
            user_content=user_content,
        )

    async def BuildContext(self, request: pb.BuildContextRequest, context: object) -> bytes:
        check_session_address(request.app_name, request.user_id, request.session_id)
        key = SessionKey(request.app_name, request.user_id, request.session_id)
        options = await self._options(request)
        caching = await self._prompt_cache.prepare(PromptCacheInputs.of(request), options)
        compaction_sequence = 0
        log: SessionLog | None = None
        if self._compactor is not None and not request.skip_compaction:
            check = await self._compactor.before_context(
                key,
                CompactionView(options.agent_name, options.branch, options.isolation_scope),
                contents_chars=lambda log, estimate: self._contents_chars(key, log, estimate),
            )
            if check.summary is not None:
                compaction_sequence = check.summary.sequence
            log = check.log  # the log the check read, when it compacted nothing
        if log is None:
            log = await self._events.log(key)
        # ``log.events`` is the cache's own list, which other calls may have extended since it
        # was read: the view covers all of it as it is now.
        events = log.events
        view = self.view(key, options, events, log.generation, log.items)
        # A later call with the same options extends this view in place, maybe while this one
        # awaits the memory search or the cache service below: answer with what it holds now
        # (contents and body only ever grow at their end).
        event_count, content_count, body_size = view.event_count, len(view.contents), len(view.body)
        tail = pb.BuildContextResponse(
            last_sequence=events[event_count - 1].sequence if event_count else 0,
            token_estimate=pb.TokenEstimate(tokens=view.total_tokens, counter=self._counter.name),
            compaction_sequence=compaction_sequence,
        )
        if request.preload_memory and self._memory is not None:
            tail.memory_preload.CopyFrom(await preload_proto(self._memory, key, request, events))
        if caching is not None:
            fields = await self._prompt_cache.fields(
                caching,
                view,
                view.contents[:content_count],
                events if len(events) == event_count else events[:event_count],
                log.generation,
            )
            tail.cacheable_contents_count = fields.cacheable_contents_count
            tail.fingerprint = fields.fingerprint
            tail.cache_decision.CopyFrom(fields.decision_proto())
        # Fields may come in any order: the cached encoded contents, then the rest (one copy).
        return b"".join((memoryview(view.body)[:body_size], tail.SerializeToString()))

    def _contents_chars(self, key: SessionKey, log: SessionLog, options: ContextOptions) -> int:
        """The characters of the contents ``options`` give over ``log``, from the cached view
        (extended, not rebuilt; the same view the build then uses when the options match)."""
        return self.view(key, options, log.events, log.generation, log.items).total_chars

    def view(
        self,
        key: SessionKey,
        options: ContextOptions,
        events: Sequence[event_pb2.Event],
        generation: int,
        items: Sequence[Item] | None = None,
    ) -> View:
        """The (cached, extended or rebuilt) view of ``events``."""
        # Protobuf messages are not hashable: key the user content by its bytes.
        user_content = (
            b"" if options.user_content is None else options.user_content.SerializeToString()
        )
        cache_key = (key, replace(options, user_content=None), user_content)
        cached = self._views.pop(cache_key, None)
        previous = cached[1] if cached is not None and cached[0] == generation else None
        view = materialize(events, options, self._counter, previous, items)
        self._views[cache_key] = (generation, view)
        while len(self._views) > self._max_views:
            self._views.popitem(last=False)
        return view
