"""Following a server stream across failures: the Python client's transparent resubscription.

``follow`` opens a stream, yields its frames, and when the stream fails in a way that a new
stream can repair (the server shuts down, the connection is lost, the subscriber lagged, nothing
arrived for too long) it opens a new one after a short randomized backoff. The caller builds each
new request from the last frame it saw. After ``max_failures`` failures in a row, without a frame
in between, the last error is raised.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import grpc

from contextengine.client._errors import ContextEngineError, to_client_error
from contextengine.client._timeouts import within

T = TypeVar("T")

#: failures that a new stream from the last cursor repairs
_RESUMABLE_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,  # the server shuts down, the connection is lost
        grpc.StatusCode.CANCELLED,  # by the server (when we cancel, reading raises CancelledError)
        grpc.StatusCode.DEADLINE_EXCEEDED,  # the idle watchdog below
        grpc.StatusCode.INTERNAL,  # "nothing acknowledged is lost; the request may be retried"
    }
)
_RESUMABLE_REASONS = frozenset({"SUBSCRIBER_LAGGED"})


@dataclass(frozen=True)
class FollowPolicy:
    #: failures in a row (without a frame in between) before the error is raised
    max_failures: int = 5
    #: a stream that sends nothing for this long is treated as broken (None: never)
    idle_seconds: float | None = None
    first_backoff_seconds: float = 0.05
    max_backoff_seconds: float = 2.0


def is_resumable(error: ContextEngineError) -> bool:
    return error.code in _RESUMABLE_CODES or error.reason in _RESUMABLE_REASONS


async def follow(
    open_call: Callable[[], grpc.aio.UnaryStreamCall[Any, T]], policy: FollowPolicy
) -> AsyncGenerator[T, None]:
    """The frames of the streams ``open_call`` opens: it is called again for every new stream.
    Ends when a stream ends normally; raises ``ContextEngineError`` when it fails for good."""
    if policy.max_failures < 1:
        raise ValueError("max_failures must be at least 1")
    failures = 0
    delay = policy.first_backoff_seconds
    while True:
        call = open_call()
        try:
            while True:
                try:
                    frame = await within(call.read(), policy.idle_seconds)
                except TimeoutError:
                    error = ContextEngineError(
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"nothing received for {policy.idle_seconds} s",
                        "",
                        {},
                    )
                    break
                except grpc.aio.AioRpcError as err:
                    error = await to_client_error(err)
                    if not is_resumable(error):
                        raise error from None
                    break
                if frame is grpc.aio.EOF:
                    return
                failures = 0
                delay = policy.first_backoff_seconds
                yield cast(T, frame)  # the stubs type read() as object | T
        finally:
            call.cancel()
        failures += 1
        if failures >= policy.max_failures:
            raise error
        await asyncio.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, policy.max_backoff_seconds)
