"""The cache decision google-adk 2.13 makes before a Gemini model call (sections 7.1, 7.5, 7.7
of the specification), as a pure function of the log and the request.

1. :func:`find_cache_info` is ADK's ``ContextCacheRequestProcessor``: scan the whole log (no
   rewinds or compaction applied) from the newest event back, looking only at events authored by
   the agent, for the first ``cache_metadata`` (``invocations_used`` + 1 when it names an active
   cache and comes from another non-empty invocation) and the first
   ``usage_metadata.prompt_token_count``.
2. :func:`decide` is ``GeminiContextCacheManager.handle_context_caching`` without the calls:
   fingerprint only when there is no metadata; reuse a valid cache (active, ``now <
   expire_time``, ``invocations_used <= cache_intervals``, fingerprint of its prefix unchanged);
   otherwise invalidate it (if active) and, when the old prefix is still a prefix of this
   request, create a cache of ``max(old count, cacheable count)`` contents unless a creation
   gate says no (no previous prompt count, below ``min_tokens``, below the model's floor by
   ADK's estimate), else fingerprint only.

A CREATE decision carries the metadata to record without the cache's name and times; the one who
creates the cache completes it with :meth:`Decision.created`, or turns the decision into ADK's
fallback with :meth:`Decision.creation_failed`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from contextengine.core.prompt_cache._prefix import (
    appended_chars,
    cacheable_count,
    estimate_prefix_tokens,
    minimum_cache_tokens,
    send_from_index,
)
from contextengine.v1 import event_pb2

__all__ = [
    "BELOW_MIN_TOKENS",
    "BELOW_MODEL_MINIMUM",
    "NO_PREVIOUS_PROMPT",
    "Action",
    "CacheInfo",
    "CacheScan",
    "CacheSettings",
    "Decision",
    "Metadata",
    "cache_info",
    "decide",
    "find_cache_info",
    "scan_cache_events",
]

#: Reasons a cache is not created although the prefix allows it (ADK's creation gates).
NO_PREVIOUS_PROMPT = "no previous prompt token count of this agent"
BELOW_MIN_TOKENS = "previous prompt below min_tokens"
BELOW_MODEL_MINIMUM = "cacheable prefix below the model's minimum cache size"


@dataclass(frozen=True)
class Metadata:
    """google-adk ``CacheMetadata``: active when ``cache_name`` is set."""

    fingerprint: str
    contents_count: int
    cache_name: str | None = None
    expire_time: float | None = None
    invocations_used: int | None = None
    created_at: float | None = None

    @property
    def active(self) -> bool:
        return self.cache_name is not None

    @classmethod
    def from_proto(cls, message: event_pb2.CacheMetadata) -> Metadata:
        has = message.HasField
        return cls(
            fingerprint=message.fingerprint,
            contents_count=message.contents_count,
            cache_name=message.cache_name if has("cache_name") else None,
            expire_time=message.expire_time if has("expire_time") else None,
            invocations_used=message.invocations_used if has("invocations_used") else None,
            created_at=message.created_at if has("created_at") else None,
        )

    def to_proto(self) -> event_pb2.CacheMetadata:
        message = event_pb2.CacheMetadata(
            fingerprint=self.fingerprint, contents_count=self.contents_count
        )
        if self.cache_name is not None:
            message.cache_name = self.cache_name
        if self.expire_time is not None:
            message.expire_time = self.expire_time
        if self.invocations_used is not None:
            message.invocations_used = self.invocations_used
        if self.created_at is not None:
            message.created_at = self.created_at
        return message


@dataclass(frozen=True)
class CacheInfo:
    """What the log says about the agent's cache before this request."""

    #: the newest metadata of the agent (``invocations_used`` already incremented), or None
    metadata: Metadata | None
    #: the newest prompt token count of the agent, or None
    previous_prompt_tokens: int | None
    #: sequence of the event the metadata came from (0: none)
    metadata_sequence: int = 0


