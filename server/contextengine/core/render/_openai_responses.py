"""OpenAI Responses API ``input`` items (and its ``instructions``), from OpenAI's documented item
types; google-adk has no Responses adapter, so the turns it adds are the Chat rendering's.

* a user turn: ``{"type": "message", "role": "user", "content": [input_text | input_image |
  input_file ...]}``; a function response: ``{"type": "function_call_output", "call_id",
  "output"}`` (the response as JSON text, as the Chat rendering sends it);
* the model's turn: its text as ``{"type": "message", "role": "assistant", "content": text}``
  (the several texts of one turn joined by newlines), each call as ``{"type": "function_call",
  "call_id", "name", "arguments"}``;
* left out: reasoning (a Responses reasoning item carries OpenAI's own id and encrypted content,
  which another model's thoughts do not have), audio and video (``input`` has no item for
  them), parts OpenAI cannot read;
* a call never answered gets the placeholder result the Chat rendering gives it.

``tests/core/render`` validates every rendering of generated sessions against the ``openai`` SDK's
own ``ResponseInputParam`` type, and checks that it carries what the Chat rendering carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextengine.core.render._openai_chat import chat_messages
from contextengine.core.render._texts import RenderTexts
from contextengine.v1 import content_pb2

__all__ = ["responses_input"]


def responses_input(
    contents: Sequence[content_pb2.Content], texts: RenderTexts
) -> tuple[list[dict[str, Any]], list[int]]:
    """The ``input`` items for ``contents`` (the continuation turn already added), and for each
    content how many items there are once it is rendered (as :func:`chat_messages` counts)."""
    messages, message_ends = chat_messages(contents, None, texts)
    items: list[dict[str, Any]] = []
    #: items once each chat message is rendered
    after: list[int] = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": message["content"],
                }
            )
        elif role == "assistant":
            if "content" in message:
                items.append(
                    {"type": "message", "role": "assistant", "content": message["content"]}
                )
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                }
                for call in message.get("tool_calls", [])
            )
        else:
            content = _input_content(message["content"])
            if content:
                items.append({"type": "message", "role": "user", "content": content})
        after.append(len(items))
    return items, [after[end - 1] if end else 0 for end in message_ends]


def _input_content(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    out: list[dict[str, Any]] = []
    for block in content:
        kind = block["type"]
        if kind == "text":
            out.append({"type": "input_text", "text": block["text"]})
        elif kind == "image_url":
            out.append(
                {"type": "input_image", "image_url": block["image_url"]["url"], "detail": "auto"}
            )
        elif kind == "file":
            file = block["file"]
            if "file_id" in file:
                out.append({"type": "input_file", "file_id": file["file_id"]})
            else:
                out.append(
                    {
                        "type": "input_file",
                        "file_data": file["file_data"],
                        "filename": file["filename"],
                    }
                )
    return out
