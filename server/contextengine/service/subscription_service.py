"""``contextengine.v1.SubscriptionService``: live, resumable streams of events and of state.

The streams themselves are in ``_event_stream`` and ``_state_stream``; this servicer validates the
request and ties each stream's subscription to the life of its RPC, so that a cancelled or failed
call releases its buffer at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from contextengine.store import EventStore
from contextengine.subscriptions.broadcaster import Broadcaster
from contextengine.subscriptions.event_stream import EventStream, StreamSettings
from contextengine.subscriptions.frames import EventFrames
from contextengine.subscriptions.requests import events_spec, watch_spec
from contextengine.subscriptions.state_stream import StateStream
from contextengine.v1 import subscription_service_pb2 as pb

__all__ = ["StreamSettings", "SubscriptionServicer"]


class SubscriptionServicer:
    """Implements ``SubscriptionService``; errors are raised as ContextEngineError."""

    def __init__(
        self,
        store: EventStore,
        broadcaster: Broadcaster,
        settings: StreamSettings | None = None,
    ) -> None:
        self._store = store
        self._broadcaster = broadcaster
        self._settings = settings if settings is not None else StreamSettings()
        self._frames = EventFrames()

    # Plain functions returning the stream's generator: one generator less per frame. Bad
    # requests raise here, when the handler wrapper calls them.

    def SubscribeEvents(
        self, request: pb.SubscribeEventsRequest, context: Any
    ) -> AsyncIterator[Any]:
        spec = events_spec(request, self._settings.heartbeat_seconds)
        stream = EventStream(spec, self._store, self._broadcaster, self._frames, self._settings)
        _close_when_done(context, stream.close)
        return stream.frames()

    def WatchSessionState(
        self, request: pb.WatchSessionStateRequest, context: Any
    ) -> AsyncIterator[pb.WatchSessionStateResponse]:
        spec = watch_spec(request, self._settings.heartbeat_seconds)
        stream = StateStream(spec, self._store, self._broadcaster, self._settings)
        _close_when_done(context, stream.close)
        return stream.frames()


def _close_when_done(context: Any, close: Callable[[], None]) -> None:
    """Calls ``close`` when the RPC ends, however it ends: a cancelled call may leave the stream's
    generator suspended until it is garbage collected, its subscription must not wait for that."""
    add_done_callback = getattr(context, "add_done_callback", None)
    if add_done_callback is not None:
        add_done_callback(lambda _: close())