@dataclass(frozen=True)
class CacheScan:
    """Where the agent's newest cache metadata and prompt token count are in a log's first
    ``scanned`` events (-1: none). Extend it with :func:`scan_cache_events` as the log grows."""

    scanned: int = 0
    metadata_index: int = -1
    tokens_index: int = -1


def scan_cache_events(
    events: Sequence[event_pb2.Event], agent_name: str, previous: CacheScan | None = None
) -> CacheScan:
    """Finds the agent's newest event with ``cache_metadata`` and newest event with a
    ``usage_metadata.prompt_token_count``, newest first, reading only the events after
    ``previous.scanned`` (``previous`` must describe a prefix of ``events``)."""
    start = previous.scanned if previous is not None else 0
    metadata_index = tokens_index = -1
    for index in range(len(events) - 1, start - 1, -1):
        event = events[index]
        if event.author != agent_name:
            continue
        if metadata_index < 0 and event.HasField("cache_metadata"):
            metadata_index = index
        if (
            tokens_index < 0
            and event.HasField("usage_metadata")
            and event.usage_metadata.HasField("prompt_token_count")
        ):
            tokens_index = index
        if metadata_index >= 0 and tokens_index >= 0:
            break
    if previous is not None:
        metadata_index = metadata_index if metadata_index >= 0 else previous.metadata_index
        tokens_index = tokens_index if tokens_index >= 0 else previous.tokens_index
    return CacheScan(len(events), metadata_index, tokens_index)


def cache_info(events: Sequence[event_pb2.Event], scan: CacheScan, invocation_id: str) -> CacheInfo:
    """ADK's result for the scanned events: the metadata copied, with ``invocations_used`` + 1
    when it names an active cache and was recorded in another non-empty invocation.

    Deviation: ADK raises when active metadata lacks ``invocations_used``; here it is copied
    unchanged (and is then never valid, so the cache is replaced)."""
    metadata: Metadata | None = None
    sequence = 0
    if scan.metadata_index >= 0:
        event = events[scan.metadata_index]
        metadata = Metadata.from_proto(event.cache_metadata)
        sequence = event.sequence
        if (
            event.invocation_id
            and event.invocation_id != invocation_id
            and metadata.active
            and metadata.invocations_used is not None
        ):
            metadata = replace(metadata, invocations_used=metadata.invocations_used + 1)
    previous: int | None = None
    if scan.tokens_index >= 0:
        previous = events[scan.tokens_index].usage_metadata.prompt_token_count
    return CacheInfo(metadata, previous, sequence)


def find_cache_info(
    events: Sequence[event_pb2.Event], agent_name: str, invocation_id: str
) -> CacheInfo:
    """ADK's ``_find_cache_info_from_events`` over ``events`` (the whole log, in order, no
    rewinds or compaction applied; only events authored by ``agent_name``)."""
    return cache_info(events, scan_cache_events(events, agent_name), invocation_id)


@dataclass(frozen=True)
class CacheSettings:
    """An app's ``ContextCacheConfig`` (ADK's defaults)."""

    cache_intervals: int = 10
    ttl_seconds: int = 1800
    min_tokens: int = 0


class Action(enum.Enum):
    FINGERPRINT_ONLY = "fingerprint_only"
    REUSE = "reuse"
    CREATE = "create"


