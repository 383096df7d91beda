"""The prompt-cache fingerprint: a language-neutral digest of a request's stable prefix.

The digest is the lowercase hex SHA-256 of the UTF-8 bytes of the RFC 8785 (JCS) canonical JSON
of one document (``docs/design/prompt-cache.md`` is the normative text)::

    {"v": 1,
     "model": <model name>,
     "system_instruction": <proto3 JSON of the Content, original field names>,
     "tools": [<tool JSON objects, normalised as below>],
     "tool_config": <tool config JSON object>,
     "contents": [<proto3 JSON of each of the first n contents, original field names>]}

A key is left out when its value is unset or empty (empty model name, no or empty system
instruction, no tools, no or empty tool config, ``n == 0`` or no contents). Tools: in each tool
object, a ``function_declarations`` (or ``functionDeclarations``) array is stably sorted by each
declaration's ``name`` (UTF-16 code units; a missing name sorts as ""); then the list is stably
sorted by each tool's JCS text (UTF-16 code units).

The members of the document sort as ``contents``, ``model``, ``system_instruction``,
``tool_config``, ``tools``, ``v``: the contents come first, so a digest for ``n`` contents is the
hash of ``{"contents":[`` + the first n canonical contents joined by ``,`` + ``],`` + the rest of
the document. :class:`Fingerprints` streams that, with each content canonicalized once.

Pure, no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from contextengine.core.prompt_cache._canonical import canonicalize, utf16_key
from contextengine.v1 import content_pb2

__all__ = [
    "FINGERPRINT_VERSION",
    "Fingerprints",
    "PromptPrefix",
    "canonical_content",
    "content_json",
    "fingerprint",
    "fingerprint_document",
    "normalize_tools",
]

FINGERPRINT_VERSION = 1

_CONTENTS_OPEN = '{"contents":['
_DECLARATIONS = ("function_declarations", "functionDeclarations")


def content_json(content: content_pb2.Content) -> dict[str, Any]:
    """The proto3 JSON of ``content`` with the original (snake_case) field names."""
    return json_format.MessageToDict(content, preserving_proto_field_name=True)


def canonical_content(content: content_pb2.Content) -> str:
    """The JCS text of ``content``'s proto3 JSON."""
    return canonicalize(content_json(content))


def _declaration_name(declaration: Any) -> bytes:
    name = declaration.get("name") if isinstance(declaration, Mapping) else None
    return utf16_key(name if isinstance(name, str) else "")


def normalize_tools(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tools in fingerprint order: declarations sorted by name, tools by their JCS text."""
    normalized: list[dict[str, Any]] = []
    for tool in tools:
        copy = dict(tool)
        for key in _DECLARATIONS:
            declarations = copy.get(key)
            if isinstance(declarations, list):
                copy[key] = sorted(declarations, key=_declaration_name)
        normalized.append(copy)
    return sorted(normalized, key=lambda tool: utf16_key(canonicalize(tool)))


@dataclass(frozen=True)
class PromptPrefix:
    """What the fingerprint covers besides the contents: the request's fixed parts, as JSON."""

    #: model name ("" = not part of the document)
    model: str = ""
    #: proto3 JSON of the system instruction Content (original field names), or None
    system_instruction: Mapping[str, Any] | None = None
    #: google-genai ``Tool`` JSON objects
    tools: tuple[Mapping[str, Any], ...] = ()
    #: google-genai ``ToolConfig`` JSON object, or None
    tool_config: Mapping[str, Any] | None = None

    def document(self) -> dict[str, Any]:
        """The fingerprint document without its contents."""
        document: dict[str, Any] = {"v": FINGERPRINT_VERSION}
        if self.model:
            document["model"] = self.model
        if self.system_instruction:
            document["system_instruction"] = self.system_instruction
        if self.tools:
            document["tools"] = normalize_tools(self.tools)
        if self.tool_config:
            document["tool_config"] = self.tool_config
        return document

    def canonical_rest(self) -> str:
        """The JCS text of :meth:`document` (the digest's input when there are no contents)."""
        return canonicalize(self.document())


def fingerprint_document(
    prefix: PromptPrefix, contents: Sequence[Mapping[str, Any]], n: int
) -> dict[str, Any]:
    """The whole document for the first ``n`` of ``contents`` (proto3 JSON objects)."""
    document = prefix.document()
    count = min(max(n, 0), len(contents))
    if count:
        document["contents"] = list(contents[:count])
    return document


def _digest(rest: str, canonical_contents: Sequence[str], n: int) -> str:
    count = min(max(n, 0), len(canonical_contents))
    if count == 0:
        return hashlib.sha256(rest.encode()).hexdigest()
    hasher = hashlib.sha256(_CONTENTS_OPEN.encode())
    hasher.update(",".join(canonical_contents[:count]).encode())
    hasher.update(("]," + rest[1:]).encode())
    return hasher.hexdigest()


def fingerprint(prefix: PromptPrefix, contents: Sequence[content_pb2.Content], n: int) -> str:
    """The fingerprint of ``prefix`` and the first ``n`` of ``contents``."""
    count = min(max(n, 0), len(contents))
    return _digest(prefix.canonical_rest(), [canonical_content(c) for c in contents[:count]], count)


@dataclass
class Fingerprints:
    """Fingerprints of one request for several ``n``: each content is canonicalized at most
    once (``canonical`` may be shared with a previous request whose contents this one extends)."""

    prefix: PromptPrefix
    contents: Sequence[content_pb2.Content]
    #: canonical texts of the leading contents, filled on demand
    canonical: list[str] = field(default_factory=list)
    _rest: str = ""
    _digests: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rest = self.prefix.canonical_rest()
        del self.canonical[len(self.contents) :]

    def of(self, n: int) -> str:
        """The fingerprint for the first ``min(n, len(contents))`` contents."""
        count = min(max(n, 0), len(self.contents))
        digest = self._digests.get(count)
        if digest is None:
            while len(self.canonical) < count:
                self.canonical.append(canonical_content(self.contents[len(self.canonical)]))
            digest = self._digests[count] = _digest(self._rest, self.canonical, count)
        return digest
