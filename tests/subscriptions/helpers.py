"""Builders and stream readers shared by the subscription tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc

from contextengine.client import ContextEngineError
from contextengine.client._errors import to_client_error
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, event_pb2, subscription_service_pb2 as spb

T = TypeVar("T")

APP = "app"
USER = "u1"
SESSION = "s1"


def message(
    text: str,
    *,
    author: str = "user",
    branch: str | None = None,
    event_id: str = "",
    state_delta: dict[str, Any] | None = None,
) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    event = event_pb2.Event(
        id=event_id,
        author=author,
        invocation_id="inv-1",
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )
    if branch is not None:
        event.branch = branch
    if state_delta is not None:
        event.actions.state_delta.CopyFrom(dict_to_struct(state_delta))
    return event


def kind(frame: spb.SubscribeEventsResponse | spb.WatchSessionStateResponse) -> str:
    return frame.WhichOneof("frame") or ""


def sequences(frames: list[spb.SubscribeEventsResponse]) -> list[int]:
    return [f.event.event.sequence for f in frames if kind(f) == "event"]


async def take(
    stream: AsyncIterator[T], until: Callable[[list[T]], bool], seconds: float = 10.0
) -> list[T]:
    """Frames of ``stream`` until ``until(frames so far)`` holds (fails after ``seconds``)."""
    frames: list[T] = []
    async with asyncio.timeout(seconds):
        async for frame in stream:
            frames.append(frame)
            if until(frames):
                return frames
    raise AssertionError(f"the stream ended after {len(frames)} frames")


def count_events(n: int) -> Callable[[list[spb.SubscribeEventsResponse]], bool]:
    """``until`` for ``take``: once ``n`` event frames arrived."""
    return lambda frames: len(sequences(frames)) >= n


def has_kind(name: str) -> Callable[[list[Any]], bool]:
    return lambda frames: bool(frames) and kind(frames[-1]) == name


async def read_to_error(
    call: grpc.aio.UnaryStreamCall[Any, T], seconds: float = 10.0
) -> tuple[list[T], ContextEngineError]:
    """Reads ``call`` to its end: the frames, and the error it ends with (fails if it ends OK)."""
    frames: list[T] = []
    try:
        async with asyncio.timeout(seconds):
            while (frame := await call.read()) is not grpc.aio.EOF:
                frames.append(frame)  # type: ignore[arg-type]
    except grpc.aio.AioRpcError as err:
        return frames, await to_client_error(err)
    raise AssertionError("the stream ended without an error")


async def read_frame(call: grpc.aio.UnaryStreamCall[Any, T]) -> T:
    """The next frame of ``call`` (fails if the stream ended)."""
    frame = await call.read()
    assert frame is not grpc.aio.EOF, "the stream ended"
    return frame  # type: ignore[return-value]  # grpc's stubs type read() as `object` (EOF | T)


async def stream_error(
    call: grpc.aio.UnaryStreamCall[Any, Any], seconds: float = 10.0
) -> ContextEngineError:
    """The error ``call`` ends with."""
    _, error = await read_to_error(call, seconds)
    return error


@contextlib.asynccontextmanager
async def closing_call(
    call: grpc.aio.UnaryStreamCall[Any, T],
) -> AsyncIterator[grpc.aio.UnaryStreamCall[Any, T]]:
    try:
        yield call
    finally:
        call.cancel()


#: a reader on a channel with these options has a small, fixed HTTP/2 window: when it stops
#: reading, the server's stream soon waits, and its subscription's buffer fills up
SMALL_WINDOW = (("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16384))


async def eventually(check: Callable[[], bool], seconds: float = 5.0) -> None:
    """Waits until ``check()`` holds (the server notices a closed stream asynchronously)."""
    async with asyncio.timeout(seconds):
        while not check():  # noqa: ASYNC110 - polls server state no event announces
            await asyncio.sleep(0.01)
