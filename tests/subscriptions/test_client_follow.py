"""The Python client's transparent resubscription (``contextengine.client._resumable``)."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.client._resumable import FollowPolicy, follow, is_resumable
from contextengine.transport import ContextEngineServer

from .helpers import APP, SESSION, USER, kind, take

pytestmark = pytest.mark.service

FAST = FollowPolicy(max_failures=3, first_backoff_seconds=0.001, max_backoff_seconds=0.002)


def failure(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="boom")


class FakeCall:
    """Plays a script: frames, then an error or the end of the stream."""

    def __init__(self, frames: list[str], error: grpc.aio.AioRpcError | None) -> None:
        self._frames = list(frames)
        self._error = error
        self.cancelled = False

    async def read(self) -> Any:
        if self._frames:
            return self._frames.pop(0)
        if self._error is not None:
            raise self._error
        return grpc.aio.EOF

    def cancel(self) -> bool:
        self.cancelled = True
        return True


def scripted(*calls: FakeCall) -> tuple[Any, list[FakeCall]]:
    opened: list[FakeCall] = []
    queue = list(calls)

    def open_call() -> Any:
        opened.append(queue.pop(0))
        return opened[-1]

    return open_call, opened


async def test_follow_resumes_until_the_stream_ends() -> None:
    unavailable = failure(grpc.StatusCode.UNAVAILABLE)
    open_call, opened = scripted(
        FakeCall(["a", "b"], unavailable),  # failures in a row: 1
        FakeCall([], unavailable),  # 2, below max_failures
        FakeCall(["c"], unavailable),  # a frame: back to 1
        FakeCall([], unavailable),  # 2
        FakeCall(["d"], None),  # the end of the stream
    )
    frames = [frame async for frame in follow(open_call, FAST)]
    assert frames == ["a", "b", "c", "d"]
    assert len(opened) == 5
    assert all(call.cancelled for call in opened)


async def test_follow_gives_up_after_max_failures_in_a_row() -> None:
    unavailable = failure(grpc.StatusCode.UNAVAILABLE)
    open_call, opened = scripted(*(FakeCall([], unavailable) for _ in range(5)))
    with pytest.raises(ContextEngineError) as info:
        [frame async for frame in follow(open_call, FAST)]
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(opened) == 3


async def test_follow_raises_other_errors_at_once() -> None:
    open_call, opened = scripted(FakeCall(["a"], failure(grpc.StatusCode.NOT_FOUND)))
    frames = follow(open_call, FAST)
    assert await anext(frames) == "a"
    with pytest.raises(ContextEngineError) as info:
        await anext(frames)
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert len(opened) == 1


def test_what_is_resumable() -> None:
    def error(code: grpc.StatusCode, reason: str = "") -> ContextEngineError:
        return ContextEngineError(code, "", reason, {})

    assert is_resumable(error(grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN"))
    assert is_resumable(error(grpc.StatusCode.UNAVAILABLE))
    assert is_resumable(error(grpc.StatusCode.RESOURCE_EXHAUSTED, "SUBSCRIBER_LAGGED"))
    assert not is_resumable(error(grpc.StatusCode.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE"))
    assert not is_resumable(error(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CURSOR"))
    assert not is_resumable(error(grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND"))


async def test_a_server_that_is_gone_fails_after_max_failures() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ContextEngineClient(f"127.0.0.1:{port}") as client:
        stream = client.subscribe_events(APP, USER, SESSION, max_failures=2)
        async with contextlib.aclosing(stream):
            with pytest.raises(ContextEngineError) as info:
                await anext(stream)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE


async def test_a_silent_stream_is_reopened(server: ContextEngineServer) -> None:
    """Nothing for ``idle_seconds`` (no event, no heartbeat): the client reconnects."""
    async with ContextEngineClient(server.target, attempts=1) as client:
        await client.create_session(APP, USER, SESSION)
        stream = client.subscribe_events(APP, USER, SESSION, heartbeat_seconds=60, idle_seconds=0.2)
        async with contextlib.aclosing(stream):
            frames = await take(stream, lambda got: len(got) == 3, seconds=5)
    assert [kind(f) for f in frames] == ["caught_up"] * 3
