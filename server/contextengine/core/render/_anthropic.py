"""Anthropic Messages ``system`` and ``messages``, as google-adk 2.13's ``Claude`` model builds them.

google-adk's ``AnthropicLlm`` (``models/anthropic_llm.py``: ``_content_to_message_param``,
``_part_to_message_block``, ``_ToolUseIdSanitizer``, ``_apply_cache_breakpoints``) is the
reference; the differential test (``tests/core/render``) holds this module to it at every step of
generated sessions. Where it would send what Anthropic's API refuses, the rendering follows the
provider (docs/design/renderings.md lists each case):

* a thought without a signature (another model's reasoning) is not sent: Anthropic refuses a
  thinking block whose signature it did not issue; a signature that is not text (another
  model's) likewise;
* a part google-adk cannot send (audio, an image type Claude does not read, a file by
  reference) is left out instead of failing the request;
* no contents at all: one user turn (the empty text), where google-adk sends none.

Cache breakpoints (when the caller asks: the app caches): on the system instruction, at the
end of the engine's cacheable prefix (the contents before the trailing user turn: what the next
call will send again), and at the end of the conversation (google-adk's only conversation
breakpoint); three of the four Anthropic allows (the fourth is the caller's, for its tools).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from contextengine.core.render._parts import media_of_response, mime, payload, role_of
from contextengine.core.render._texts import RenderTexts
from contextengine.v1 import content_pb2

__all__ = ["AnthropicCache", "anthropic_request"]

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
_VALID_ID = re.compile(r"[a-zA-Z0-9_-]+")


@dataclass(frozen=True)
class AnthropicCache:
    """Where the breakpoints go: ``cacheable_count`` leading contents form the cacheable prefix;
    ``one_hour``: the hour-long cache (a configured lifetime of an hour or more)."""

    cacheable_count: int
    one_hour: bool = False

    def control(self) -> dict[str, str]:
        return {"type": "ephemeral", "ttl": "1h"} if self.one_hour else {"type": "ephemeral"}


@dataclass
class _Ids:
    """google-adk's ``_ToolUseIdSanitizer``: ids Anthropic refuses (empty, other characters)
    become ``toolu_fallback_N``, the same for a call and its result; a result without an id is
    paired with the oldest unpaired call of its name, else the oldest unpaired call."""

    mapping: dict[str, str] = field(default_factory=dict)
    unpaired_by_name: dict[str, list[str]] = field(default_factory=dict)
    unpaired: list[str] = field(default_factory=list)
    next_fallback: int = 0

    def _fallback(self) -> str:
        made = f"toolu_fallback_{self.next_fallback}"
        self.next_fallback += 1
        return made

    def of(self, tool_id: str, name: str, *, call: bool) -> str:
        if tool_id and _VALID_ID.fullmatch(tool_id):
            return tool_id
        if tool_id and tool_id in self.mapping:
            return self.mapping[tool_id]
        if call or tool_id:
            made = self._fallback()
            if tool_id:
                self.mapping[tool_id] = made
            else:
                if name:
                    self.unpaired_by_name.setdefault(name, []).append(made)
                self.unpaired.append(made)
            return made
        if name and self.unpaired_by_name.get(name):
            made = self.unpaired_by_name[name].pop(0)
            if made in self.unpaired:
                self.unpaired.remove(made)
            return made
        if self.unpaired:
            made = self.unpaired.pop(0)
            for ids in self.unpaired_by_name.values():
                if made in ids:
                    ids.remove(made)
                    break
            return made
        return self._fallback()


def anthropic_request(
    contents: Sequence[content_pb2.Content],
    system: str | None,
    texts: RenderTexts,
    cache: AnthropicCache | None,
) -> tuple[Any, list[dict[str, Any]], list[int]]:
    """The ``system`` parameter (None: not sent) and the ``messages`` of a Messages request, and
    for each content how many messages there are once it is rendered."""
    ids = _Ids()
    messages: list[dict[str, Any]] = []
    ends: list[int] = []
    #: index in ``messages`` of the last message made from the cacheable prefix
    prefix_end = -1
    for index, content in enumerate(contents):
        message = _message(content, ids)
        if message is not None:
            messages.append(message)
            if cache is not None and index < cache.cacheable_count:
                prefix_end = len(messages) - 1
        ends.append(len(messages))
    if not messages:
        messages.append({"role": "user", "content": [{"type": "text", "text": texts.empty_text}]})
    if cache is None:
        return system or None, messages, ends
    control = cache.control()
    if prefix_end >= 0:
        _mark(messages[: prefix_end + 1], control)
    _mark(messages, control)
    if system:
        return [{"type": "text", "text": system, "cache_control": control}], messages, ends
    return None, messages, ends


def _mark(messages: Sequence[dict[str, Any]], control: dict[str, str]) -> None:
    """A breakpoint on the last block of ``messages`` Claude can cache (searching back past
    thinking blocks and empty turns)."""
    for message in reversed(messages):
        for block in reversed(message["content"]):
            if block["type"] in _UNCACHEABLE:
                continue
            block["cache_control"] = dict(control)
            return


def _message(content: content_pb2.Content, ids: _Ids) -> dict[str, Any] | None:
    role = role_of(content)
    blocks: list[dict[str, Any]] = []
    empty_text = False
    for part in content.parts:
        if content.role != "user" and part.HasField("inline_data") and _media(part.inline_data):
            continue  # Claude takes no images or documents in its own turns (nor, in
            # google-adk, in a turn without a role)
        if _signature_only(part):
            continue
        if _empty_text(part):
            empty_text = True
            continue
        block = _block(part, ids)
        if block is not None:
            blocks.append(block)
    if not blocks and empty_text and role == "user":
        blocks.append({"type": "text", "text": "."})
    return {"role": role, "content": blocks} if blocks else None


def _media(blob: content_pb2.Blob) -> bool:
    kind = mime(blob.mime_type)
    return kind.startswith("image/") or kind == "application/pdf"


_ContentField = Literal[
    "code_execution_result",
    "executable_code",
    "file_data",
    "function_call",
    "function_response",
    "inline_data",
    "tool_call",
    "tool_response",
    "audio_transcription",
]
#: the fields that make a part carry something to send (the rest is annotation)
_CONTENT_FIELDS: tuple[_ContentField, ...] = get_args(_ContentField)


def _carries(part: content_pb2.Part) -> bool:
    return any(part.HasField(name) for name in _CONTENT_FIELDS)


def _empty_text(part: content_pb2.Part) -> bool:
    return (
        part.HasField("text")
        and part.text == ""
        and not part.thought_signature
        and not _carries(part)
    )


def _signature_only(part: content_pb2.Part) -> bool:
    return (
        bool(part.thought_signature) and not part.thought and not part.text and not _carries(part)
    )


def _signature(part: content_pb2.Part) -> str | None:
    try:
        return part.thought_signature.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _block(part: content_pb2.Part, ids: _Ids) -> dict[str, Any] | None:
    if part.thought and part.text:
        signature = _signature(part)
        if not signature:
            return None  # another model's reasoning: Claude refuses an unsigned thinking block
        return {"type": "thinking", "thinking": part.text, "signature": signature}
    if part.thought and part.thought_signature:
        data = _signature(part)
        return {"type": "redacted_thinking", "data": data} if data else None
    if part.text:
        return {"type": "text", "text": part.text}
    if part.HasField("function_call"):
        call = part.function_call
        arguments = payload(call.args, "function_call.args") if call.HasField("args") else {}
        return {
            "type": "tool_use",
            "id": ids.of(call.id, call.name, call=True),
            "name": call.name,
            "input": arguments,
        }
    if part.HasField("function_response"):
        return _tool_result(part.function_response, ids)
    if part.HasField("inline_data"):
        return _inline(part.inline_data)
    if part.HasField("executable_code"):
        return {"type": "text", "text": "Code:```python\n" + part.executable_code.code + "\n```"}
    if part.HasField("code_execution_result"):
        output = part.code_execution_result.output
        return {"type": "text", "text": "Execution Result:```code_output\n" + output + "\n```"}
    return None


def _inline(blob: content_pb2.Blob) -> dict[str, Any] | None:
    kind = mime(blob.mime_type)
    data = base64.b64encode(blob.data).decode("ascii")
    if kind in _IMAGE_TYPES:
        return {"type": "image", "source": {"type": "base64", "media_type": kind, "data": data}}
    if kind == "application/pdf":
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": data},
        }
    return None


def _tool_result(response: content_pb2.FunctionResponse, ids: _Ids) -> dict[str, Any]:
    data = payload(response.response, "response") if response.HasField("response") else {}
    data = data if isinstance(data, dict) else {}
    text = _result_text(data)
    media = [block for block in map(_media_block, media_of_response(response)) if block]
    body: str | list[dict[str, Any]] = text
    if media:
        body = ([{"type": "text", "text": text}] if text else []) + media
    return {
        "type": "tool_result",
        "tool_use_id": ids.of(response.id, response.name, call=False),
        "content": body,
        "is_error": False,
    }


def _media_block(blob: Any) -> dict[str, Any] | None:
    return _inline(content_pb2.Blob(mime_type=blob.mime_type, data=blob.data))


def _result_text(data: dict[str, Any]) -> str:
    """The text of a tool result: google-adk's rules (a ``content`` list of text items, a
    ``content`` string, the value of a lone ``result``, else the whole response as JSON)."""
    content = data.get("content")
    if isinstance(content, list) and content:
        return "\n".join(
            item["text"]
            if isinstance(item, dict) and item.get("type") == "text" and "text" in item
            else str(item)
            for item in content
        )
    if isinstance(content, str) and content:
        return content
    if data.keys() == {"result"} and data["result"] is not None:
        result = data["result"]
        return json.dumps(result) if isinstance(result, (dict, list)) else str(result)
    return json.dumps(data) if data else ""
