"""Batched frames (``max_events_per_frame`` > 1): the events that are ready together come in one
``events`` frame, in order, never more than asked for; a resubscription from a batch's cursor
(its last event's) gets every later event exactly once."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from contextengine.client import ContextEngineClient
from contextengine.settings import ServerSettings
from contextengine.subscriptions.frames import encode_batch
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from contextengine.v1 import subscription_service_pb2 as spb, subscription_service_pb2_grpc

from .helpers import (
    APP,
    SESSION,
    SMALL_WINDOW,
    USER,
    closing_call,
    has_kind,
    kind,
    message,
    take,
)

pytestmark = pytest.mark.service

BIG = "x" * 4000


def events_of(frames: list[spb.SubscribeEventsResponse]) -> list[spb.SubscribedEvent]:
    """Every event the frames carry, batched or not, in order."""
    out: list[spb.SubscribedEvent] = []
    for frame in frames:
        if kind(frame) == "event":
            out.append(frame.event)
        elif kind(frame) == "events":
            out.extend(frame.events.events)
    return out


def sequences_of(frames: list[spb.SubscribeEventsResponse]) -> list[int]:
    return [e.event.sequence for e in events_of(frames)]


def count_all(n: int) -> Callable[[list[spb.SubscribeEventsResponse]], bool]:
    return lambda frames: len(events_of(frames)) >= n


def test_a_batch_frame_is_the_event_frames_end_to_end() -> None:
    events = [
        spb.SubscribedEvent(app_name=APP, session_id=SESSION, cursor=str(n), position=n)
        for n in range(1, 40)
    ]
    events[3].event.id = "y" * 300  # a length that takes two varint bytes
    frames = [spb.SubscribeEventsResponse(event=e).SerializeToString() for e in events]
    expected = spb.SubscribeEventsResponse(events=spb.SubscribedEventBatch(events=events))
    assert encode_batch(frames) == expected.SerializeToString()
    assert spb.SubscribeEventsResponse.FromString(encode_batch(frames)) == expected


@pytest.mark.parametrize("per_frame", [0, 1])
async def test_zero_or_one_means_one_event_frame_per_event(
    client: ContextEngineClient, per_frame: int
) -> None:
    await client.create_session(APP, USER, SESSION)
    await client.append_events(APP, USER, SESSION, [message(f"m{n}") for n in range(3)])
    stream = client.subscribe_events(APP, USER, SESSION, max_events_per_frame=per_frame)
    async with contextlib.aclosing(stream):
        frames = await take(stream, has_kind("caught_up"))
        await client.append_events(APP, USER, SESSION, [message("a"), message("b")])
        frames += await take(stream, count_all(2))
    assert [kind(f) for f in frames] == ["event"] * 3 + ["caught_up"] + ["event"] * 2
    assert sequences_of(frames) == [1, 2, 3, 4, 5]


async def test_the_replay_comes_in_batches(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    recorded = await client.append_events(APP, USER, SESSION, [message(f"m{n}") for n in range(10)])
    stream = client.subscribe_events(APP, USER, SESSION, cursor="0", max_events_per_frame=4)
    async with contextlib.aclosing(stream):
        frames = await take(stream, has_kind("caught_up"))
    assert [kind(f) for f in frames] == ["events"] * 3 + ["caught_up"]
    assert [len(f.events.events) for f in frames[:3]] == [4, 4, 2]
    assert [e.event for e in events_of(frames)] == list(recorded.events)
    assert [e.cursor for e in events_of(frames)] == [str(n) for n in range(1, 11)]
    assert frames[-1].caught_up.cursor == "10"


async def test_app_scope_batches_carry_positions(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    await client.create_session(APP, USER, "s2")
    await client.append_events(APP, USER, SESSION, [message("a"), message("b")])
    await client.append_events(APP, USER, "s2", [message("c"), message("d"), message("e")])
    stream = client.subscribe_events(APP, max_events_per_frame=3)
    async with contextlib.aclosing(stream):
        frames = await take(stream, has_kind("caught_up"))
    assert [len(f.events.events) for f in frames[:-1]] == [3, 2]
    got = events_of(frames)
    assert [e.session_id for e in got] == [SESSION] * 2 + ["s2"] * 3
    positions = [e.position for e in got]
    assert positions == sorted(set(positions))
    assert [e.cursor for e in got] == [str(p) for p in positions]
    assert frames[-1].caught_up.cursor == str(positions[-1])


async def test_a_live_commit_is_split_into_frames_of_at_most_n(
    client: ContextEngineClient,
) -> None:
    await client.create_session(APP, USER, SESSION)
    stream = client.subscribe_events(APP, USER, SESSION, max_events_per_frame=4)
    async with contextlib.aclosing(stream):
        await take(stream, has_kind("caught_up"))
        await client.append_events(APP, USER, SESSION, [message(f"m{n}") for n in range(10)])
        frames = await take(stream, count_all(10))
        # A lone event is sent at once, as a batch of one.
        await client.append_event(APP, USER, SESSION, message("alone"))
        (alone,) = await take(stream, count_all(1))
    assert [len(f.events.events) for f in frames] == [4, 4, 2]
    assert sequences_of(frames) == list(range(1, 11))
    assert [e.event.sequence for e in alone.events.events] == [11]


async def test_a_burst_of_commits_comes_in_batches(server: ContextEngineServer) -> None:
    """While the server cannot send (the reader does not read), commits pile up in the
    subscription's buffer; once it can, they go out together, up to N a frame."""
    async with (
        ContextEngineClient(server.target, attempts=1) as client,
        ContextEngineClient(server.target, channel_options=SMALL_WINDOW) as reader,
    ):
        await client.create_session(APP, USER, SESSION)
        stub = subscription_service_pb2_grpc.SubscriptionServiceStub(reader.channel)
        request = spb.SubscribeEventsRequest(
            app_name=APP, user_id=USER, session_id=SESSION, max_events_per_frame=16
        )
        async with closing_call(stub.SubscribeEvents(request)) as call:
            assert kind(await call.read()) == "caught_up"  # type: ignore[arg-type]
            total = 60
            for n in range(total):  # one commit per event
                await client.append_event(APP, USER, SESSION, message(BIG, event_id=f"e{n}"))
            frames: list[spb.SubscribeEventsResponse] = []
            while len(events_of(frames)) < total:
                frames.append(await call.read())  # type: ignore[arg-type]
    assert sequences_of(frames) == list(range(1, total + 1))
    sizes = [len(f.events.events) for f in frames]
    assert all(kind(f) == "events" for f in frames)
    assert max(sizes) <= 16
    assert max(sizes) > 1  # commits that waited went out together
    assert len(frames) < total


