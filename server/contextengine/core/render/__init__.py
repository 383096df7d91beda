"""Renderings: the context as another provider's request takes it (docs/design/renderings.md).

BuildContext's contents are google-genai ``Content`` (the Gemini shape). :func:`render` turns
them, with the request's system instruction, into:

* :attr:`RenderFormat.OPENAI_CHAT`: Chat Completions ``messages`` (the system message first),
  as google-adk 2.13's ``LiteLlm`` sends them;
* :attr:`RenderFormat.OPENAI_RESPONSES`: Responses API ``input`` items, with the system
  instruction as ``instructions``;
* :attr:`RenderFormat.ANTHROPIC_MESSAGES`: Messages ``messages`` and ``system``, as
  google-adk's ``Claude`` sends them, with prompt-cache breakpoints when asked.

The OpenAI renderings first add the user turns google-adk's ``LiteLlm`` adds before it sends
(``BaseLlm._maybe_append_user_content`` and ``_append_fallback_user_content_if_missing``): a
continuation turn when the contents end with the model's, and a user turn (or text) when no user
turn carries anything; their words are :class:`RenderTexts`. Every item is plain JSON data that
the provider's SDK accepts as it is. Pure, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextengine.core.render._anthropic import AnthropicCache, anthropic_request
from contextengine.core.render._openai_chat import chat_messages
from contextengine.core.render._openai_responses import responses_input
from contextengine.core.render._texts import DEFAULT_TEXTS, RenderTexts
from contextengine.core.render._tokens import rendering_tokens
from contextengine.v1 import content_pb2

__all__ = [
    "DEFAULT_TEXTS",
    "AnthropicCache",
    "RenderFormat",
    "RenderTexts",
    "Rendering",
    "render",
    "rendering_tokens",
    "system_text",
]


class RenderFormat(enum.Enum):
    """The provider request shapes a context can be rendered as."""

    OPENAI_CHAT = "openai_chat"
    OPENAI_RESPONSES = "openai_responses"
    ANTHROPIC_MESSAGES = "anthropic_messages"


@dataclass(frozen=True)
class Rendering:
    """A rendered context: ``items`` (Chat ``messages``, Responses ``input``, Anthropic
    ``messages``) and ``system`` (Anthropic's ``system`` parameter, the Responses
    ``instructions``; None when there is none, and always for Chat, whose system message is
    the first item)."""

    format: RenderFormat
    items: list[dict[str, Any]]
    system: Any = None
    #: for each content, how many items there are once it is rendered (the items the request
    #: adds at its end, a continuation turn and results for calls never answered, come after
    #: the last one)
    ends: tuple[int, ...] = ()

    def items_of(self, count: int) -> int:
        """How many leading items render the first ``count`` contents (the system message of a
        Chat rendering included)."""
        if count <= 0 or not self.ends:
            return 1 if self.format is RenderFormat.OPENAI_CHAT and self.system_in_items else 0
        return self.ends[min(count, len(self.ends)) - 1]

    @property
    def system_in_items(self) -> bool:
        """A Chat rendering's system message is its first item."""
        return bool(self.items) and self.items[0].get("role") == "system"


def system_text(instruction: content_pb2.Content | None) -> str | None:
    """A system instruction as the text google-adk's adapters send: its text parts joined by
    newlines; None without one."""
    if instruction is None:
        return None
    texts = [part.text for part in instruction.parts if part.text]
    return "\n".join(texts) if texts else None


def render(
    contents: Sequence[content_pb2.Content],
    format: RenderFormat,
    *,
    system: str | None = None,
    texts: RenderTexts = DEFAULT_TEXTS,
    cache: AnthropicCache | None = None,
) -> Rendering:
    """``contents`` (BuildContext's) rendered as ``format`` (see the module documentation).
    ``cache``: where Anthropic's prompt-cache breakpoints go (None: none)."""
    if format is RenderFormat.ANTHROPIC_MESSAGES:
        anthropic_system, messages, ends = anthropic_request(contents, system, texts, cache)
        return Rendering(format, messages, anthropic_system, tuple(ends))
    shaped = with_user_turns(contents, texts)
    if format is RenderFormat.OPENAI_CHAT:
        messages, ends = chat_messages(shaped, system, texts)
        return Rendering(format, messages, None, tuple(ends[: len(contents)]))
    items, ends = responses_input(shaped, texts)
    return Rendering(format, items, system, tuple(ends[: len(contents)]))


def with_user_turns(
    contents: Sequence[content_pb2.Content], texts: RenderTexts
) -> list[content_pb2.Content]:
    """``contents`` with the user turns google-adk's ``LiteLlm`` adds before it sends: after
    contents ending with the model's, a continuation turn; with no user turn carrying anything,
    the empty text added to the last user turn (or as a new one). The input is not changed."""
    out = list(contents)
    if not out:
        return [_user(texts.empty_text)]
    if out[-1].role != "user":
        out.append(_user(texts.continue_text))
    for index in range(len(out) - 1, -1, -1):
        if out[index].role != "user":
            continue
        if any(_has_payload(part) for part in out[index].parts):
            return out
        amended = content_pb2.Content()
        amended.CopyFrom(out[index])
        amended.parts.add(text=texts.empty_text)
        out[index] = amended
        return out
    out.append(_user(texts.empty_text))
    return out


def _user(text: str) -> content_pb2.Content:
    return content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)])


def _has_payload(part: content_pb2.Part) -> bool:
    return bool(
        part.text
        or (part.HasField("inline_data") and part.inline_data.data)
        or (part.HasField("file_data") and part.file_data.file_uri)
        or part.HasField("function_response")
    )
