"""Where a request's cacheable prefix ends, how much of it can be left out of a request that
uses a cache, and ADK's size estimate of that prefix (google-adk 2.13,
``GeminiContextCacheManager``; ``docs/design/prompt-cache.md``).

The request these rules look at is ADK's Gemini request: the contents BuildContext returns,
followed, when they are empty or end with a content whose role is not "user", by the one user
content ADK's Gemini model class appends before handling the cache (``BaseLlm.
_maybe_append_user_content``). Only the size of that content matters here (its characters, for
the estimate); it never enters a fingerprint.

Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextengine.v1 import content_pb2

__all__ = [
    "APPENDED_CONTINUE_CHARS",
    "APPENDED_EMPTY_CHARS",
    "appended_chars",
    "cacheable_count",
    "estimate_prefix_tokens",
    "minimum_cache_tokens",
    "request_length",
    "send_from_index",
    "text_chars",
]

#: Characters of the user content ADK's Gemini class appends after a non-user last content.
APPENDED_CONTINUE_CHARS = 109
#: Characters of the user content it sends when there are no contents at all.
APPENDED_EMPTY_CHARS = 59

_GEMINI_2_5_FLOOR = 2048
_GEMINI_3_FLOOR = 4096


def cacheable_count(roles: Sequence[str]) -> int:
    """ADK's ``_find_count_of_contents_to_cache``: the index where the trailing run of "user"
    contents starts (every content when the last is not "user", 0 when all are)."""
    start = len(roles)
    for index in range(len(roles) - 1, -1, -1):
        if roles[index] != "user":
            break
        start = index
    return start


def appended_chars(roles: Sequence[str]) -> int:
    """Characters of the user content the model class appends to these contents (0: none)."""
    if not roles:
        return APPENDED_EMPTY_CHARS
    return APPENDED_CONTINUE_CHARS if roles[-1] != "user" else 0


def request_length(roles: Sequence[str]) -> int:
    """Number of contents in the request: the returned ones plus the appended one, if any."""
    return len(roles) + (1 if appended_chars(roles) else 0)


def send_from_index(contents_count: int, roles: Sequence[str]) -> int:
    """ADK's ``_apply_cache_to_request``: a request using a cache of ``contents_count`` leading
    contents leaves out the first ``min(contents_count, max(request length - 1, 0))`` (the
    request's last content is always sent). The index is into the returned contents; what
    follows the returned contents (the appended user content) is always sent."""
    return min(contents_count, max(request_length(roles) - 1, 0), len(roles))


def minimum_cache_tokens(model: str) -> int | None:
    """ADK's explicit-cache floors by model name (last '/' segment): "gemini-2.5-*" 2048,
    "gemini-3*" 4096, anything else none."""
    name = model.rsplit("/", 1)[-1]
    if name.startswith("gemini-2.5-"):
        return _GEMINI_2_5_FLOOR
    if name.startswith("gemini-3"):
        return _GEMINI_3_FLOOR
    return None


def text_chars(content: content_pb2.Content) -> int:
    """Characters of the content's non-empty text parts (what ADK's estimate counts)."""
    return sum(len(part.text) for part in content.parts if part.text)


def estimate_prefix_tokens(
    previous_prompt_tokens: int,
    *,
    fixed_chars: int,
    content_chars: Sequence[int],
    appended: int,
    contents_count: int,
) -> int:
    """ADK's ``_estimate_cacheable_prefix_tokens``: the previous prompt's token count scaled by
    the prefix's share of the request, both measured as (system instruction + tools + text
    characters of the contents) // 4. ``fixed_chars`` is the system instruction and tools part,
    ``content_chars`` the text characters of each returned content and ``appended`` those of the
    appended user content."""
    if not previous_prompt_tokens:
        return 0
    request_chars = [*content_chars, appended] if appended else list(content_chars)
    full_estimate = (fixed_chars + sum(request_chars)) // 4
    if full_estimate <= 0:
        return previous_prompt_tokens
    prefix_estimate = (fixed_chars + sum(request_chars[:contents_count])) // 4
    ratio = min(1.0, prefix_estimate / full_estimate)
    return int(previous_prompt_tokens * ratio)
