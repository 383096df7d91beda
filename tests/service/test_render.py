"""BuildContext renderings over a real gRPC server: every format, since, the app's words, the
prefix fingerprint, the breakpoints of a caching app, the token counters, bad input."""

from __future__ import annotations

import json

import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

from contextengine.client import ContextEngineClient, ContextEngineError, request_part
from contextengine.core.render import DEFAULT_TEXTS
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as cpb, event_pb2
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

APP = "render-app"
SYSTEM = content_pb2.Content(parts=[content_pb2.Part(text="You plan trips.")])


def call(call_id: str, invocation_id: str) -> event_pb2.Event:
    return event_pb2.Event(
        author="agent",
        invocation_id=invocation_id,
        content=content_pb2.Content(
            role="model",
            parts=[
                content_pb2.Part(
                    function_call=content_pb2.FunctionCall(
                        id=call_id,
                        name="lookup",
                        args=dict_to_struct({"city": "Oslo", "days": -0.0}),
                    )
                )
            ],
        ),
    )


def result(call_id: str, invocation_id: str) -> event_pb2.Event:
    return event_pb2.Event(
        author="agent",
        invocation_id=invocation_id,
        content=content_pb2.Content(
            role="user",
            parts=[
                content_pb2.Part(
                    function_response=content_pb2.FunctionResponse(
                        id=call_id, name="lookup", response=dict_to_struct({"weather": "sunny"})
                    )
                )
            ],
        ),
    )


async def session(client: ContextEngineClient, session_id: str) -> None:
    await client.create_session(APP, "u", session_id)
    for event in (
        text_event("Weather in Oslo?", invocation_id="i1"),
        call("adk-1", "i1"),
        result("adk-1", "i1"),
        text_event("Sunny.", author="agent", invocation_id="i1"),
        text_event("And tomorrow?", invocation_id="i2"),
    ):
        await client.append_event(APP, "u", session_id, event)


async def rendered(
    client: ContextEngineClient, session_id: str, format: cpb.RenderFormat.ValueType, **kw: object
) -> cpb.BuildContextResponse:
    return await client.build_context(
        APP,
        "u",
        session_id,
        agent_name="agent",
        system_instruction=SYSTEM,
        render=cpb.RenderRequest(format=format, **kw),  # type: ignore[arg-type]
    )


async def test_every_format(client: ContextEngineClient) -> None:
    await session(client, "s")
    chat = await rendered(client, "s", cpb.RENDER_FORMAT_OPENAI_CHAT)
    assert not chat.contents  # the rendering carries the context
    assert chat.last_sequence == 5
    part = request_part(chat.rendered)
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(part["messages"])
    assert part["messages"][0] == {"role": "system", "content": "You plan trips."}
    # with no provider named, the rendering's keeps ADK's call ids (pairs by id)
    assert part["messages"][2]["tool_calls"][0]["id"] == "adk-1"
    assert json.loads(part["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Oslo",
        "days": -0.0,
    }
    assert part["messages"][2]["tool_calls"][0]["function"]["arguments"].endswith('"days": -0.0}')
    assert part["messages"][3] == {
        "role": "tool",
        "tool_call_id": "adk-1",
        "content": '{"weather": "sunny"}',
    }
    assert chat.rendered.token_estimate.counter == "bpe-openai/o200k_base"
    assert chat.rendered.token_estimate.tokens > 10

    responses = await rendered(client, "s", cpb.RENDER_FORMAT_OPENAI_RESPONSES)
    part = request_part(responses.rendered)
    TypeAdapter(ResponseInputParam).validate_python(part["input"])
    assert part["instructions"] == "You plan trips."
    assert [item["type"] for item in part["input"]] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]

    anthropic = await rendered(client, "s", cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES)
    part = request_part(anthropic.rendered)
    TypeAdapter(list[MessageParam]).validate_python(part["messages"])
    assert part["system"] == "You plan trips."
    assert part["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "adk-1",
        "name": "lookup",
        "input": {"city": "Oslo", "days": -0.0},
    }
    assert anthropic.rendered.token_estimate.counter == "chars/4"


