"""Appending and listing events over a real gRPC server."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from contextengine.client import ContextEngineClient, RpcError
from contextengine.v1 import content_pb2, event_pb2
from tests.service.helpers import text_event

APP = "app"


@pytest.fixture
async def session_id(client: ContextEngineClient) -> str:
    session = await client.create_session(APP, "u1", "s1")
    return session.id


async def test_append_assigns_sequences(client: ContextEngineClient, session_id: str) -> None:
    first = await client.append_event(APP, "u1", session_id, text_event("a"))
    second = await client.append_event(APP, "u1", session_id, text_event("b", author="agent"))
    assert (first.event.sequence, second.event.sequence) == (1, 2)
    assert first.stored
    assert not first.duplicate
    assert second.last_sequence == 2
    assert first.event.id
    assert first.event.timestamp > 0


async def test_server_assigns_id_and_timestamp(
    client: ContextEngineClient, session_id: str
) -> None:
    # Bypass the client's own id/timestamp assignment by calling the stub directly.
    from contextengine.v1 import session_service_pb2 as pb, session_service_pb2_grpc

    stub = session_service_pb2_grpc.SessionServiceStub(client.channel)
    response = await stub.AppendEvent(
        pb.AppendEventRequest(
            app_name=APP, user_id="u1", session_id=session_id, event=text_event("x")
        )
    )
    assert len(response.event.id) == 36
    assert response.event.timestamp > 0


async def test_idempotent_append(client: ContextEngineClient, session_id: str) -> None:
    event = text_event("hello", event_id="e1", timestamp=10.0)
    first = await client.append_event(APP, "u1", session_id, event)
    replay = await client.append_event(APP, "u1", session_id, event)
    assert replay.duplicate
    assert replay.event == first.event
    assert replay.last_sequence == 1
    with pytest.raises(RpcError) as err:
        await client.append_event(
            APP, "u1", session_id, text_event("changed", event_id="e1", timestamp=10.0)
        )
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert err.value.reason == "EVENT_ID_CONFLICT"
    assert err.value.metadata["sequence"] == "1"


async def test_expected_last_sequence(client: ContextEngineClient, session_id: str) -> None:
    await client.append_event(APP, "u1", session_id, text_event("a"), expected_last_sequence=0)
    with pytest.raises(RpcError) as err:
        await client.append_event(APP, "u1", session_id, text_event("b"), expected_last_sequence=0)
    assert err.value.code == grpc.StatusCode.ABORTED
    assert err.value.reason == "SEQUENCE_MISMATCH"
    assert err.value.metadata["current_last_sequence"] == "1"
    ok = await client.append_event(APP, "u1", session_id, text_event("b"), expected_last_sequence=1)
    assert ok.event.sequence == 2


async def test_partial_events_are_not_stored(client: ContextEngineClient, session_id: str) -> None:
    partial = text_event("stream fragment", author="agent", state_delta={"x": 1})
    partial.partial = True
    response = await client.append_event(APP, "u1", session_id, partial)
    assert not response.stored
    assert response.event.sequence == 0
    session = await client.get_session(APP, "u1", session_id)
    assert session.last_sequence == 0
    assert "x" not in session.state.fields


async def test_batch_append_is_atomic(client: ContextEngineClient, session_id: str) -> None:
    await client.append_event(
        APP, "u1", session_id, text_event("a", event_id="taken", timestamp=1.0)
    )
    batch = [
        text_event("b", event_id="new-1", state_delta={"k": 1}),
        text_event("c", event_id="taken", timestamp=2.0),  # conflicts with the recorded one
    ]
    with pytest.raises(RpcError) as err:
        await client.append_events(APP, "u1", session_id, batch)
    assert err.value.reason == "EVENT_ID_CONFLICT"
    session = await client.get_session(APP, "u1", session_id)
    assert [e.id for e in session.events] == ["taken"]
    assert "k" not in session.state.fields
    ok = await client.append_events(
        APP, "u1", session_id, [text_event("b", event_id="n1"), text_event("c", event_id="n2")]
    )
    assert [e.sequence for e in ok.events] == [2, 3]


async def test_batch_rejects_repeated_ids(client: ContextEngineClient, session_id: str) -> None:
    with pytest.raises(RpcError) as err:
        await client.append_events(
            APP, "u1", session_id, [text_event("a", event_id="x"), text_event("b", event_id="x")]
        )
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.metadata["field"] == "events[1].id"


async def test_list_events_pages(client: ContextEngineClient, session_id: str) -> None:
    await client.append_events(APP, "u1", session_id, [text_event(f"m{i}") for i in range(25)])
    events = [e async for e in client.list_events(APP, "u1", session_id, page_size=10)]
    assert [e.sequence for e in events] == list(range(1, 26))
    later = [e.sequence async for e in client.list_events(APP, "u1", session_id, after_sequence=20)]
    assert later == [21, 22, 23, 24, 25]


async def test_concurrent_appenders_get_contiguous_sequences(
    server: object, client: ContextEngineClient, session_id: str
) -> None:
    target = client.target

    async def writer(w: int) -> None:
        async with ContextEngineClient(target) as c:
            for i in range(20):
                await c.append_event(
                    APP, "u1", session_id, text_event(f"w{w}-{i}", event_id=f"w{w}-{i}")
                )

    await asyncio.gather(*(writer(w) for w in range(2)), *(writer(w) for w in range(2, 8)))
    events = [e async for e in client.list_events(APP, "u1", session_id, page_size=1000)]
    assert [e.sequence for e in events] == list(range(1, 161))
    assert sorted(e.id for e in events) == sorted(f"w{w}-{i}" for w in range(8) for i in range(20))


async def test_every_content_kind_round_trips(client: ContextEngineClient, session_id: str) -> None:
    event = event_pb2.Event(
        author="agent",
        invocation_id="inv",
        id="rich",
        timestamp=5.0,
        branch="root.agent",
        content=content_pb2.Content(
            role="model",
            parts=[
                content_pb2.Part(text="thinking", thought=True, thought_signature=b"\x00sig"),
                content_pb2.Part(function_call=content_pb2.FunctionCall(id="c1", name="f")),
                content_pb2.Part(
                    inline_data=content_pb2.Blob(data=bytes(range(256)), mime_type="a/b")
                ),
                content_pb2.Part(text=""),
            ],
        ),
        long_running_tool_ids=["z", "c1", "z"],
    )
    event.usage_metadata.prompt_token_count = 0
    recorded = (await client.append_event(APP, "u1", session_id, event)).event
    assert list(recorded.long_running_tool_ids) == ["c1", "z"]
    assert recorded.usage_metadata.HasField("prompt_token_count")
    assert recorded.content.parts[3].HasField("text")
    fetched = (await client.get_session(APP, "u1", session_id)).events[0]
    assert fetched == recorded
