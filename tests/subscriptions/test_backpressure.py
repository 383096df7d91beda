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

from contextengine import cli
from contextengine.client import ContextEngineClient
from contextengine.settings import ServerSettings
from contextengine.store import LoggedEvent, SessionKey
from contextengine.subscriptions.frames import EventFrames
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
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

pytestmark = pytest.mark.service

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


KIB64 = "y" * 65_536
MIB = 1024 * 1024


@pytest.fixture(params=["memory", "sqlite"])
async def byte_budget(
    request: pytest.FixtureRequest, tmp_path: str
) -> AsyncIterator[ContextEngineServer]:
    """Room for 1024 events, but only 1 MiB of them."""
    db = ":memory:" if request.param == "memory" else f"{tmp_path}/ce.db"
    settings = ServerSettings(subscriber_buffer_bytes=MIB)
    async with start_local_server(db, settings=settings) as server:
        yield server


async def test_a_stalled_subscriber_is_cut_off_at_its_byte_budget(
    byte_budget: ContextEngineServer,
) -> None:
    """Issue 13, item 7: 64 large events are far fewer than the 1024 a buffer may hold, but
    4 MiB is more than its 1 MiB: the stalled subscriber ends with SUBSCRIBER_LAGGED and resumes
    from its cursor with everything, exactly once; the log and the server are unharmed."""
    total = 64
    async with (
        ContextEngineClient(byte_budget.target, attempts=1) as client,
        ContextEngineClient(byte_budget.target, channel_options=SMALL_WINDOW) as reader,
    ):
        await client.create_session(APP, USER, SESSION)
        stub = subscription_service_pb2_grpc.SubscriptionServiceStub(reader.channel)
        stalled = stub.SubscribeEvents(
            spb.SubscribeEventsRequest(app_name=APP, user_id=USER, session_id=SESSION)
        )
        first = await read_frame(stalled)
        assert kind(first) == "caught_up"
        for n in range(total):
            await client.append_event(APP, USER, SESSION, message(KIB64, event_id=f"big{n}"))
            if n == total // 2:
                # 2 MiB written: the stalled subscriber is gone already, its buffer released.
                await eventually(lambda: byte_budget.broadcaster.active == 0)
        frames, error = await read_to_error(stalled)
        received = sequences(frames)
        assert (error.code, error.reason) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "SUBSCRIBER_LAGGED",
        )
        assert received == list(range(1, len(received) + 1))
        assert len(received) < total // 2
        assert error.metadata == {"cursor": str(received[-1] if received else 0)}

        rest = client.subscribe_events(APP, USER, SESSION, cursor=error.metadata["cursor"])
        async with contextlib.aclosing(rest):
            resumed = await take(rest, has_kind("caught_up"), seconds=30)
        assert received + sequences(resumed) == list(range(1, total + 1))
        assert [f.event.event.id for f in resumed if kind(f) == "event"][-1] == f"big{total - 1}"

        session = await client.get_session(APP, USER, SESSION)
        assert [e.id for e in session.events] == [f"big{n}" for n in range(total)]
        assert all(e.content.parts[0].text == KIB64 for e in session.events)
        more = await client.append_event(APP, USER, SESSION, message("still serving"))
        assert more.event.sequence == total + 1
    await eventually(lambda: byte_budget.broadcaster.active == 0)


async def test_a_live_subscriber_that_keeps_up_is_never_cut_off_by_bytes(
    byte_budget: ContextEngineServer,
) -> None:
    async with ContextEngineClient(byte_budget.target, attempts=1) as client:
        await client.create_session(APP, USER, SESSION)
        stream = client.subscribe_events(APP, USER, SESSION, max_events_per_frame=1)
        async with contextlib.aclosing(stream):
            await take(stream, has_kind("caught_up"))
            for n in range(24):
                await client.append_event(APP, USER, SESSION, message(KIB64, event_id=f"e{n}"))
                [frame] = await take(stream, count_events(1))
                assert frame.event.event.sequence == n + 1
            # One commit larger than the budget still reaches a subscriber that keeps up.
            batch = [message(KIB64, event_id=f"b{i}") for i in range(20)]
            await client.append_events(APP, USER, SESSION, batch)
            frames = await take(stream, count_events(20))
        assert sequences(frames) == list(range(25, 45))