async def test_since_sends_only_new_items(client: ContextEngineClient) -> None:
    await session(client, "since")
    first = await rendered(client, "since", cpb.RENDER_FORMAT_OPENAI_CHAT)
    held = request_part(first.rendered)["messages"]
    await client.append_event(
        APP, "u", "since", text_event("Cloudy.", author="agent", invocation_id="i2")
    )
    await client.append_event(APP, "u", "since", text_event("Thanks!", invocation_id="i3"))
    since = cpb.RenderedSince(items_count=len(held), items_digest=first.rendered.items_digest)
    second = await rendered(client, "since", cpb.RENDER_FORMAT_OPENAI_CHAT, since=since)
    assert second.rendered.base_items_count == len(held)
    assert [json.loads(item)["content"] for item in second.rendered.items] == ["Cloudy.", "Thanks!"]
    whole = await rendered(client, "since", cpb.RENDER_FORMAT_OPENAI_CHAT)
    assert request_part(second.rendered, held) == request_part(whole.rendered)
    assert second.rendered.items_digest == whole.rendered.items_digest
    # a digest it does not know: everything
    stale = cpb.RenderedSince(items_count=len(held), items_digest="0" * 64)
    third = await rendered(client, "since", cpb.RENDER_FORMAT_OPENAI_CHAT, since=stale)
    assert third.rendered.base_items_count == 0
    assert len(third.rendered.items) == len(whole.rendered.items)
    with pytest.raises(ValueError, match="held items"):
        request_part(second.rendered)


async def test_the_prefix_fingerprint_stays_while_the_prefix_stays(
    client: ContextEngineClient,
) -> None:
    await session(client, "prefix")
    before = (await rendered(client, "prefix", cpb.RENDER_FORMAT_OPENAI_CHAT)).rendered
    # the trailing user turn is not in the cacheable prefix: system + the first four contents
    assert before.prefix_items_count == 5
    await client.append_event(
        APP, "u", "prefix", text_event("Rain.", author="agent", invocation_id="i2")
    )
    after = (await rendered(client, "prefix", cpb.RENDER_FORMAT_OPENAI_CHAT)).rendered
    assert after.prefix_items_count == 7
    assert after.prefix_fingerprint != before.prefix_fingerprint
    assert after.items[: before.prefix_items_count] == before.items[: before.prefix_items_count]
    again = (await rendered(client, "prefix", cpb.RENDER_FORMAT_OPENAI_CHAT)).rendered
    assert again.prefix_fingerprint == after.prefix_fingerprint
    anthropic = (await rendered(client, "prefix", cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES)).rendered
    assert anthropic.prefix_fingerprint != after.prefix_fingerprint


async def test_the_apps_words_and_breakpoints(client: ContextEngineClient) -> None:
    await session(client, "words")
    await client.append_event(
        APP, "u", "words", text_event("Rain.", author="agent", invocation_id="i2")
    )
    default = request_part(
        (await rendered(client, "words", cpb.RENDER_FORMAT_OPENAI_CHAT)).rendered
    )
    assert default["messages"][-1] == {"role": "user", "content": DEFAULT_TEXTS.continue_text}
    await client.update_app_config(
        config_pb2.AppConfig(
            app_name=APP,
            rendering=config_pb2.RenderingConfig(continue_text="Go on."),
            context_cache_config=config_pb2.ContextCacheConfig(ttl_seconds=7200),
        )
    )
    part = request_part((await rendered(client, "words", cpb.RENDER_FORMAT_OPENAI_CHAT)).rendered)
    assert part["messages"][-1] == {"role": "user", "content": "Go on."}
    claude = request_part(
        (await rendered(client, "words", cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES)).rendered
    )
    hour = {"type": "ephemeral", "ttl": "1h"}
    assert claude["system"] == [{"type": "text", "text": "You plan trips.", "cache_control": hour}]
    assert claude["messages"][-1]["content"][-1]["cache_control"] == hour


async def test_bad_render_requests_are_refused(client: ContextEngineClient) -> None:
    await session(client, "bad")
    for render, field in (
        (cpb.RenderRequest(format=99), "render.format"),  # type: ignore[arg-type]
        (
            cpb.RenderRequest(
                format=cpb.RENDER_FORMAT_OPENAI_CHAT, since=cpb.RenderedSince(items_count=-1)
            ),
            "render.since.items_count",
        ),
        (
            cpb.RenderRequest(
                format=cpb.RENDER_FORMAT_OPENAI_CHAT,
                since=cpb.RenderedSince(items_count=1, items_digest="x" * 129),
            ),
            "render.since.items_digest",
        ),
    ):
        with pytest.raises(ContextEngineError) as caught:
            await client.build_context(APP, "u", "bad", render=render)
        assert caught.value.reason == "INVALID_ARGUMENT"
        assert caught.value.metadata["field"] == field
