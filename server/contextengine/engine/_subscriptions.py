"""Subscriptions: live, resumable streams of a session's (or scope's) events and of its state.

The streams are in ``subscriptions/``; this module checks the request (bad ones raise
ContextEngineError when the stream is made, before anything is iterated) and hands back the
stream as a :class:`Stream`: an async iterator of response messages with ``close``, so a caller
that stops early (or a cancelled RPC) releases the subscription's buffer at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

from contextengine.store import EventStore
from contextengine.subscriptions.broadcaster import Broadcaster
from contextengine.subscriptions.event_stream import EventStream, StreamSettings
from contextengine.subscriptions.frames import EventFrames
from contextengine.subscriptions.requests import events_spec, watch_spec
from contextengine.subscriptions.state_stream import StateStream
from contextengine.v1 import subscription_service_pb2 as pb

T = TypeVar("T")


class Stream(Generic[T]):
    """One open stream: an async iterator of response messages. ``close()`` (idempotent) ends
    its subscription whether or not the iteration finished; ``aclose()`` also closes the
    generator. ``frames`` is what a transport writes: the same messages, except that the events
    stream's batched frames are their encoded bytes (joined from shared encoded pieces), which
    iterating the stream itself decodes."""

    __slots__ = ("_close", "_decode", "_frames", "_messages")

    def __init__(
        self,
        frames: AsyncIterator[Any],
        close: Callable[[], None],
        decode: Callable[[bytes], T] | None = None,
    ) -> None:
        self._frames = frames
        self._close = close
        self._decode = decode
        self._messages: AsyncIterator[T] | None = None

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        if self._messages is None:
            self._messages = self._frames if self._decode is None else self._decoded()
        return await self._messages.__anext__()

    async def _decoded(self) -> AsyncIterator[T]:
        decode = self._decode
        assert decode is not None
        async for frame in self._frames:
            yield decode(frame) if isinstance(frame, bytes) else frame

    @property
    def frames(self) -> AsyncIterator[Any]:
        """The stream's own generator (what the transport iterates, without a wrapper)."""
        return self._frames

    def close(self) -> None:
        self._close()

    async def aclose(self) -> None:
        self._close()
        for iterator in (self._messages, self._frames):
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()


class SubscriptionOps:
    """Every operation of ``SubscriptionService``."""

    def __init__(
        self, store: EventStore, broadcaster: Broadcaster, settings: StreamSettings
    ) -> None:
        self._store = store
        self._broadcaster = broadcaster
        self._settings = settings
        self._frames = EventFrames()

    def subscribe_events(
        self, request: pb.SubscribeEventsRequest
    ) -> Stream[pb.SubscribeEventsResponse]:
        spec = events_spec(request, self._settings.heartbeat_seconds)
        stream = EventStream(spec, self._store, self._broadcaster, self._frames, self._settings)
        return Stream(stream.frames(), stream.close, pb.SubscribeEventsResponse.FromString)

    def watch_session_state(
        self, request: pb.WatchSessionStateRequest
    ) -> Stream[pb.WatchSessionStateResponse]:
        spec = watch_spec(request, self._settings.heartbeat_seconds)
        stream = StateStream(spec, self._store, self._broadcaster, self._settings)
        return Stream(stream.frames(), stream.close)
