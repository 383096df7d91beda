"""Bounded buffers: a slow subscriber is cut off with a resumable status and resumes from the
store; fast subscribers and writers are not held up; many subscribers all get everything."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from contextengine.client import ContextEngineClient
from contextengine.server import ContextEngineServer, ServerSettings
from contextengine.testing import start_local_server
from contextengine.v1 import subscription_service_pb2 as spb, subscription_service_pb2_grpc

from .helpers import (
    APP,
    SESSION,
    SMALL_WINDOW,
    USER,
    count_events,
    eventually,
    has_kind,
    kind,
    message,
    read_frame,
    read_to_error,
    sequences,
    take,
)

BIG = "x" * 4000


@pytest.fixture(params=["memory", "sqlite"])
async def small_buffers(
    request: pytest.FixtureRequest, tmp_path: str
) -> AsyncIterator[ContextEngineServer]:
    db = ":memory:" if request.param == "memory" else f"{tmp_path}/ce.db"
    async with start_local_server(db, settings=ServerSettings(subscriber_buffer=16)) as server:
        yield server


async def test_a_slow_subscriber_is_cut_off_and_resumes_from_the_store(
    small_buffers: ContextEngineServer,
) -> None:
    async with (
        ContextEngineClient(small_buffers.target, attempts=1) as client,
        ContextEngineClient(small_buffers.target, channel_options=SMALL_WINDOW) as reader,
    ):
        await client.create_session(APP, USER, SESSION)
        stub = subscription_service_pb2_grpc.SubscriptionServiceStub(reader.channel)
        slow = stub.SubscribeEvents(
            spb.SubscribeEventsRequest(app_name=APP, user_id=USER, session_id=SESSION)
        )
        fast = client.subscribe_events(APP, USER, SESSION)
        async with contextlib.aclosing(fast):
            first = await read_frame(slow)
            assert kind(first) == "caught_up"
            await take(fast, has_kind("caught_up"))
            total = 400
            started = time.perf_counter()
            for n in range(total // 10):
                batch = [message(BIG, event_id=f"e{n}-{i}") for i in range(10)]
                await client.append_events(APP, USER, SESSION, batch)
            writing = time.perf_counter() - started
            fast_frames = await take(fast, count_events(total))
        assert sequences(fast_frames) == list(range(1, total + 1))
        assert writing < 10.0  # the writer never waited for the slow reader

        # The slow reader gets what was in flight, then the resumable status.
        frames, error = await read_to_error(slow)
        received = sequences(frames)
        assert (error.code, error.reason) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "SUBSCRIBER_LAGGED",
        )
        assert received == list(range(1, len(received) + 1))
        assert len(received) < total
        assert error.metadata == {"cursor": str(received[-1] if received else 0)}

        # Resubscribing from the cursor gives exactly the rest.
        rest = client.subscribe_events(APP, USER, SESSION, cursor=error.metadata["cursor"])
        async with contextlib.aclosing(rest):
            frames = await take(rest, has_kind("caught_up"))
        assert received + sequences(frames) == list(range(1, total + 1))
    await eventually(lambda: small_buffers.broadcaster.active == 0)


async def test_the_client_resumes_a_lagging_subscription_transparently(
    small_buffers: ContextEngineServer,
) -> None:
    async with (
        ContextEngineClient(small_buffers.target, attempts=1) as client,
        ContextEngineClient(small_buffers.target, channel_options=SMALL_WINDOW) as reader,
    ):
        await client.create_session(APP, USER, SESSION)
        stream = reader.subscribe_events(APP, USER, SESSION)
        async with contextlib.aclosing(stream):
            await take(stream, has_kind("caught_up"))
            total = 300
            for n in range(total // 10):
                batch = [message(BIG, event_id=f"e{n}-{i}") for i in range(10)]
                await client.append_events(APP, USER, SESSION, batch)
            # Only now does the reader read: it lagged long ago, and resubscribed after reading
            # what was in flight; the replay ends with a second caught_up.
            frames = await take(
                stream,
                lambda got: len(sequences(got)) == total and kind(got[-1]) == "caught_up",
                seconds=30,
            )
    assert sequences(frames) == list(range(1, total + 1))
    assert [kind(f) for f in frames].count("caught_up") == 1


async def test_a_hundred_subscribers_on_one_session_get_everything(
    server: ContextEngineServer,
) -> None:
    total = 150
    clients = [ContextEngineClient(server.target, attempts=1) for _ in range(4)]
    async with contextlib.AsyncExitStack() as stack:
        for client in clients:
            await stack.enter_async_context(client)
        writer = clients[0]
        await writer.create_session(APP, USER, SESSION)
        await writer.append_events(APP, USER, SESSION, [message("early") for _ in range(10)])
        streams = [
            await stack.enter_async_context(
                contextlib.aclosing(clients[n % 4].subscribe_events(APP, USER, SESSION))
            )
            for n in range(100)
        ]

        async def write() -> None:
            for n in range(total - 10):
                await writer.append_event(APP, USER, SESSION, message(f"live {n}"))

        results = await asyncio.gather(
            write(), *(take(stream, count_events(total), seconds=60) for stream in streams)
        )
    for frames in results[1:]:
        assert frames is not None  # (results[0] is write()'s None)
        assert sequences(frames) == list(range(1, total + 1))
    await eventually(lambda: server.broadcaster.active == 0)


async def test_an_overflow_during_the_replay_reads_on_from_the_store(
    small_buffers: ContextEngineServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live events pile up while a long replay runs: the subscription is registered again and
    the replay goes on, without ending the stream."""
    registrations = 0
    subscribe = small_buffers.broadcaster.subscribe

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal registrations
        registrations += 1
        return subscribe(*args, **kwargs)

    monkeypatch.setattr(small_buffers.broadcaster, "subscribe", counting)
    async with ContextEngineClient(small_buffers.target, attempts=1) as client:
        await client.create_session(APP, USER, SESSION)
        for n in range(60):
            batch = [message(BIG, event_id=f"old{n}-{i}") for i in range(10)]
            await client.append_events(APP, USER, SESSION, batch)
        stub = subscription_service_pb2_grpc.SubscriptionServiceStub(client.channel)
        call = stub.SubscribeEvents(
            spb.SubscribeEventsRequest(app_name=APP, user_id=USER, session_id=SESSION)
        )

        async def write() -> None:
            for n in range(30):
                batch = [message("new", event_id=f"new{n}-{i}") for i in range(10)]
                await client.append_events(APP, USER, SESSION, batch)

        writing = asyncio.create_task(write())
        frames: list[spb.SubscribeEventsResponse] = []
        async with asyncio.timeout(30):
            while len(sequences(frames)) < 900:
                frames.append(await read_frame(call))
        await writing
        call.cancel()
    assert sequences(frames) == list(range(1, 901))
    assert registrations > 1
