"""The preload block against google-adk 2.13's ``PreloadMemoryTool`` (spec 9.4).

ADK's wrapping text is read from the installed package (the tool is run on a marker memory),
set as the app's ``preload_template`` with ADK's local-time timestamps, and the engine's block
for real memories is compared with what ADK's tool injects for the same memories.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from google.adk.memory import base_memory_service
from google.adk.memory._utils import format_timestamp
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.llm_request import LlmRequest
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from google.protobuf import json_format

from contextengine.memory.index import Hit
from contextengine.memory.preload import DEFAULT_PRELOAD_TEMPLATE
from contextengine.store import SessionKey
from contextengine.v1 import config_pb2
from tests.memory.conftest import Memory
from tests.memory.helpers import event

pytestmark = pytest.mark.parity

MARKER = "\u2063MEMORIES\u2063"


@dataclass
class _ToolContext:
    """What ``PreloadMemoryTool`` reads from its tool context."""

    user_content: types.Content
    memories: list[MemoryEntry]

    async def search_memory(self, query: str) -> base_memory_service.SearchMemoryResponse:
        return base_memory_service.SearchMemoryResponse(memories=self.memories)


async def adk_preload(memories: list[MemoryEntry], query: str = "anything") -> str:
    """The text ADK's preload tool injects for ``memories`` ('' when it injects nothing)."""
    question = types.Content(role="user", parts=[types.Part(text=query)])
    request = LlmRequest(contents=[question])
    context: Any = _ToolContext(question, memories)
    await PreloadMemoryTool().process_llm_request(tool_context=context, llm_request=request)
    added = [content for content in request.contents if content is not question]
    if not added:
        return ""
    assert len(added) == 1
    assert added[0].parts is not None
    text = added[0].parts[0].text
    assert text is not None
    return text


async def adk_template() -> str:
    """ADK's wrapping text, as a ``{memories}`` template."""
    text = await adk_preload([MemoryEntry(content=types.Content(parts=[types.Part(text=MARKER)]))])
    assert text.count(MARKER) == 1
    return text.replace("{", "{{").replace("}", "}}").replace(MARKER, "{memories}")


def adk_memory(hit: Hit) -> MemoryEntry:
    content = types.Content.model_validate(
        json_format.MessageToDict(hit.entry.content, preserving_proto_field_name=True)
    )
    return MemoryEntry(
        content=content,
        author=hit.entry.author,
        timestamp=format_timestamp(hit.entry.timestamp),
    )


async def test_preload_text_is_adks_with_adks_template(memory: Memory) -> None:
    key = SessionKey("app", "alice", "s1")
    await memory.store.create_session(key, {}, 1.0)
    await memory.store.append_events(
        key,
        [
            event("I am allergic to peanuts", event_id="a", timestamp=1_700_000_000.25),
            event(
                "Noted: no peanuts in any recipe.\nAlso no tree nuts?",
                author="chef_agent",
                event_id="b",
                timestamp=1_700_000_042.5,
            ),
            event("Pasta with peanuts sauce", event_id="c", timestamp=1_700_000_100.0),
        ],
        None,
    )
    await memory.service.add_session(key)
    config = config_pb2.AppConfig(app_name="app")
    config.memory.preload_template = await adk_template()
    config.memory.preload_time_format = config_pb2.PRELOAD_TIME_FORMAT_LOCAL
    await memory.configs.put(config)

    preload = await memory.service.preload(key, "any peanuts in this recipe?")
    assert len(preload.hits) == 3
    assert preload.text == await adk_preload([adk_memory(hit) for hit in preload.hits])
    assert "<PAST_CONVERSATIONS>" in preload.text  # ADK's tag, from ADK's package

    # Nothing found: ADK injects nothing, the engine returns no text.
    assert (await memory.service.preload(key, "zebra")).text == ""
    assert await adk_preload([]) == ""


async def test_default_text_is_the_engines_own() -> None:
    template = await adk_template()
    assert template != DEFAULT_PRELOAD_TEMPLATE
    adk_sentences = [line for line in template.splitlines() if "{memories}" not in line]
    for line in adk_sentences:
        assert line not in DEFAULT_PRELOAD_TEMPLATE
