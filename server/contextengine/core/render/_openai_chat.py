"""OpenAI Chat Completions ``messages``, as google-adk 2.13's ``LiteLlm`` builds them.

google-adk's ``LiteLlm`` (``models/lite_llm.py``: ``_content_to_message_param``, ``_get_content``,
``_ensure_tool_results``) is the reference, for an ``openai/...`` model; the differential test
(``tests/core/render``) holds this module to it at every step of generated sessions. Where it would
send what OpenAI's API refuses, or needs the network, the rendering follows the provider
(docs/design/renderings.md lists each case):

* keys whose value is null are left out (``tool_calls: null``; LiteLLM strips them too);
* LiteLLM's own extensions are not sent: ``reasoning_content`` (OpenAI takes no reasoning in
  a request), a call's ``provider_specific_fields`` / ``extra_content`` (Gemini's thought
  signature);
* a document ``LiteLlm`` would upload to OpenAI's file store first (PDF, Word, JSON, ...) is
  sent inline as ``{"type": "file", "file": {"file_data": "data:...", "filename": ...}}``;
* a message left with nothing to send (a user turn of thoughts only; an assistant turn of code
  parts only) is not sent: OpenAI refuses a message without content;
* an assistant turn's media are left out (OpenAI takes only text there);
* media OpenAI cannot read are left out: images other than PNG, JPEG, GIF and WebP, audio other
  than WAV and MP3, video (google-adk sends them; OpenAI refuses the request).

Streaming and pure: a content's messages depend only on it and on the calls still waiting for a
result before it, so the rendering of a longer list begins with the rendering of a shorter one
(up to the request's tail: the continuation turn and the placeholders for calls never answered).
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Iterable, Sequence
from typing import Any

from contextengine.core.render._parts import (
    Blob,
    json_text,
    media_of_response,
    mime,
    payload,
    role_of,
)
from contextengine.core.render._texts import RenderTexts
from contextengine.v1 import content_pb2

__all__ = ["chat_messages"]

#: Document types google-adk sends to OpenAI as files (it uploads them; we send them inline).
_FILE_TYPES = frozenset(
    {
        "application/pdf",
        "application/msword",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/json",
        "application/x-sh",
    }
)


#: What OpenAI reads as images and as audio.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_AUDIO_FORMATS = frozenset({"wav", "mp3"})


def chat_messages(
    contents: Sequence[content_pb2.Content], system: str | None, texts: RenderTexts
) -> tuple[list[dict[str, Any]], list[int]]:
    """The ``messages`` of a Chat Completions request for ``contents`` (the request's contents
    with the continuation turn already added) and the system instruction; and, for each content,
    how many messages there are once it is rendered (the results put in for calls never
    answered at the very end are not counted)."""
    messages: list[dict[str, Any]] = []
    ends: list[int] = []
    if system:
        messages.append({"role": "system", "content": system})
    waiting: list[str] = []
    for content in contents:
        for message in _messages(content):
            role = message["role"]
            if waiting and role != "tool":
                messages.extend(_missing(waiting, texts))
                waiting = []
            if role == "assistant":
                waiting = [c["id"] for c in message.get("tool_calls", []) if c["id"]]
            elif role == "tool" and message["tool_call_id"] in waiting:
                waiting.remove(message["tool_call_id"])
            messages.append(message)
        ends.append(len(messages))
    messages.extend(_missing(waiting, texts))
    return messages, ends


def _missing(call_ids: Iterable[str], texts: RenderTexts) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": call_id, "content": texts.missing_tool_result}
        for call_id in call_ids
    ]


def _messages(content: content_pb2.Content) -> list[dict[str, Any]]:
    parts = list(content.parts)
    tools: list[dict[str, Any]] = []
    rest: list[content_pb2.Part] = []
    for part in parts:
        if part.HasField("function_response"):
            response = part.function_response
            value = (
                payload(response.response, "response") if response.HasField("response") else None
            )
            tools.append({"role": "tool", "tool_call_id": response.id, "content": json_text(value)})
            rest.extend(_blob_part(blob) for blob in media_of_response(response))
        else:
            rest.append(part)
    if tools:
        return tools + (
            _messages(content_pb2.Content(role=content.role, parts=rest)) if rest else []
        )
    if not parts:
        return []
    if role_of(content) == "user":
        body = _body([p for p in parts if not p.thought])
        return [{"role": "user", "content": body}] if body else []
    return _assistant(parts)


def _assistant(parts: Sequence[content_pb2.Part]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    shown: list[content_pb2.Part] = []
    for part in parts:
        if part.HasField("function_call"):
            call = part.function_call
            arguments = payload(call.args, "function_call.args") if call.HasField("args") else None
            calls.append(
                {
                    "type": "function",
                    "id": call.id,
                    "function": {"name": call.name, "arguments": json_text(arguments)},
                }
            )
        elif not part.thought:
            shown.append(part)
    body = _body(shown) if shown else None
    if isinstance(body, list):
        # google-adk sends an assistant turn's text parts as one string (OpenAI takes text only)
        written = [block["text"] for block in body if block["type"] == "text"]
        body = "\n".join(written) if written else None
    message: dict[str, Any] = {"role": "assistant"}
    if body:
        message["content"] = body
    if calls:
        message["tool_calls"] = calls
    return [message] if len(message) > 1 else []


def _blob_part(blob: Blob) -> content_pb2.Part:
    return content_pb2.Part(inline_data=content_pb2.Blob(mime_type=blob.mime_type, data=blob.data))


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1", errors="replace")


def _body(parts: Sequence[content_pb2.Part]) -> str | list[dict[str, Any]]:
    """A message's ``content``: a single text as a string, else a list of content parts."""
    if len(parts) == 1:
        part = parts[0]
        if part.text:
            return part.text
        blob = part.inline_data
        if part.HasField("inline_data") and blob.data and mime(blob.mime_type).startswith("text/"):
            return _decoded(blob.data)
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.text:
            out.append({"type": "text", "text": part.text})
        elif part.HasField("inline_data") and part.inline_data.data and part.inline_data.mime_type:
            block = _blob(part.inline_data)
            if block is not None:
                out.append(block)
        elif part.HasField("file_data") and part.file_data.file_uri:
            block = _file(part.file_data)
            if block is not None:
                out.append(block)
    return out


