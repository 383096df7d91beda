"""On shutdown, open streams end with UNAVAILABLE / SHUTTING_DOWN; the Python client then
resubscribes from its cursor and misses nothing."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from contextengine.testing import start_local_server
from contextengine.v1 import subscription_service_pb2 as spb, subscription_service_pb2_grpc

from .helpers import (
    APP,
    SESSION,
    USER,
    count_events,
    has_kind,
    kind,
    message,
    read_frame,
    sequences,
    stream_error,
    take,
)

pytestmark = pytest.mark.service


async def test_open_streams_end_with_unavailable(tmp_path: Path) -> None:
    async with (
        start_local_server(str(tmp_path / "ce.db")) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        await client.create_session(APP, USER, SESSION)
        await client.append_events(APP, USER, SESSION, [message("a"), message("b")])
        stub = subscription_service_pb2_grpc.SubscriptionServiceStub(client.channel)
        session = stub.SubscribeEvents(
            spb.SubscribeEventsRequest(app_name=APP, user_id=USER, session_id=SESSION)
        )
        everything = stub.SubscribeEvents(
            spb.SubscribeEventsRequest(scope=spb.SUBSCRIPTION_SCOPE_APP, app_name=APP)
        )
        watch = stub.WatchSessionState(
            spb.WatchSessionStateRequest(app_name=APP, user_id=USER, session_id=SESSION)
        )
        for call in (session, everything):
            frames = [await read_frame(call) for _ in range(3)]
            assert kind(frames[-1]) == "caught_up"
        first = await read_frame(watch)
        assert kind(first) == "snapshot"
        last_position = frames[-1].caught_up.cursor

        stopping = asyncio.create_task(server.stop(grace=5.0))
        errors = [await stream_error(call) for call in (session, everything, watch)]
        await stopping

    assert [(e.code.name, e.reason) for e in errors] == [("UNAVAILABLE", "SHUTTING_DOWN")] * 3
    assert errors[0].metadata == {"cursor": "2"}
    assert errors[1].metadata == {"cursor": last_position}


async def test_the_client_resubscribes_across_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "ce.db")
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(start_local_server(db))
        address = first.target
        client = await stack.enter_async_context(ContextEngineClient(address, attempts=4))
        await client.create_session(APP, USER, SESSION)
        stream = client.subscribe_events(APP, USER, SESSION)
        await stack.enter_async_context(contextlib.aclosing(stream))
        frames = await take(stream, has_kind("caught_up"))
        await client.append_events(APP, USER, SESSION, [message("a"), message("b")])
        frames += await take(stream, count_events(2))

        await first.stop(grace=1.0)  # the stream ends with UNAVAILABLE; the client retries
        again = await stack.enter_async_context(start_local_server(db, listen=address))
        assert again.target == address
        await client.append_events(APP, USER, SESSION, [message("c"), message("d")])
        # The new subscription's replay ends with caught_up, before or after c and d depending
        # on when the client reconnected.
        frames += await take(
            stream,
            lambda got: len(sequences(got)) == 2 and any(kind(f) == "caught_up" for f in got),
            seconds=20,
        )

    events = [f.event.event for f in frames if kind(f) == "event"]
    assert [e.sequence for e in events] == [1, 2, 3, 4]
    assert [e.content.parts[0].text for e in events] == ["a", "b", "c", "d"]
    assert [kind(f) for f in frames].count("caught_up") == 2  # one per (re)subscription
