"""BuildContext in the engine: the model contents of a session, materialized incrementally.

:class:`ContextBuilder` validates the request's options, runs the token check of compaction
before building (unless the request skips it), extends the cached view of the log the options
give (one per session and options, in a bounded LRU), and adds the memory preload and the
prompt-cache fields. It answers with a :class:`ContextResult`: the response's wire bytes, made
of the view's cached encoded contents and the rest of the response in one join (the hot path:
the contents are never re-encoded), with typed accessors for the fields beside the contents.

Contents since: the view keeps the chain digest of each prefix of its contents and where each
content starts in its encoded body, so an answer to a caller that still holds the first k
contents (``since``, checked against the digest of the view's first k) is the slice of the
body after them plus the same remaining fields; any other ``since`` gets the full answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from contextengine.compaction.compactor import Compactor, View as CompactionView
from contextengine.core.context import ContextOptions, IncludeContents
from contextengine.core.context.incremental import View, materialize
from contextengine.core.errors import invalid
from contextengine.core.tokens import Measure, TokenCounter, content_digest, default_counter
from contextengine.core.validate import (
    check_agent_name,
    check_branch,
    check_id,
    check_session_address,
)
from contextengine.engine._memory import preload_proto
from contextengine.engine._rendering import check_render, rendered
from contextengine.memory.service import MemoryService
from contextengine.prompt_cache.request import PromptCacheInputs
from contextengine.prompt_cache.service import Prepared, PromptCache, PromptCacheFields
from contextengine.runtime.event_cache import SessionEventCache, SessionLog
from contextengine.runtime.lru import BoundedLru
from contextengine.runtime.resolver import ConfigResolver
from contextengine.store import SessionKey
from contextengine.v1 import content_pb2, context_service_pb2 as pb, event_pb2, memory_pb2

__all__ = ["ContextBuilder", "ContextResult", "model_of", "preserve_function_call_ids"]

_KEEP_IDS = frozenset(
    {
        pb.MODEL_PROVIDER_ANTHROPIC,
        pb.MODEL_PROVIDER_LITELLM,
        pb.MODEL_PROVIDER_OPENAI_RESPONSES,
    }
)

#: the known enum values (``EnumTypeWrapper.values()`` makes a new list on every call)
_INCLUDE_CONTENTS = frozenset(pb.IncludeContents.values())
_PROVIDERS = frozenset(pb.ModelProvider.values())

#: a view's cache key: the session, the options without the user content (a protobuf message
#: is not hashable), and the user content's bytes
_ViewKey = tuple[SessionKey, ContextOptions, bytes]


#: the model provider a rendering is for, when the request names none
_RENDERED_PROVIDER = {
    pb.RENDER_FORMAT_OPENAI_CHAT: pb.MODEL_PROVIDER_LITELLM,
    pb.RENDER_FORMAT_OPENAI_RESPONSES: pb.MODEL_PROVIDER_OPENAI_RESPONSES,
    pb.RENDER_FORMAT_ANTHROPIC_MESSAGES: pb.MODEL_PROVIDER_ANTHROPIC,
}


def model_of(request: pb.BuildContextRequest) -> pb.ModelIdentity:
    """The request's model; with no provider named, a rendering's provider."""
    if request.model.provider != pb.MODEL_PROVIDER_UNSPECIFIED:
        return request.model
    provider = _RENDERED_PROVIDER.get(request.render.format)
    if provider is None:
        return request.model
    model = pb.ModelIdentity()
    model.CopyFrom(request.model)
    model.provider = provider
    return model


def preserve_function_call_ids(model: pb.ModelIdentity) -> bool:
    """ADK keeps 'adk-' call ids for models that pair calls and responses by id."""
    if model.provider in _KEEP_IDS:
        return True
    return model.provider in (pb.MODEL_PROVIDER_GEMINI, pb.MODEL_PROVIDER_UNSPECIFIED) and (
        model.use_interactions_api
    )


@dataclass(frozen=True)
class ContextResult:
    """What BuildContext answers. The bytes are built once and never change; the typed
    accessors read (copies of) the fields beside the contents, without decoding the contents."""

    _encoded: bytes = field(repr=False)
    _tail: pb.BuildContextResponse = field(repr=False)
    #: how many contents the response holds (after the ``base_contents_count`` held ones)
    contents_count: int
    #: how many of the caller's held contents (``since``) come first (0: a full answer)
    base_contents_count: int = 0

    def encoded(self) -> bytes:
        """The ``BuildContextResponse`` wire bytes (what the gRPC handler sends as they are)."""
        return self._encoded

    def response(self) -> pb.BuildContextResponse:
        """The decoded response (a new message each call)."""
        return pb.BuildContextResponse.FromString(self._encoded)

    @property
    def last_sequence(self) -> int:
        """The sequence of the last event the contents cover (0: an empty log)."""
        return self._tail.last_sequence

    @property
    def contents_digest(self) -> str:
        """The digest of the whole contents (held ones included), for a later ``since``."""
        return self._tail.contents_digest

    @property
    def token_estimate(self) -> int:
        """The estimated tokens of the contents."""
        return self._tail.token_estimate.tokens

    @property
    def token_counter(self) -> str:
        """The name of the counter that made :attr:`token_estimate`."""
        return self._tail.token_estimate.counter

    @property
    def compaction_sequence(self) -> int:
        """The summary event the token check appended before building (0: none)."""
        return self._tail.compaction_sequence

    @property
    def fingerprint(self) -> str:
        """The prompt-cache fingerprint ('' for apps without prompt caching)."""
        return self._tail.fingerprint

    @property
    def cacheable_contents_count(self) -> int:
        """How many leading contents a prompt cache may hold (0 without prompt caching)."""
        return self._tail.cacheable_contents_count

    @property
    def cache_decision(self) -> pb.CacheDecision | None:
        """ADK's cache decision (a copy; None for apps without prompt caching)."""
        if not self._tail.HasField("cache_decision"):
            return None
        decision = pb.CacheDecision()
        decision.CopyFrom(self._tail.cache_decision)
        return decision

    @property
    def memory_preload(self) -> memory_pb2.MemoryPreload | None:
        """The memory preload (a copy; None unless the request asked for one)."""
        if not self._tail.HasField("memory_preload"):
            return None
        preload = memory_pb2.MemoryPreload()
        preload.CopyFrom(self._tail.memory_preload)
        return preload