async def test_batched_frames_are_bounded_in_bytes(server: ContextEngineServer) -> None:
    """A replay or live run of large events is cut into ``events`` frames of at most about
    4 MiB, so a client that receives messages of up to 6 MiB gets every event (before: one frame
    per 256 events, 12 MiB here, and the stream failed with RESOURCE_EXHAUSTED)."""
    text = "z" * MIB
    async with (
        ContextEngineClient(server.target, attempts=1) as client,
        ContextEngineClient(server.target, max_message_bytes=6 * MIB) as small,
    ):
        await client.create_session(APP, USER, SESSION)
        for n in range(12):
            await client.append_event(APP, USER, SESSION, message(text, event_id=f"r{n}"))
        stream = small.subscribe_events(APP, USER, SESSION, max_events_per_frame=256)
        async with contextlib.aclosing(stream):
            replayed = await take(stream, has_kind("caught_up"), seconds=30)
            batch = [message("z" * (MIB // 2), event_id=f"l{n}") for n in range(7)]
            await client.append_events(APP, USER, SESSION, batch[:3])
            await client.append_events(APP, USER, SESSION, batch[3:])
            live = await take(
                stream, lambda got: sum(len(f.events.events) for f in got) >= 7, seconds=30
            )
    events = [f for f in replayed if kind(f) == "events"]
    assert [e.event.sequence for f in events for e in f.events.events] == list(range(1, 13))
    assert len(events) >= 3
    assert all(f.ByteSize() <= 5 * MIB for f in events + live)
    assert [e.event.sequence for f in live for e in f.events.events] == list(range(13, 20))


def test_serve_sets_the_byte_budget(capsys: pytest.CaptureFixture[str]) -> None:
    serve = ["serve", "--db", ":memory:"]
    default = cli.serve_settings(cli.parse(serve))
    assert default.subscriber_buffer_bytes == ServerSettings().subscriber_buffer_bytes == 32 * MIB
    chosen = cli.serve_settings(cli.parse([*serve, "--subscriber-buffer-bytes", "1048576"]))
    assert chosen.subscriber_buffer_bytes == MIB
    assert cli.main([*serve, "--subscriber-buffer-bytes", "0"]) == 2
    assert "--subscriber-buffer-bytes must be positive" in capsys.readouterr().err


async def test_replay_pages_hold_about_the_byte_budget(
    byte_budget: ContextEngineServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay of large events reads pages of about the budget (1 MiB here), not 500 events."""
    limits: list[int] = []
    read = byte_budget.store.list_logged_events

    async def recording(key: Any, after: int, limit: int) -> Any:
        limits.append(limit)
        return await read(key, after, limit)

    monkeypatch.setattr(byte_budget.store, "list_logged_events", recording)
    async with ContextEngineClient(byte_budget.target, attempts=1) as client:
        await client.create_session(APP, USER, SESSION)
        for n in range(10):
            batch = [message(KIB64, event_id=f"p{n}-{i}") for i in range(10)]
            await client.append_events(APP, USER, SESSION, batch)
        stream = client.subscribe_events(APP, USER, SESSION)
        async with contextlib.aclosing(stream):
            frames = await take(stream, has_kind("caught_up"), seconds=30)
    assert sequences(frames) == list(range(1, 101))
    assert limits[0] == 32
    assert all(limit <= 16 for limit in limits[1:])  # 1 MiB / 64 KiB
    assert len(limits) >= 100 // 16


def test_the_frame_cache_is_bounded_in_bytes() -> None:
    frames = EventFrames(capacity_bytes=MIB)
    key = SessionKey(APP, USER, SESSION)
    for n in range(1, 41):
        event = message(KIB64, event_id=f"c{n}")
        event.sequence = n
        frames.event(LoggedEvent(key, event, n), True)
        assert frames.cached_bytes <= MIB
    assert frames.cached_bytes > MIB - 2 * len(KIB64)
    huge = message("h" * (2 * MIB), event_id="huge")
    huge.sequence = 41
    frames.event(LoggedEvent(key, huge, 41), True)  # the newest frame stays, whatever its size
    assert 2 * MIB < frames.cached_bytes < 2 * MIB + 1000
