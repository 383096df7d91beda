"""The frames of subscription streams.

An event committed once is sent to every subscriber that follows it, so its frame is encoded once
and the bytes are shared (the handler wrapper sends bytes as they are). A frame depends only on
the event, which never changes once recorded (its position is never reused), and on the kind of
cursor: the sequence for session scope, the position otherwise.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from contextengine.store import LoggedEvent
from contextengine.v1 import subscription_service_pb2 as pb


class EventFrames:
    """Encoded ``SubscribeEventsResponse`` event frames, the most recent ones kept."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._frames: OrderedDict[tuple[int, bool], bytes] = OrderedDict()

    def event(self, logged: LoggedEvent, by_sequence: bool) -> bytes:
        cache_key = (logged.position, by_sequence)
        frame = self._frames.get(cache_key)
        if frame is None:
            frame = encode_event(logged, by_sequence)
            self._frames[cache_key] = frame
            if len(self._frames) > self._capacity:
                self._frames.popitem(last=False)
        return frame


def encode_event(logged: LoggedEvent, by_sequence: bool) -> bytes:
    cursor = logged.event.sequence if by_sequence else logged.position
    response = pb.SubscribeEventsResponse(
        event=pb.SubscribedEvent(
            app_name=logged.key.app_name,
            user_id=logged.key.user_id,
            session_id=logged.key.session_id,
            event=logged.event,
            position=logged.position,
            cursor=str(cursor),
        )
    )
    return response.SerializeToString()


def caught_up(cursor: int) -> pb.SubscribeEventsResponse:
    return pb.SubscribeEventsResponse(caught_up=pb.CaughtUp(cursor=str(cursor)))


def heartbeat(cursor: int) -> pb.Heartbeat:
    return pb.Heartbeat(cursor=str(cursor), server_time=time.time())
