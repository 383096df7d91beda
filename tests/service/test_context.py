"""BuildContext over a real gRPC server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.context import DEFAULT_OTHER_AGENT_PREAMBLE
from contextengine.core.structs import dict_to_struct
from contextengine.memory.service import Preload
from contextengine.store import SessionKey
from contextengine.testing import start_local_server
from contextengine.v1 import (
    config_pb2,
    content_pb2,
    context_service_pb2 as cpb,
    context_service_pb2_grpc,
    event_pb2,
)
from tests.service.helpers import SessionRef, text_event

pytestmark = pytest.mark.service

APP = "app"


def call_event(
    call_id: str, *, invocation_id: str = "i1", timestamp: float = 0.0
) -> event_pb2.Event:
    return event_pb2.Event(
        author="agent",
        invocation_id=invocation_id,
        timestamp=timestamp,
        content=content_pb2.Content(
            role="model",
            parts=[
                content_pb2.Part(
                    function_call=content_pb2.FunctionCall(
                        id=call_id, name="get_weather", args=dict_to_struct({"city": "Paris"})
                    )
                )
            ],
        ),
    )


def response_event(
    call_id: str, *, invocation_id: str = "i1", timestamp: float = 0.0
) -> event_pb2.Event:
    return event_pb2.Event(
        author="agent",
        invocation_id=invocation_id,
        timestamp=timestamp,
        content=content_pb2.Content(
            role="user",
            parts=[
                content_pb2.Part(
                    function_response=content_pb2.FunctionResponse(
                        id=call_id, name="get_weather", response=dict_to_struct({"temp": 21})
                    )
                )
            ],
        ),
    )


@pytest.fixture
async def conversation(client: ContextEngineClient) -> str:
    await client.create_session(APP, "u1", "s1")
    for event in [
        text_event("Weather in Paris?", invocation_id="i1"),
        call_event("adk-123"),
        response_event("adk-123"),
        text_event("It is 21 degrees.", author="agent"),
        text_event("I am the planner.", author="planner"),
    ]:
        await client.append_event(APP, "u1", "s1", event)
    return "s1"


async def test_contents_follow_adk_rules(client: ContextEngineClient, conversation: str) -> None:
    response = await client.build_context(APP, "u1", conversation, agent_name="agent")
    assert response.last_sequence == 5
    roles = [c.role for c in response.contents]
    assert roles == ["user", "model", "user", "model", "user"]
    # Gemini: adk- ids are stripped from the request copy.
    assert not response.contents[1].parts[0].function_call.HasField("id")
    assert not response.contents[2].parts[0].function_response.HasField("id")
    # Another agent's turn is quoted user content after the preamble.
    other = response.contents[4]
    assert other.parts[0].text == DEFAULT_OTHER_AGENT_PREAMBLE
    assert other.parts[1].text.startswith("[planner] said:\n<<<BEGIN_QUOTED_AGENT_CONTENT>>>")
    assert response.token_estimate.counter == "tiktoken/cl100k_base"
    assert response.token_estimate.tokens > 0


async def test_ids_kept_for_id_pairing_models(
    client: ContextEngineClient, conversation: str
) -> None:
    for model in (
        cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_ANTHROPIC),
        cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_GEMINI, use_interactions_api=True),
    ):
        response = await client.build_context(
            APP, "u1", conversation, agent_name="agent", model=model
        )
        assert response.contents[1].parts[0].function_call.id == "adk-123"


async def test_current_turn_only(client: ContextEngineClient, conversation: str) -> None:
    await client.append_event(APP, "u1", conversation, text_event("And Rome?", invocation_id="i2"))
    response = await client.build_context(
        APP, "u1", conversation, agent_name="agent", include_contents=cpb.INCLUDE_CONTENTS_NONE
    )
    assert [c.parts[0].text for c in response.contents] == ["And Rome?"]


async def test_preamble_is_configurable(client: ContextEngineClient, conversation: str) -> None:
    before = await client.build_context(APP, "u1", conversation, agent_name="agent")
    assert before.contents[4].parts[0].text == DEFAULT_OTHER_AGENT_PREAMBLE
    await client.update_app_config(
        config_pb2.AppConfig(app_name=APP, other_agent_preamble="QUOTED:")
    )
    response = await client.build_context(APP, "u1", conversation, agent_name="agent")
    assert response.contents[4].parts[0].text == "QUOTED:"


async def test_incremental_results_match_a_fresh_build(client: ContextEngineClient) -> None:
    await client.create_session(APP, "u1", "grow")
    for i in range(12):
        await client.append_event(APP, "u1", "grow", text_event(f"q{i}", invocation_id=f"i{i}"))
        await client.append_event(APP, "u1", "grow", call_event(f"c{i}", invocation_id=f"i{i}"))
        await client.append_event(APP, "u1", "grow", response_event(f"c{i}", invocation_id=f"i{i}"))
        grown = await client.build_context(APP, "u1", "grow", agent_name="agent")
        if i == 6:
            await client.rewind_session(APP, "u1", "grow", "i3")
    async with ContextEngineClient(client.target) as other:
        fresh_view = await other.build_context(APP, "u1", "grow", agent_name="agent", branch="")
    assert list(grown.contents) == list(fresh_view.contents)
    texts = [c.parts[0].text for c in grown.contents if c.parts[0].HasField("text")]
    assert texts == ["q0", "q1", "q2", "q7", "q8", "q9", "q10", "q11"]


async def test_malformed_logs_still_materialize(client: ContextEngineClient) -> None:
    await client.create_session(APP, "u1", "odd")
    rewind = event_pb2.Event(author="user", invocation_id="r")
    rewind.actions.rewind_before_invocation_id = "never-seen"
    summary = event_pb2.Event(author="user", invocation_id="c")
    summary.actions.compaction.start_timestamp = 50.0
    summary.actions.compaction.end_timestamp = 10.0
    summary.actions.compaction.compacted_content.role = "model"
    summary.actions.compaction.compacted_content.parts.add(text="backwards summary")
    for event in [
        text_event("hi", timestamp=1.0),
        response_event("no-such-call", timestamp=2.0),
        rewind,
        summary,
        text_event("still here", timestamp=3.0),
    ]:
        await client.append_event(APP, "u1", "odd", event)
    response = await client.build_context(APP, "u1", "odd", agent_name="agent")
    assert "backwards summary" in [p.text for c in response.contents for p in c.parts]


async def test_bad_input(client: ContextEngineClient, conversation: str) -> None:
    stub = context_service_pb2_grpc.ContextServiceStub(client.channel)
    base: SessionRef = {"app_name": APP, "user_id": "u1", "session_id": conversation}
    cases = [
        (
            cpb.BuildContextRequest(app_name=APP, user_id="u1", session_id="nope"),
            grpc.StatusCode.NOT_FOUND,
            "SESSION_NOT_FOUND",
            None,
        ),
        (
            cpb.BuildContextRequest(app_name=APP, user_id="u1", session_id=""),
            grpc.StatusCode.INVALID_ARGUMENT,
            "MISSING_FIELD",
            "session_id",
        ),
        (
            cpb.BuildContextRequest(**base, agent_name="bad name!"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ID",
            "agent_name",
        ),
        (
            cpb.BuildContextRequest(**base, branch="root..a"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ID",
            "branch",
        ),
        (
            cpb.BuildContextRequest(**base, branch="root.a b"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ID",
            "branch",
        ),
        (
            cpb.BuildContextRequest(**base, isolation_scope="x\x01"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ID",
            "isolation_scope",
        ),
        (
            # numbers that no enum value has (proto3 enums are open: they go over the wire)
            cpb.BuildContextRequest(**base, include_contents=cpb.IncludeContents.ValueType(7)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
            "include_contents",
        ),
        (
            cpb.BuildContextRequest(
                **base, model=cpb.ModelIdentity(provider=cpb.ModelProvider.ValueType(42))
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
            "model.provider",
        ),
    ]
    for request, code, reason, field in cases:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.BuildContext(request)
        assert err.value.code() == code, request
        failure = await _reason(client, request)
        assert failure.reason == reason
        if field is not None:
            assert failure.metadata["field"] == field


async def _reason(
    client: ContextEngineClient, request: cpb.BuildContextRequest
) -> ContextEngineError:
    with pytest.raises(ContextEngineError) as err:
        await client.build_context(
            request.app_name,
            request.user_id,
            request.session_id,
            agent_name=request.agent_name,
            branch=request.branch if request.HasField("branch") else None,
            isolation_scope=request.isolation_scope
            if request.HasField("isolation_scope")
            else None,
            include_contents=request.include_contents,
            model=request.model,
        )
    return err.value


async def test_a_response_is_not_changed_by_a_concurrent_call_extending_its_view(
    tmp_path: Path,
) -> None:
    """Two BuildContext calls with the same options share one cached view, which the second
    extends in place. The first, still waiting for its memory preload, must answer with what it
    built: its contents, token estimate and prompt-cache fields all describe the same events."""
    async with (
        start_local_server(str(tmp_path / "ce.db")) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        await client.update_app_config(
            config_pb2.AppConfig(app_name=APP, context_cache_config=config_pb2.ContextCacheConfig())
        )
        session = await client.create_session(APP, "u")
        await client.append_event(APP, "u", session.id, text_event("Weather in Paris?"))
        memory = server.memory
        assert memory is not None
        preload = memory.preload
        entered, gate = asyncio.Event(), asyncio.Event()

        async def slow_preload(key: SessionKey, query: str) -> Preload:
            entered.set()
            await gate.wait()
            return await preload(key, query)

        memory.preload = slow_preload  # type: ignore[method-assign]
        first = asyncio.create_task(
            client.build_context(APP, "u", session.id, agent_name="agent", preload_memory=True)
        )
        async with asyncio.timeout(10):
            await entered.wait()
        await client.append_event(
            APP, "u", session.id, text_event("It is sunny.", author="agent", invocation_id="i1")
        )
        second = await client.build_context(APP, "u", session.id, agent_name="agent")
        assert [c.parts[0].text for c in second.contents] == ["Weather in Paris?", "It is sunny."]
        gate.set()
        async with asyncio.timeout(10):
            answer = await first
        assert answer.last_sequence == 1
        assert [c.parts[0].text for c in answer.contents] == ["Weather in Paris?"]
        alone = await client.build_context(APP, "u", session.id, agent_name="agent")
        assert answer.token_estimate.tokens < alone.token_estimate.tokens
        assert answer.cacheable_contents_count == 0  # the trailing user content is not cached
        assert answer.cache_decision.cache_metadata.contents_count == 0
