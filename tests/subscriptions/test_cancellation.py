"""A client that cancels its streams frees everything on the server: subscriptions, tasks,
buffers."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncGenerator

import pytest

from contextengine.client import ContextEngineClient
from contextengine.subscriptions.broadcaster import Subscription
from contextengine.subscriptions.event_stream import EventStream
from contextengine.subscriptions.state_stream import StateStream
from contextengine.transport import ContextEngineServer
from contextengine.v1 import subscription_service_pb2 as spb

from .helpers import APP, SESSION, USER, eventually, message

pytestmark = pytest.mark.service

Frame = spb.SubscribeEventsResponse | spb.WatchSessionStateResponse


def streams_of(client: ContextEngineClient, n: int) -> AsyncGenerator[Frame, None]:
    kind = n % 4
    if kind == 0:
        return client.subscribe_events(APP, USER, SESSION)
    if kind == 1:
        return client.subscribe_events(APP, USER)
    if kind == 2:
        return client.subscribe_events(APP, kinds=[spb.EVENT_KIND_MESSAGE])
    return client.watch_session_state(APP, USER, SESSION)


def alive(cls: type) -> int:
    gc.collect()
    return sum(isinstance(obj, cls) for obj in gc.get_objects())


async def open_and_cancel(client: ContextEngineClient, count: int) -> int:
    """Opens ``count`` streams (each has sent its first frame), then ends half of them by
    closing the iterator and half by cancelling the task that is waiting on them. Returns the
    number of tasks while they were all open."""
    streams = [streams_of(client, n) for n in range(count)]
    for stream in streams:
        await anext(stream)
    peak = len(asyncio.all_tasks())
    waiting = [asyncio.create_task(anext(stream)) for stream in streams[: count // 2]]
    await asyncio.sleep(0.05)
    for task in waiting:
        task.cancel()
    for task in waiting:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for stream in streams:
        await stream.aclose()
    return peak


async def test_cancelling_fifty_subscriptions_leaks_nothing(server: ContextEngineServer) -> None:
    async with ContextEngineClient(server.target, attempts=1) as client:
        await client.create_session(APP, USER, SESSION)
        await client.append_events(APP, USER, SESSION, [message(f"m{n}") for n in range(5)])
        await open_and_cancel(client, 4)  # warm-up: whatever is created once exists now
        await eventually(lambda: server.broadcaster.active == 0)
        await asyncio.sleep(0.1)
        baseline = len(asyncio.all_tasks())

        for _ in range(2):
            peak = await open_and_cancel(client, 50)
            assert peak >= baseline + 50  # one server task per stream at least
            await eventually(lambda: server.broadcaster.active == 0)
            await eventually(lambda: len(asyncio.all_tasks()) <= baseline)

        # The appends after all this reach nobody, and nothing is buffered anywhere.
        await client.append_events(APP, USER, SESSION, [message("after")])
    assert alive(Subscription) == 0
    assert alive(EventStream) == 0
    assert alive(StateStream) == 0


async def test_a_stream_read_by_nobody_is_freed_when_cancelled(
    server: ContextEngineServer,
) -> None:
    """A stream whose server side waits for the client to read is freed too."""
    async with ContextEngineClient(server.target, attempts=1) as client:
        await client.create_session(APP, USER, SESSION)
        stream = client.subscribe_events(APP, USER, SESSION)
        await anext(stream)
        await client.append_events(APP, USER, SESSION, [message("x" * 10_000) for _ in range(50)])
        assert server.broadcaster.active == 1
        await stream.aclose()
        await eventually(lambda: server.broadcaster.active == 0)
