"""BuildContext's prompt-cache fields through a real sidecar: the decision sequence an agent sees,
the fingerprint a client can recompute, configuration bounds and bad input."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.prompt_cache import PromptPrefix, fingerprint
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as cpb, event_pb2

from .helpers import text_event

pytestmark = pytest.mark.service

APP = "cached"
AGENT = "weather_agent"
MODEL = cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_GEMINI, model="gemini-2.0-flash")
INSTRUCTION = content_pb2.Content(parts=[content_pb2.Part(text="You report the weather.")])
TOOLS: list[dict[str, Any]] = [
    {"function_declarations": [{"name": "get_weather", "description": "Weather of a city."}]}
]


async def _configure(client: ContextEngineClient, **fields: Any) -> None:
    await client.update_app_config(
        config_pb2.AppConfig(
            app_name=APP, context_cache_config=config_pb2.ContextCacheConfig(**fields)
        )
    )


async def _context(
    client: ContextEngineClient, session_id: str, invocation_id: str, **kwargs: Any
) -> cpb.BuildContextResponse:
    kwargs.setdefault("system_instruction", INSTRUCTION)
    kwargs.setdefault("tools", TOOLS)
    return await client.build_context(
        APP,
        "u",
        session_id,
        agent_name=AGENT,
        model=MODEL,
        invocation_id=invocation_id,
        **kwargs,
    )


def _answer(
    invocation_id: str, text: str, metadata: event_pb2.CacheMetadata, prompt_tokens: int
) -> event_pb2.Event:
    event = text_event(text, author=AGENT, invocation_id=invocation_id)
    event.cache_metadata.CopyFrom(metadata)
    event.usage_metadata.prompt_token_count = prompt_tokens
    return event


async def test_no_cache_config_no_cache_fields(client: ContextEngineClient) -> None:
    session = await client.create_session(APP, "u")
    await client.append_event(APP, "u", session.id, text_event("hi"))
    context = await _context(client, session.id, "i1")
    assert not context.HasField("cache_decision")
    assert context.fingerprint == ""
    assert context.cacheable_contents_count == 0


async def test_decision_sequence_fingerprint_create_reuse(client: ContextEngineClient) -> None:
    await _configure(client, cache_intervals=2, ttl_seconds=600)
    session = await client.create_session(APP, "u")
    sid = session.id

    # invocation 1: the agent's first model call: fingerprint only
    await client.append_event(APP, "u", sid, text_event("Weather in Paris?", invocation_id="i1"))
    first = await _context(client, sid, "i1")
    decision = first.cache_decision
    assert decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert first.cacheable_contents_count == 0  # only the user's message
    assert decision.cache_metadata.contents_count == 0
    assert decision.cache_metadata.fingerprint == first.fingerprint
    assert not decision.cache_metadata.HasField("cache_name")
    await client.append_event(APP, "u", sid, _answer("i1", "Sunny.", decision.cache_metadata, 3000))

    # invocation 2: the old prefix is still a prefix: create a cache of it and the answer
    await client.append_event(APP, "u", sid, text_event("And Rome?", invocation_id="i2"))
    second = await _context(client, sid, "i2")
    decision = second.cache_decision
    assert decision.action == cpb.CACHE_ACTION_CREATE
    assert not decision.managed
    assert decision.ttl_seconds == 600
    assert second.cacheable_contents_count == 2
    assert decision.cache_metadata.contents_count == 2
    assert decision.cache_metadata.fingerprint == second.fingerprint
    assert decision.send_from_index == 2  # the cached contents are not sent again
    # the client can recompute the fingerprint from what it sent (docs/design/prompt-cache.md)
    prefix = PromptPrefix(
        model=MODEL.model,
        system_instruction={"parts": [{"text": "You report the weather."}]},
        tools=tuple(TOOLS),
    )
    assert fingerprint(prefix, list(second.contents), 2) == second.fingerprint
    # the agent created the cache: it completes the metadata and records it
    created = event_pb2.CacheMetadata()
    created.CopyFrom(decision.cache_metadata)
    now = time.time()
    created.cache_name = "cachedContents/abc"
    created.expire_time = now + 600
    created.created_at = now
    created.invocations_used = 1
    await client.append_event(APP, "u", sid, _answer("i2", "Warm.", created, 3200))

    # invocation 3: reuse, one more invocation counted
    await client.append_event(APP, "u", sid, text_event("And Oslo?", invocation_id="i3"))
    third = await _context(client, sid, "i3")
    decision = third.cache_decision
    assert decision.action == cpb.CACHE_ACTION_REUSE
    assert decision.cache_name == "cachedContents/abc"
    assert decision.cache_metadata.invocations_used == 2
    assert decision.cache_metadata.contents_count == 2
    assert decision.send_from_index == 2
    # a tool loop inside the same invocation does not count again
    again = await _context(client, sid, "i3")
    assert again.cache_decision.cache_metadata.invocations_used == 2
    await client.append_event(APP, "u", sid, _answer("i3", "Cold.", decision.cache_metadata, 3300))

    # invocation 4: used 3 > cache_intervals 2: ADK deletes it and creates a bigger one
    await client.append_event(APP, "u", sid, text_event("And Lima?", invocation_id="i4"))
    fourth = await _context(client, sid, "i4")
    decision = fourth.cache_decision
    assert decision.action == cpb.CACHE_ACTION_CREATE
    assert decision.invalidated_cache_name == "cachedContents/abc"
    assert decision.cache_metadata.contents_count == 6


async def test_prefix_change_gives_fingerprint_only(client: ContextEngineClient) -> None:
    await _configure(client)
    session = await client.create_session(APP, "u")
    sid = session.id
    await client.append_event(APP, "u", sid, text_event("Hi", invocation_id="i1"))
    first = await _context(client, sid, "i1")
    await client.append_event(
        APP, "u", sid, _answer("i1", "Hello.", first.cache_decision.cache_metadata, 10)
    )
    await client.append_event(APP, "u", sid, text_event("Again", invocation_id="i2"))
    changed = content_pb2.Content(parts=[content_pb2.Part(text="A different instruction.")])
    second = await _context(client, sid, "i2", system_instruction=changed)
    assert second.cache_decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert second.cache_decision.cache_metadata.contents_count == 2
    # reordering the tools changes nothing
    tools = [*TOOLS, {"google_search": {}}]
    fingerprints = {
        (await _context(client, sid, "i2", tools=order)).fingerprint
        for order in (tools, list(reversed(tools)))
    }
    assert len(fingerprints) == 1


async def test_creation_gates_say_why(client: ContextEngineClient) -> None:
    await _configure(client, min_tokens=5000)
    session = await client.create_session(APP, "u")
    sid = session.id
    await client.append_event(APP, "u", sid, text_event("Hi", invocation_id="i1"))
    first = await _context(client, sid, "i1")
    await client.append_event(
        APP, "u", sid, _answer("i1", "Hello.", first.cache_decision.cache_metadata, 4999)
    )
    await client.append_event(APP, "u", sid, text_event("Again", invocation_id="i2"))
    second = await _context(client, sid, "i2")
    assert second.cache_decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert second.cache_decision.not_created_reason == "previous prompt below min_tokens"
    assert second.cache_decision.degraded_reason == ""


async def test_cache_config_persists_extensions(client: ContextEngineClient) -> None:
    stored = await client.update_app_config(
        config_pb2.AppConfig(
            app_name=APP,
            context_cache_config=config_pb2.ContextCacheConfig(
                ttl_seconds=60,
                managed_gemini_caches=True,
                cache_aware_compaction=config_pb2.CacheAwareCompaction(hard_token_limit=9000),
            ),
        )
    )
    fetched = await client.get_app_config(APP)
    assert fetched == stored
    assert fetched.context_cache_config.managed_gemini_caches
    assert fetched.context_cache_config.cache_aware_compaction.hard_token_limit == 9000


BAD_CACHE_CONFIGS: list[tuple[config_pb2.ContextCacheConfig, str]] = [
    (config_pb2.ContextCacheConfig(ttl_seconds=0), "ttl_seconds"),
    (config_pb2.ContextCacheConfig(ttl_seconds=-30), "ttl_seconds"),
    (config_pb2.ContextCacheConfig(cache_intervals=0), "cache_intervals"),
    (config_pb2.ContextCacheConfig(cache_intervals=101), "cache_intervals"),
    (config_pb2.ContextCacheConfig(cache_intervals=-5), "cache_intervals"),
    (config_pb2.ContextCacheConfig(min_tokens=-1), "min_tokens"),
    (
        config_pb2.ContextCacheConfig(
            cache_aware_compaction=config_pb2.CacheAwareCompaction(hard_token_limit=0)
        ),
        "cache_aware_compaction.hard_token_limit",
    ),
]


@pytest.mark.parametrize(("config", "field"), BAD_CACHE_CONFIGS)
async def test_bad_cache_config(
    client: ContextEngineClient, config: config_pb2.ContextCacheConfig, field: str
) -> None:
    with pytest.raises(ContextEngineError) as err:
        await client.update_app_config(
            config_pb2.AppConfig(app_name=APP, context_cache_config=config)
        )
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.reason == "INVALID_CACHE_CONFIG"
    assert err.value.metadata["field"] == f"config.context_cache_config.{field}"


BAD_INPUTS: list[tuple[dict[str, Any], str, str]] = [
    ({"tools": [{"function_declarations": [{"name": 3}]}]}, "tools[0]", "INVALID_MODEL_INPUT"),
    ({"tools": [TOOLS[0], {"no_such_tool": {}}]}, "tools[1]", "INVALID_MODEL_INPUT"),
    (
        {"tool_config": {"function_calling_config": {"mode": "SOMETIMES"}}},
        "tool_config",
        "INVALID_MODEL_INPUT",
    ),
    ({"tool_config": {"bogus": True}}, "tool_config", "INVALID_MODEL_INPUT"),
    (
        {
            "system_instruction": content_pb2.Content(
                parts=[content_pb2.Part(tool_call=dict_to_struct({"not_a_field": 1}))]
            )
        },
        "system_instruction",
        "INVALID_MODEL_INPUT",
    ),
    ({"invocation_id": "bad\nid"}, "invocation_id", "INVALID_ID"),
]


@pytest.mark.parametrize(("kwargs", "field", "reason"), BAD_INPUTS)
async def test_bad_model_input(
    client: ContextEngineClient, kwargs: dict[str, Any], field: str, reason: str
) -> None:
    await _configure(client)
    session = await client.create_session(APP, "u")
    await client.append_event(APP, "u", session.id, text_event("hi"))
    kwargs = dict(kwargs)
    invocation_id = kwargs.pop("invocation_id", "i1")
    with pytest.raises(ContextEngineError) as err:
        await _context(client, session.id, invocation_id, **kwargs)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.reason == reason
    assert err.value.metadata["field"] == field
