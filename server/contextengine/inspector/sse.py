"""Server-sent events (the ``text/event-stream`` format of the HTML standard) of one session's
log, fed by the engine's subscription stream (``Engine.subscribe_events``: the same stream the
gRPC ``SubscribeEvents`` serves, catch-up from a sequence and then live).

Frames sent:

* ``event: appended`` with ``data: {"sequence", "author", "kind", "id"}`` per appended event
  (``id:`` is the sequence, so a client resumes with ``after``);
* ``event: caught_up`` once the events already in the log were sent;
* a comment line (``: heartbeat``) on the subscription's heartbeats, which keeps proxies from
  closing an idle stream and lets the server notice a client that went away;
* ``event: error`` with ``data: {"reason", "message"}`` when the subscription ends with an error
  (the sidecar shutting down, a subscriber that lagged), after which the stream ends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from contextengine.core.errors import ContextEngineError
from contextengine.engine import Stream
from contextengine.inspector.api import event_kind
from contextengine.v1 import subscription_service_pb2 as pb

__all__ = ["frame", "session_events"]

#: seconds between heartbeats of an idle stream
HEARTBEAT_SECONDS = 15


def frame(event: str | None, data: Any, event_id: str | None = None) -> bytes:
    """One server-sent event: ``data`` as one line of JSON (which holds no raw newline)."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def subscribe_request(app: str, user: str, session: str, after: int) -> pb.SubscribeEventsRequest:
    return pb.SubscribeEventsRequest(
        scope=pb.SUBSCRIPTION_SCOPE_SESSION,
        app_name=app,
        user_id=user,
        session_id=session,
        after_sequence=after,
        heartbeat_seconds=HEARTBEAT_SECONDS,
    )


async def session_events(
    stream: Stream[pb.SubscribeEventsResponse],
) -> AsyncIterator[bytes]:
    """The stream's frames as server-sent events, its first frame already read: a request the
    subscription refuses (a cursor past the end of the log, SESSION_NOT_FOUND) raises here,
    before anything is sent, so it becomes a 4xx JSON answer rather than a 200 that fails.
    The subscription is closed however the events end."""
    try:
        first = await anext(stream)
    except StopAsyncIteration:
        first = None
    except BaseException:
        await stream.aclose()
        raise
    return _events(stream, first)


async def _events(
    stream: Stream[pb.SubscribeEventsResponse], first: pb.SubscribeEventsResponse | None
) -> AsyncIterator[bytes]:
    try:
        yield b": stream open\n\n"
        if first is None:
            return
        async for response in _chain(first, stream):
            which = response.WhichOneof("frame")
            if which == "event":
                yield _appended(response.event)
            elif which == "events":
                for subscribed in response.events.events:
                    yield _appended(subscribed)
            elif which == "caught_up":
                yield frame("caught_up", {"cursor": response.caught_up.cursor})
            elif which == "heartbeat":
                yield b": heartbeat\n\n"
    except ContextEngineError as error:
        yield frame("error", {"reason": error.reason, "message": error.message})
    finally:
        await stream.aclose()


async def _chain(
    first: pb.SubscribeEventsResponse, rest: Stream[pb.SubscribeEventsResponse]
) -> AsyncIterator[pb.SubscribeEventsResponse]:
    yield first
    async for response in rest:
        yield response


def _appended(subscribed: pb.SubscribedEvent) -> bytes:
    event = subscribed.event
    return frame(
        "appended",
        {
            "sequence": event.sequence,
            "author": event.author,
            "kind": event_kind(event),
            "id": event.id,
        },
        str(event.sequence),
    )
