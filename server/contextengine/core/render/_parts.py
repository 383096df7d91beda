"""What the renderers read of a content's parts: the engine's proto parts as plain values.

A function response's attached media (``FunctionResponse.parts``, stored as JSON objects) are
decoded here into blobs. Payloads (call arguments, responses) are plain JSON values with their
keys sorted at every level: a protobuf ``Struct`` keeps no key order, and a rendering must be the
same bytes on every call for a provider's prefix cache (docs/design/renderings.md).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from google.protobuf import struct_pb2

from contextengine.core.errors import ContextEngineError
from contextengine.core.structs import sorted_keys, struct_to_dict
from contextengine.v1 import content_pb2

__all__ = ["Blob", "json_text", "media_of_response", "mime", "payload", "role_of"]


@dataclass(frozen=True)
class Blob:
    """Inline data: its MIME type (as written) and bytes."""

    mime_type: str
    data: bytes


def mime(mime_type: str) -> str:
    """A MIME type without parameters, lower case (``image/PNG; x=1`` is ``image/png``)."""
    return mime_type.split(";", 1)[0].strip().lower()


def role_of(content: content_pb2.Content) -> str:
    """``assistant`` for the model's contents, ``user`` for everything else (google-adk's rule
    in both of its adapters)."""
    return "assistant" if content.role in ("model", "assistant") else "user"


def payload(struct: struct_pb2.Struct, field_name: str) -> Any:
    """A call's arguments or a response as JSON data, keys sorted; ``{}`` when not valid JSON
    (a non-finite number)."""
    try:
        return sorted_keys(struct_to_dict(struct, field_name))
    except ContextEngineError:
        return {}


def json_text(value: Any, *, ascii_only: bool = False) -> str:
    """``json.dumps`` as google-adk's adapters call it (``ensure_ascii`` as each adapter sets
    it: off in LiteLlm, on in the Claude model)."""
    return json.dumps(value, ensure_ascii=ascii_only)


def media_of_response(response: content_pb2.FunctionResponse) -> list[Blob]:
    """The inline media a tool attached to its response, in order (parts without data or MIME
    type, or whose data is not base64, are left out, as google-adk leaves them)."""
    out: list[Blob] = []
    for part in response.parts:
        fields = part.fields
        if "inline_data" not in fields and "inlineData" not in fields:
            continue
        blob = fields["inline_data"] if "inline_data" in fields else fields["inlineData"]
        if blob.WhichOneof("kind") != "struct_value":
            continue
        inner = blob.struct_value.fields
        data = inner.get("data")
        kind = inner.get("mime_type") or inner.get("mimeType")
        if data is None or kind is None or not kind.string_value or not data.string_value:
            continue
        text = data.string_value.replace("-", "+").replace("_", "/")
        try:
            raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        out.append(Blob(kind.string_value, raw))
    return out