@dataclass(frozen=True)
class Decision:
    action: Action
    #: what the agent records on its model-response event. CREATE: the fingerprint-only form
    #: (fingerprint and contents_count, what to record if creating fails) until
    #: :meth:`created` adds the cache's name, times and ``invocations_used = 1``
    metadata: Metadata
    #: the active cache ADK deletes before deciding (invalid: expired, used up, prefix changed)
    invalidated_cache_name: str | None = None
    #: REUSE / CREATE: contents before this index are in the cache and are not sent
    send_from_index: int = 0
    #: FINGERPRINT_ONLY although the prefix allowed a cache: the creation gate that said no,
    #: or why creating the cache failed
    not_created_reason: str = ""
    #: True when :meth:`creation_failed` produced this decision
    degraded: bool = False

    @property
    def cache_name(self) -> str | None:
        return self.metadata.cache_name

    def created(self, cache_name: str, expire_time: float, created_at: float) -> Decision:
        """The CREATE decision once the cache exists."""
        if self.action is not Action.CREATE:
            raise ValueError("only a CREATE decision can be completed")
        metadata = replace(
            self.metadata,
            cache_name=cache_name,
            expire_time=expire_time,
            invocations_used=1,
            created_at=created_at,
        )
        return replace(self, metadata=metadata)

    def creation_failed(self, reason: str) -> Decision:
        """ADK's fallback when ``caches.create`` fails: fingerprint only, same prefix."""
        if self.action is not Action.CREATE:
            raise ValueError("only a CREATE decision can fail")
        metadata = Metadata(self.metadata.fingerprint, self.metadata.contents_count)
        return Decision(
            Action.FINGERPRINT_ONLY,
            metadata,
            self.invalidated_cache_name,
            0,
            reason,
            degraded=True,
        )


def _is_valid(
    metadata: Metadata, settings: CacheSettings, now: float, fingerprint: Callable[[int], str]
) -> bool:
    if (
        metadata.cache_name is None
        or metadata.expire_time is None
        or metadata.invocations_used is None
    ):
        return False
    if now >= metadata.expire_time:
        return False
    if metadata.invocations_used > settings.cache_intervals:
        return False
    return fingerprint(metadata.contents_count) == metadata.fingerprint


def _creation_gate(
    info: CacheInfo,
    settings: CacheSettings,
    model: str,
    n: int,
    fixed_chars: int,
    content_chars: Callable[[], Sequence[int]],
    roles: Sequence[str],
) -> str:
    previous = info.previous_prompt_tokens
    if previous is None:
        return NO_PREVIOUS_PROMPT
    if previous < settings.min_tokens:
        return BELOW_MIN_TOKENS
    floor = minimum_cache_tokens(model)
    if floor is not None:
        estimate = estimate_prefix_tokens(
            previous,
            fixed_chars=fixed_chars,
            content_chars=content_chars(),
            appended=appended_chars(roles),
            contents_count=n,
        )
        if estimate < floor:
            return BELOW_MODEL_MINIMUM
    return ""


def decide(
    info: CacheInfo,
    *,
    roles: Sequence[str],
    fingerprint: Callable[[int], str],
    settings: CacheSettings,
    now: float,
    model: str,
    fixed_chars: int = 0,
    content_chars: Callable[[], Sequence[int]] = tuple,
) -> Decision:
    """ADK's decision for a request whose returned contents have ``roles``.

    ``fingerprint(n)`` is the request's fingerprint for its first n contents; ``fixed_chars``
    the characters ADK's estimate counts for the system instruction and tools and
    ``content_chars()`` the text characters of each returned content (only called when the
    model has a floor and a cache could be created)."""
    prefix_count = cacheable_count(roles)
    metadata = info.metadata
    if metadata is None:
        return Decision(Action.FINGERPRINT_ONLY, Metadata(fingerprint(prefix_count), prefix_count))
    if _is_valid(metadata, settings, now, fingerprint):
        return Decision(
            Action.REUSE,
            metadata,
            send_from_index=send_from_index(metadata.contents_count, roles),
        )
    invalidated = metadata.cache_name
    previous_count = metadata.contents_count
    if fingerprint(previous_count) == metadata.fingerprint:
        n = max(previous_count, prefix_count)
        gate = _creation_gate(info, settings, model, n, fixed_chars, content_chars, roles)
        if gate:
            return Decision(
                Action.FINGERPRINT_ONLY,
                Metadata(fingerprint(n), n),
                invalidated,
                not_created_reason=gate,
            )
        return Decision(
            Action.CREATE,
            Metadata(fingerprint(n), n),
            invalidated,
            send_from_index=send_from_index(n, roles),
        )
    return Decision(
        Action.FINGERPRINT_ONLY, Metadata(fingerprint(prefix_count), prefix_count), invalidated
    )