def _check_options(request: pb.BuildContextRequest) -> None:
    """INVALID_ARGUMENT for a bad agent name, branch, scope or enum value."""
    check_agent_name(request.agent_name)
    if request.HasField("branch"):
        check_branch(request.branch)
    if request.HasField("isolation_scope"):
        # '' is a scope of its own (ADK distinguishes it from no scope).
        check_id(request.isolation_scope, "isolation_scope", required=False)
    if request.include_contents not in _INCLUDE_CONTENTS:
        raise invalid(
            "INVALID_ARGUMENT",
            "include_contents",
            f"include_contents {request.include_contents} is not a known value",
        )
    if request.model.provider not in _PROVIDERS:
        raise invalid(
            "INVALID_ARGUMENT",
            "model.provider",
            f"model.provider {request.model.provider} is not a known value",
        )
    if request.HasField("since"):
        _check_since(request.since)
    if request.HasField("render"):
        check_render(request.render)


#: longest ``since.contents_digest`` accepted (ours are 64 hex digits)
_MAX_DIGEST_CHARS = 128


def _check_since(since: pb.ContextSince) -> None:
    """INVALID_ARGUMENT for a negative count or an over-long digest."""
    if since.contents_count < 0:
        raise invalid(
            "INVALID_ARGUMENT",
            "since.contents_count",
            f"since.contents_count {since.contents_count} is negative",
        )
    if len(since.contents_digest) > _MAX_DIGEST_CHARS:
        raise invalid(
            "INVALID_ARGUMENT",
            "since.contents_digest",
            f"since.contents_digest has {len(since.contents_digest)} characters, "
            f"at most {_MAX_DIGEST_CHARS} are allowed",
        )


def _since_base(request: pb.BuildContextRequest, view: View, content_count: int) -> int:
    """How many leading contents the caller already holds, by ``since`` (0: send them all):
    its count, when the view's first that many contents have its digest."""
    if not request.HasField("since"):
        return 0
    since = request.since
    count = since.contents_count
    if 0 < count <= content_count and view.digests[count].hex() == since.contents_digest:
        return count
    return 0