@pytest.fixture(params=["memory", "sqlite"])
async def small_buffers(
    request: pytest.FixtureRequest, tmp_path: str
) -> AsyncIterator[ContextEngineServer]:
    db = ":memory:" if request.param == "memory" else f"{tmp_path}/ce.db"
    async with start_local_server(db, settings=ServerSettings(subscriber_buffer=16)) as server:
        yield server


async def test_resubscribing_from_a_batch_cursor_gets_the_rest_once(
    client: ContextEngineClient,
) -> None:
    await client.create_session(APP, USER, SESSION)
    await client.append_events(APP, USER, SESSION, [message(f"m{n}") for n in range(7)])
    stream = client.subscribe_events(APP, USER, SESSION, max_events_per_frame=3)
    async with contextlib.aclosing(stream):
        (first,) = await take(stream, lambda got: len(got) == 1)
    assert first.events.events[-1].cursor == "3"
    rest = client.subscribe_events(
        APP, USER, SESSION, cursor=first.events.events[-1].cursor, max_events_per_frame=3
    )
    async with contextlib.aclosing(rest):
        frames = await take(rest, has_kind("caught_up"))
    assert sequences_of([first, *frames]) == list(range(1, 8))


async def test_the_client_resumes_after_the_last_event_of_a_batch(
    small_buffers: ContextEngineServer,
) -> None:
    """The reader lags (SUBSCRIBER_LAGGED) after batches were in flight: the client resubscribes
    from the last batch's last cursor, and every event arrives exactly once, in order."""
    async with (
        ContextEngineClient(small_buffers.target, attempts=1) as client,
        ContextEngineClient(small_buffers.target, channel_options=SMALL_WINDOW) as reader,
    ):
        await client.create_session(APP, USER, SESSION)
        stream = reader.subscribe_events(APP, USER, SESSION, max_events_per_frame=8)
        async with contextlib.aclosing(stream):
            await take(stream, has_kind("caught_up"))
            total = 300
            for n in range(total // 10):
                batch = [message(BIG, event_id=f"e{n}-{i}") for i in range(10)]
                await client.append_events(APP, USER, SESSION, batch)
            frames = await take(
                stream,
                lambda got: len(events_of(got)) >= total and kind(got[-1]) == "caught_up",
                seconds=30,
            )
    assert sequences_of(frames) == list(range(1, total + 1))
    assert [kind(f) for f in frames].count("caught_up") == 1  # it did resubscribe
    assert max(len(f.events.events) for f in frames) > 1
