"""google-adk 2.13's own provider adapters, called directly (no network), as the reference of the
renderings: ``LiteLlm``'s request building for an ``openai/...`` model, and the ``Claude``
model's messages.

Both sides get the same contents. google-adk gets them as google-genai ``Content`` with payload
keys sorted (a protobuf ``Struct`` keeps none; the renderings sort them). Its output is then
taken as the provider accepts it, the documented differences of ``docs/design/renderings.md``
applied (each also has a named test in ``test_adk_adapters.py`` showing google-adk's output):

* OpenAI Chat: keys with a null value, LiteLLM's ``reasoning_content`` / ``provider_specific_
  fields`` / ``extra_content`` left out; a message left with nothing (no content, no calls) not
  sent; an assistant message's non-text content not sent;
* Anthropic: a thinking block without a signature not sent, a user turn left empty by that, that
  held an empty text, gets google-adk's own ``"."``; no message at all: the empty text.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from google.adk.models import anthropic_llm, lite_llm
from google.adk.models.lite_llm import LiteLlm
from google.adk.models.llm_request import LlmRequest
from google.genai import types

from contextengine.core.adk_json import content_to_adk_dict
from contextengine.core.render import RenderTexts
from contextengine.core.structs import sorted_keys
from contextengine.v1 import content_pb2

__all__ = ["ADK_TEXTS", "MODEL", "adk_anthropic", "adk_chat", "raw_adk_chat", "to_genai"]

#: The LiteLLM model the OpenAI rendering is held to.
MODEL = "openai/gpt-4o"
_EXTENSIONS = frozenset({"reasoning_content", "provider_specific_fields", "extra_content"})


def _adk_texts() -> RenderTexts:
    """google-adk's own words for the turns it adds, read from the installed package."""
    continued = LlmRequest(contents=[types.Content(role="model", parts=[types.Part(text="x")])])
    LiteLlm(model=MODEL)._maybe_append_user_content(continued)
    empty = LlmRequest(contents=[])
    LiteLlm(model=MODEL)._maybe_append_user_content(empty)
    return RenderTexts(
        continue_text=str(continued.contents[-1].parts[0].text),  # type: ignore[index]
        empty_text=str(empty.contents[-1].parts[0].text),  # type: ignore[index]
        missing_tool_result=lite_llm._MISSING_TOOL_RESULT_MESSAGE,
    )


#: google-adk's texts: the renderings configured with them give google-adk's bytes.
ADK_TEXTS = _adk_texts()


def to_genai(content: content_pb2.Content) -> types.Content:
    data = content_to_adk_dict(content)
    for part in data.get("parts", []):
        for kind, key in (("function_call", "args"), ("function_response", "response")):
            if key in part.get(kind, {}):
                part[kind][key] = sorted_keys(part[kind][key])
    return types.Content.model_validate(data)


async def raw_adk_chat(
    contents: Sequence[content_pb2.Content], system: str | None
) -> list[dict[str, Any]]:
    """The messages ``LiteLlm`` builds, as it builds them."""
    request = LlmRequest(
        contents=[to_genai(c) for c in contents],
        config=types.GenerateContentConfig(system_instruction=system),
    )
    LiteLlm(model=MODEL)._maybe_append_user_content(request)
    lite_llm._append_fallback_user_content_if_missing(request)
    messages, *_ = await lite_llm._get_completion_inputs(request, MODEL)
    return [dict(m) for m in messages]


def _provider_form(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _provider_form(v)
            for k, v in value.items()
            if v is not None and v != [] and k not in _EXTENSIONS
        }
    if isinstance(value, list):
        return [_provider_form(v) for v in value]
    return value


async def adk_chat(
    contents: Sequence[content_pb2.Content], system: str | None
) -> list[dict[str, Any]]:
    """The messages ``LiteLlm`` builds, as OpenAI takes them (see the module documentation)."""
    out = []
    for message in map(_provider_form, await raw_adk_chat(contents, system)):
        if message["role"] == "assistant" and isinstance(message.get("content"), list):
            message.pop("content")  # OpenAI takes only text in an assistant turn
        if set(message) != {"role"}:
            out.append(message)
    return out


def adk_anthropic(contents: Sequence[content_pb2.Content]) -> list[dict[str, Any]]:
    """The messages the ``Claude`` model builds, as Anthropic takes them (see the module
    documentation)."""
    sanitizer = anthropic_llm._ToolUseIdSanitizer()
    out: list[dict[str, Any]] = []
    for content in contents:
        message: Any = anthropic_llm._content_to_message_param(to_genai(content), sanitizer)
        kept = [
            block
            for block in message["content"]
            if not (block.get("type") == "thinking" and not block.get("signature"))
        ]
        emptied = not kept and len(kept) != len(message["content"])
        if emptied and message["role"] == "user" and _has_empty_text(content):
            kept = [{"type": "text", "text": "."}]
        if kept:
            out.append({"role": message["role"], "content": kept})
    return out or [{"role": "user", "content": [{"type": "text", "text": ADK_TEXTS.empty_text}]}]


def _has_empty_text(content: content_pb2.Content) -> bool:
    return any(p.HasField("text") and not p.text and not p.thought_signature for p in content.parts)
