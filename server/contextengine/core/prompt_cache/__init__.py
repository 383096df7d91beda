"""Prompt caching: the language-neutral fingerprint (RFC 8785 canonical JSON, SHA-256), ADK's
cacheable-prefix rules and cache decisions, and the cache-aware compaction policy. Pure
functions, no I/O; see ``docs/design/prompt-cache.md``."""

from __future__ import annotations

from contextengine.core.prompt_cache._canonical import (
    CanonicalizationError,
    canonicalize,
    number_to_string,
    utf16_key,
)
from contextengine.core.prompt_cache._decision import (
    BELOW_MIN_TOKENS,
    BELOW_MODEL_MINIMUM,
    NO_PREVIOUS_PROMPT,
    Action,
    CacheInfo,
    CacheScan,
    CacheSettings,
    Decision,
    Metadata,
    cache_info,
    decide,
    find_cache_info,
    scan_cache_events,
)
from contextengine.core.prompt_cache._fingerprint import (
    FINGERPRINT_VERSION,
    Fingerprints,
    PromptPrefix,
    canonical_content,
    content_json,
    fingerprint,
    fingerprint_document,
    normalize_tools,
)
from contextengine.core.prompt_cache._prefix import (
    APPENDED_CONTINUE_CHARS,
    APPENDED_EMPTY_CHARS,
    appended_chars,
    cacheable_count,
    estimate_prefix_tokens,
    minimum_cache_tokens,
    request_length,
    send_from_index,
    text_chars,
)

__all__ = [
    "APPENDED_CONTINUE_CHARS",
    "APPENDED_EMPTY_CHARS",
    "BELOW_MIN_TOKENS",
    "BELOW_MODEL_MINIMUM",
    "FINGERPRINT_VERSION",
    "NO_PREVIOUS_PROMPT",
    "Action",
    "CacheInfo",
    "CacheScan",
    "CacheSettings",
    "CanonicalizationError",
    "Decision",
    "Fingerprints",
    "Metadata",
    "PromptPrefix",
    "appended_chars",
    "cache_info",
    "cacheable_count",
    "canonical_content",
    "canonicalize",
    "content_json",
    "decide",
    "estimate_prefix_tokens",
    "find_cache_info",
    "fingerprint",
    "fingerprint_document",
    "minimum_cache_tokens",
    "normalize_tools",
    "number_to_string",
    "request_length",
    "scan_cache_events",
    "send_from_index",
    "text_chars",
    "utf16_key",
]