def _blob(blob: content_pb2.Blob) -> dict[str, Any] | None:
    kind = mime(blob.mime_type)
    if kind.startswith("text/"):
        return {"type": "text", "text": _decoded(blob.data)}
    data = base64.b64encode(blob.data).decode("ascii")
    major, _, minor = kind.partition("/")
    if major == "audio":
        audio = _audio(minor)
        if audio not in _AUDIO_FORMATS:
            return None
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio}}
    if major == "image":
        if kind not in _IMAGE_TYPES:
            return None
        return {"type": "image_url", "image_url": {"url": f"data:{kind};base64,{data}"}}
    if kind in _FILE_TYPES:
        extension = mimetypes.guess_extension(kind) or ".bin"
        name = blob.display_name or f"document{extension}"
        return {
            "type": "file",
            "file": {"file_data": f"data:{kind};base64,{data}", "filename": name},
        }
    return None  # google-adk refuses the request; a provider has nothing to read it as


def _audio(subtype: str) -> str:
    subtype = subtype.removeprefix("x-")
    return {"mpeg": "mp3", "wave": "wav", "vnd.wave": "wav"}.get(subtype, subtype)


def _file(file: content_pb2.FileData) -> dict[str, Any] | None:
    """A file by reference: an OpenAI file id, or an http(s) image URL; anything else OpenAI
    cannot fetch is left out."""
    uri = file.file_uri
    if uri.startswith(("file-", "assistant-")):
        return {"type": "file", "file": {"file_id": uri}}
    if not uri.startswith(("http://", "https://")):
        return None
    path = uri.split("?", 1)[0].split("#", 1)[0]
    kind = mime(file.mime_type or mimetypes.guess_type(path)[0] or "")
    if kind in _IMAGE_TYPES:
        return {"type": "image_url", "image_url": {"url": uri}}
    return None
