"""``contextengine.v1.SubscriptionService`` over the engine: live, resumable streams.

Each RPC opens the engine's stream (a bad request raises there, when the handler wrapper calls
the method) and ties its subscription to the life of the RPC, so that a cancelled or failed call
releases its buffer at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from contextengine.engine import Engine
from contextengine.v1 import subscription_service_pb2 as pb


class SubscriptionServicer:
    """Implements ``SubscriptionService``; errors are raised as ContextEngineError."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # Plain functions returning the stream's own generator: one generator less per frame (and
    # the events frames stay the encoded bytes the transport writes as they are).

    def SubscribeEvents(
        self, request: pb.SubscribeEventsRequest, context: Any
    ) -> AsyncIterator[Any]:
        stream = self._engine.subscribe_events(request)
        _close_when_done(context, stream.close)
        return stream.frames

    def WatchSessionState(
        self, request: pb.WatchSessionStateRequest, context: Any
    ) -> AsyncIterator[Any]:
        stream = self._engine.watch_session_state(request)
        _close_when_done(context, stream.close)
        return stream.frames


def _close_when_done(context: Any, close: Callable[[], None]) -> None:
    """Calls ``close`` when the RPC ends, however it ends: a cancelled call may leave the stream's
    generator suspended until it is garbage collected, its subscription must not wait for that."""
    add_done_callback = getattr(context, "add_done_callback", None)
    if add_done_callback is not None:
        add_done_callback(lambda _: close())