class _Unmeasured:
    """A counter that measures nothing (every content: 0 tokens, 0 characters)."""

    name = "unmeasured"

    def count_content(self, content: content_pb2.Content) -> int:
        return 0

    def count_contents(self, contents: Sequence[content_pb2.Content]) -> list[int]:
        return [0] * len(contents)

    def measure_contents(self, contents: Sequence[content_pb2.Content]) -> list[Measure]:
        return [(0, 0)] * len(contents)


_UNMEASURED = _Unmeasured()


def _view_key(key: SessionKey, options: ContextOptions) -> _ViewKey:
    if options.user_content is None:
        return (key, options, b"")
    user_content = options.user_content.SerializeToString()
    return (key, replace(options, user_content=None), user_content)


def _set_cache_fields(tail: pb.BuildContextResponse, fields: PromptCacheFields) -> None:
    tail.cacheable_contents_count = fields.cacheable_contents_count
    tail.fingerprint = fields.fingerprint
    tail.cache_decision.CopyFrom(fields.decision_proto())


class ContextBuilder:
    """Builds contexts; keeps one incrementally extended view per (session, options) in a
    bounded LRU of ``max_views``."""

    def __init__(
        self,
        *,
        resolver: ConfigResolver,
        events: SessionEventCache,
        compactor: Compactor,
        memory: MemoryService,
        prompt_cache: PromptCache,
        counter: TokenCounter | None = None,
        max_views: int = 512,
    ) -> None:
        self._resolver = resolver
        self._events = events
        self._compactor = compactor
        self._memory = memory
        self._prompt_cache = prompt_cache
        self._counter = counter if counter is not None else default_counter()
        self._views: BoundedLru[_ViewKey, tuple[int, View]] = BoundedLru(max_views)

    async def _options(self, request: pb.BuildContextRequest) -> ContextOptions:
        _check_options(request)
        preamble = await self._resolver.preamble(request.app_name)
        user_content: content_pb2.Content | None = None
        # The user content opens an isolation scope's contents and is used for nothing else:
        # without a scope, leaving it out lets every invocation share one view.
        if request.HasField("user_content") and request.HasField("isolation_scope"):
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
            preserve_function_call_ids=preserve_function_call_ids(model_of(request)),
            include_thoughts_from_other_agents=request.include_thoughts_from_other_agents,
            other_agent_preamble=preamble,
            user_content=user_content,
        )

    @property
    def counter(self) -> TokenCounter:
        """The token counter BuildContext's estimates use."""
        return self._counter

    async def token_series(
        self,
        request: pb.BuildContextRequest,
        choose: Callable[[Sequence[event_pb2.Event]], Sequence[int]],
    ) -> tuple[list[event_pb2.Event], list[tuple[int, int]]]:
        """The session's events, and for each index ``choose`` picks from them (ascending) the
        total tokens of ``request``'s context right after that event: the options and the
        counter BuildContext uses, on one incremental view over the growing log (rebuilt only
        where a summary or a rewind makes extending it wrong). Nothing is appended (no
        compaction runs), and the view is not kept."""
        check_session_address(request.app_name, request.user_id, request.session_id)
        options = await self._options(request)
        log = await self._events.log(
            SessionKey(request.app_name, request.user_id, request.session_id)
        )
        events, items = list(log.events), list(log.items)
        series: list[tuple[int, int]] = []
        view: View | None = None
        for index in choose(events):
            view = materialize(
                events[: index + 1], options, self._counter, view, items[: index + 1]
            )
            series.append((index, view.total_tokens))
        return events, series

    async def build(self, request: pb.BuildContextRequest) -> ContextResult:
        """The context ``request`` asks for; raises ContextEngineError (INVALID_ARGUMENT,
        INVALID_MODEL_INPUT, SESSION_NOT_FOUND ...) as the RPC reports them."""
        check_session_address(request.app_name, request.user_id, request.session_id)
        key = SessionKey(request.app_name, request.user_id, request.session_id)
        options = await self._options(request)
        caching = await self._prepare_caching(request, options)
        compaction_sequence = 0
        log: SessionLog | None = None
        if not self._events.cached(key):
            # The session's first use in this process: its view is built (reading the kept
            # measures of its contents) before the token check, which may measure it.
            log = await self._events.log(key)
            await self._view_reading_kept(key, options, log)
        if not request.skip_compaction:
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
        view = await self._view_reading_kept(key, options, log)
        # A later call with the same options extends this view in place, maybe while this one
        # awaits the memory search or the cache service below: answer with what it holds now
        # (contents, body, offsets and digests only ever grow at their end).
        event_count, content_count, body_size = view.event_count, len(view.contents), len(view.body)
        rendering = request.render.format != pb.RENDER_FORMAT_UNSPECIFIED
        base = 0 if rendering else _since_base(request, view, content_count)
        tail = pb.BuildContextResponse(
            last_sequence=events[event_count - 1].sequence if event_count else 0,
            token_estimate=pb.TokenEstimate(tokens=view.total_tokens, counter=self._counter.name),
            compaction_sequence=compaction_sequence,
            contents_digest=view.digests[content_count].hex(),
            base_contents_count=base,
        )
        if request.preload_memory:
            tail.memory_preload.CopyFrom(await preload_proto(self._memory, key, request, events))
        if caching is not None:
            fields = await self._prompt_cache.fields(
                caching,
                view,
                view.contents[:content_count],
                events if len(events) == event_count else events[:event_count],
                log.generation,
            )
            _set_cache_fields(tail, fields)
        if rendering:
            app = await self._resolver.app(request.app_name)
            tail.rendered.CopyFrom(rendered(request, view.contents[:content_count], app))
        # Fields may come in any order: the cached encoded contents (those after the held ones;
        # none with a rendering), then the rest (one copy; none when the view's last answer was
        # the same).
        start = body_size if rendering else view.offsets[base]
        rest = tail.SerializeToString()
        last = view.last_answer
        if last is not None and last[0] == start and last[1] == body_size and last[2] == rest:
            encoded = last[3]
        else:
            # The previous answer goes first: a big one alive while the next is joined makes
            # the allocator map fresh pages for every answer (4x the copy's CPU at 10 MB).
            view.last_answer = None
            last = None
            encoded = b"".join((memoryview(view.body)[start:body_size], rest))
            view.last_answer = (start, body_size, rest, encoded)
        return ContextResult(encoded, tail, 0 if rendering else content_count - base, base)

    async def _prepare_caching(
        self, request: pb.BuildContextRequest, options: ContextOptions
    ) -> Prepared | None:
        """The validated prompt-cache inputs, for an app with prompt caching (else None)."""
        app = await self._resolver.app(request.app_name)
        if app is None or not app.HasField("context_cache_config"):
            return None
        return self._prompt_cache.prepare(
            app.context_cache_config, PromptCacheInputs.of(request), options
        )

    def _contents_chars(self, key: SessionKey, log: SessionLog, options: ContextOptions) -> int:
        """The characters of the contents ``options`` give over ``log``, from the cached view
        (extended, not rebuilt; the same view the build then uses when the options match)."""
        return self._view(_view_key(key, options), options, log).total_chars

    async def _view_reading_kept(
        self, key: SessionKey, options: ContextOptions, log: SessionLog
    ) -> View:
        """``_view`` of ``log``; a view built anew over a log whose kept measures were not all
        read yet reads first those of the contents it holds (all of them when it holds most of
        the log: one read of everything kept costs less than looking each one up)."""
        cache_key = _view_key(key, options)
        cached = self._views.get(cache_key)
        if not log.measures_unread or (cached is not None and cached[0] == log.generation):
            return self._view(cache_key, options, log)
        events = log.events
        # Materialized without measuring, then measured once the measures it needs are read.
        view = materialize(events, options, _UNMEASURED, None, log.items)
        counter = log.counter
        if 4 * len(view.contents) >= view.event_count:
            await self._events.read_measures(key, counter, None)
        else:
            digests = {content_digest(content) for content in view.contents}
            missing = [digest for digest in digests if not counter.knows(digest)]
            if missing:
                await self._events.read_measures(key, counter, missing)
        view.measure_again(counter)
        self._views.put(cache_key, (log.generation, view))
        return view

    def _view(self, cache_key: _ViewKey, options: ContextOptions, log: SessionLog) -> View:
        """The (cached, extended or rebuilt) view of ``log``'s events under ``cache_key``
        (``_view_key`` of its session and ``options``), counting tokens with the session's
        counter (which remembers its contents' counts)."""
        cached = self._views.pop(cache_key)
        previous = cached[1] if cached is not None and cached[0] == log.generation else None
        view = materialize(log.events, options, log.counter, previous, log.items)
        self._views.put(cache_key, (log.generation, view))
        return view
