"""The frames of subscription streams.

An event committed once is sent to every subscriber that follows it, so its frame is encoded once
and the bytes are shared (the handler wrapper sends bytes as they are). A frame depends only on
the event, which never changes once recorded (its position is never reused), and on the kind of
cursor: the sequence for session scope, the position otherwise.

A batch frame (``SubscribeEventsResponse.events``) is built from the same cached bytes without
decoding them: an ``event`` frame is ``SubscribedEvent`` as field 1 (length-delimited) of
``SubscribeEventsResponse``, and ``SubscribedEventBatch.events`` is field 1 too, so the event
frames laid end to end are the batch's encoding; the batch is then field 4 of the response.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import NamedTuple

from contextengine.store import Change, LoggedEvent
from contextengine.subscriptions.broadcaster import Batch
from contextengine.v1 import subscription_service_pb2 as pb

#: the bytes of encoded frames ``EventFrames`` keeps, whatever their number
FRAMES_CACHE_BYTES = 32 * 1024 * 1024


class EventFrames:
    """Encoded ``SubscribeEventsResponse`` event frames, the most recent ones kept: at most
    ``capacity`` frames and ``capacity_bytes`` bytes (the newest frame is kept whatever its
    size), so that large events do not make the cache large."""

    def __init__(self, capacity: int = 4096, capacity_bytes: int = FRAMES_CACHE_BYTES) -> None:
        self._capacity = capacity
        self._capacity_bytes = capacity_bytes
        self._bytes = 0
        self._frames: OrderedDict[tuple[int, bool], bytes] = OrderedDict()

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def event(self, logged: LoggedEvent, by_sequence: bool) -> bytes:
        cache_key = (logged.position, by_sequence)
        frames = self._frames
        frame = frames.get(cache_key)
        if frame is None:
            frame = encode_event(logged, by_sequence)
            frames[cache_key] = frame
            self._bytes += len(frame)
            while len(frames) > 1 and (
                len(frames) > self._capacity or self._bytes > self._capacity_bytes
            ):
                self._bytes -= len(frames.popitem(last=False)[1])
        return frame


class CommitRun(NamedTuple):
    """The events of one commit as consecutive ``event`` frames, encoded end to end."""

    frames: bytes
    #: the cursors of its first and last events
    first: int
    last: int
    #: how many events
    size: int


def commit_run(batch: list[Change], by_sequence: bool, frames: EventFrames) -> CommitRun | None:
    """The encoded frames of a commit's changes, if they are all events (else None). Computed
    once per ``Batch``, which every subscriber of a group shares, and kept on it."""
    if type(batch) is not Batch:
        return None
    memo = batch.memo
    if memo is not None and memo[0] is by_sequence:
        run: CommitRun | None = memo[1]
        return run
    run = None
    if all(type(change) is LoggedEvent for change in batch):
        events: list[LoggedEvent] = batch  # type: ignore[assignment]
        first, last = events[0], events[-1]
        run = CommitRun(
            b"".join([frames.event(logged, by_sequence) for logged in events]),
            first.event.sequence if by_sequence else first.position,
            last.event.sequence if by_sequence else last.position,
            len(events),
        )
    batch.memo = (by_sequence, run)
    return run


#: the tag of ``SubscribeEventsResponse.events`` (field 4, length-delimited)
_EVENTS_TAG = b"\x22"


def encode_batch(event_frames: list[bytes]) -> bytes:
    """The ``events`` frame of the given ``event`` frames (encoded by ``EventFrames.event``), in
    their order."""
    body = b"".join(event_frames)
    return _EVENTS_TAG + _varint(len(body)) + body


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


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
