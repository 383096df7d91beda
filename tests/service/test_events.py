"""Appending and listing events over a real gRPC server."""

from __future__ import annotations

import asyncio
import math

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.validate import MAX_TIMESTAMP
from contextengine.v1 import content_pb2, event_pb2
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

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
    with pytest.raises(ContextEngineError) as err:
        await client.append_event(
            APP, "u1", session_id, text_event("changed", event_id="e1", timestamp=10.0)
        )
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert err.value.reason == "EVENT_ID_CONFLICT"
    assert err.value.metadata["sequence"] == "1"


async def test_expected_last_sequence(client: ContextEngineClient, session_id: str) -> None:
    await client.append_event(APP, "u1", session_id, text_event("a"), expected_last_sequence=0)
    with pytest.raises(ContextEngineError) as err:
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
    with pytest.raises(ContextEngineError) as err:
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
    with pytest.raises(ContextEngineError) as err:
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


# Timestamps are seconds since the epoch, below year 10000: a millisecond value (1.7e12), 1e308,
# a negative or non-finite value is INVALID_EVENT and nothing is stored (issue 13, item 3).
BAD_TIMESTAMPS = [1.7e12, 1e308, MAX_TIMESTAMP, -1.0, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("stamp", BAD_TIMESTAMPS, ids=repr)
async def test_out_of_range_timestamps_are_refused(
    client: ContextEngineClient, session_id: str, stamp: float
) -> None:
    await client.append_event(APP, "u1", session_id, text_event("kept", event_id="ok"))
    before = await client.get_session(APP, "u1", session_id)
    with pytest.raises(ContextEngineError) as single:
        await client.append_event(APP, "u1", session_id, text_event("bad", timestamp=stamp))
    with pytest.raises(ContextEngineError) as batch:
        await client.append_events(
            APP, "u1", session_id, [text_event("fine"), text_event("bad", timestamp=stamp)]
        )
    for err, field in ((single, "event.timestamp"), (batch, "events[1].timestamp")):
        assert (err.value.code, err.value.reason) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_EVENT",
        )
        assert err.value.metadata["field"] == field
    assert await client.get_session(APP, "u1", session_id) == before
    ok = await client.append_event(APP, "u1", session_id, text_event("after"))
    assert ok.event.sequence == 2


@pytest.mark.parametrize("name", ["start_timestamp", "end_timestamp"])
async def test_out_of_range_compaction_timestamps_are_refused(
    client: ContextEngineClient, session_id: str, name: str
) -> None:
    summary = text_event("summary", event_id="sum", timestamp=3.0)
    compaction = summary.actions.compaction
    compaction.start_timestamp, compaction.end_timestamp = 1.0, 2.0
    setattr(compaction, name, 1.7e12)
    with pytest.raises(ContextEngineError) as err:
        await client.append_event(APP, "u1", session_id, summary)
    assert (err.value.code, err.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_EVENT",
    )
    assert err.value.metadata["field"] == f"event.actions.compaction.{name}"
    assert (await client.get_session(APP, "u1", session_id)).last_sequence == 0


@pytest.mark.parametrize("stamp", [5e-324, 1_767_225_600.5, MAX_TIMESTAMP - 1.0], ids=repr)
async def test_timestamps_in_range_are_kept(
    client: ContextEngineClient, session_id: str, stamp: float
) -> None:
    recorded = await client.append_event(APP, "u1", session_id, text_event("t", timestamp=stamp))
    assert recorded.event.timestamp == stamp
