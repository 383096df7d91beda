"""One ``SubscribeEvents`` stream: replay from the store, ``caught_up``, then live from the
broadcaster, without gaps or duplicates.

Why there are no gaps: the subscription is registered *before* the store is read. Every commit is
then either notified before the registration (so it was committed before, and the replay reads
it) or buffered for the subscription (or both). The live phase skips what is at or before the last
cursor sent, so nothing is sent twice. Both the store and the notifications are in commit order,
which for one session is sequence order and across sessions is position order.

A subscription that overflows while the replay is still running is simply registered again: the
events it missed are in the store, and the replay goes on reading until it is caught up. Once
live, an overflow (of the subscriber's budget in events or in bytes) ends the stream with
SUBSCRIBER_LAGGED and the last cursor sent.

Batching (``max_events_per_frame`` N > 1): the events that are ready together go in one
``events`` frame, up to N (and up to ``StreamSettings.frame_bytes``, but at least one event): a
replay page, or live, everything the subscription has buffered when
it takes its turn. Such subscriptions are *paced* (``subscriptions.pacing``): while the event loop
has room a turn comes at once, so a lone event is sent as soon as it is recorded; when the loop is
busy the turns are spaced out (at most the server's hold apart, 50 ms by default) and the commits
recorded meanwhile go out together. A commit's event frames are encoded once, end to end, for every stream with the same
scope and filters (``commit_run``), so a live frame is mostly a join of shared bytes. The cursor
moves past a batch's events only once the batch is handed over, as it does per event frame.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from contextengine.core.errors import ContextEngineError, session_not_found
from contextengine.store import Change, Coordination, LoggedEvent, SessionDeleted
from contextengine.subscriptions.broadcaster import (
    Broadcaster,
    EndReason,
    Subscription,
    SubscriptionEndedError,
)
from contextengine.subscriptions.cursors import check_within
from contextengine.subscriptions.frames import (
    EventFrames,
    caught_up,
    commit_run,
    encode_batch,
    heartbeat,
)
from contextengine.subscriptions.requests import EventsSpec
from contextengine.v1 import subscription_service_pb2 as pb


@dataclass(frozen=True)
class StreamSettings:
    #: changes a subscriber may have waiting before it is ended as lagged
    buffer: int = 1024
    #: bytes of events a subscriber may have waiting before it is ended as lagged (None: no
    #: limit but ``buffer``)
    buffer_bytes: int | None = 32 * 1024 * 1024
    #: events read from the store per replay query
    page_size: int = 500
    #: the largest ``events`` frame in bytes (a frame holds at least one event, whatever its
    #: size): below the 64 MiB a client receives by default, whatever the events' sizes
    frame_bytes: int = 4 * 1024 * 1024
    #: seconds between heartbeats when the request leaves it to the server
    heartbeat_seconds: float = 15.0


#: events in the first replay query; later ones hold as many as the byte budget fits (at most
#: four times the previous page, at most ``page_size``), so a replay of large events holds about
#: the budget in memory, not ``page_size`` of them
FIRST_PAGE = 32
#: events of a replay page measured to size the next one
_SAMPLE = 64


def ended_error(reason: EndReason, cursor: int) -> ContextEngineError:
    """The status that ends a stream whose subscription ended; both are resumable from
    ``cursor``."""
    if reason is EndReason.LAGGED:
        return ContextEngineError(
            "SUBSCRIBER_LAGGED",
            "the subscriber fell too far behind; resubscribe from the cursor in ErrorInfo",
            cursor=cursor,
        )
    return ContextEngineError(
        "SHUTTING_DOWN", "the server is shutting down; resubscribe elsewhere", cursor=cursor
    )


class EventStream:
    """Produces the frames of one subscription (bytes for events, messages otherwise)."""

    def __init__(
        self,
        spec: EventsSpec,
        store: Coordination,
        broadcaster: Broadcaster,
        frames: EventFrames,
        settings: StreamSettings,
    ) -> None:
        self._spec = spec
        self._store = store
        self._broadcaster = broadcaster
        self._frames = frames
        self._settings = settings
        self._subscription: Subscription | None = None
        #: the last cursor sent, or passed over (an event the filters reject)
        self.cursor = spec.after
        #: events per replay query: small at first, then as many as fit the byte budget
        self._limit = min(FIRST_PAGE, settings.page_size)

    def close(self) -> None:
        """Releases the subscription (idempotent; also called when the RPC ends)."""
        if self._subscription is not None:
            self._subscription.close()

    async def frames(self) -> AsyncIterator[Any]:
        try:
            page = await self._start()
            async for frame in self._replay(page):
                yield frame
            yield caught_up(self.cursor)
            # Live: inlined rather than another generator, as every frame passes through here.
            subscription = self._subscription
            assert subscription is not None
            wait = self._spec.heartbeat_seconds
            by_sequence = self._spec.by_sequence
            per_frame = self._spec.max_events_per_frame
            if per_frame > 1:
                async for frame in self._live_batched(subscription, per_frame):
                    yield frame
            while True:
                try:
                    batch = await subscription.next(wait)
                except SubscriptionEndedError as ended:
                    raise ended_error(ended.reason, self.cursor) from None
                if batch is None:
                    yield self._heartbeat(subscription)
                    continue
                for change in batch:
                    if type(change) is not LoggedEvent:
                        if isinstance(change, SessionDeleted):
                            key = change.key
                            raise session_not_found(key.app_name, key.user_id, key.session_id)
                        continue
                    cursor = change.event.sequence if by_sequence else change.position
                    if cursor <= self.cursor:
                        continue
                    self.cursor = cursor
                    yield self._frames.event(change, by_sequence)
        finally:
            self.close()

    def _heartbeat(self, subscription: Subscription) -> pb.SubscribeEventsResponse:
        seen = subscription.last_seen
        if seen is not None:
            # Everything routed here up to `seen` was sent or rejected by filters.
            self.cursor = max(self.cursor, self._cursor_of(seen))
        return pb.SubscribeEventsResponse(heartbeat=heartbeat(self.cursor))

    async def _live_batched(self, subscription: Subscription, per_frame: int) -> AsyncIterator[Any]:
        """The live phase with ``events`` frames of up to ``per_frame`` events; never returns."""
        wait = self._spec.heartbeat_seconds
        by_sequence = self._spec.by_sequence
        frames = self._frames
        event_frame = frames.event
        max_bytes = self._settings.frame_bytes
        while True:
            try:
                batch = await subscription.next(wait)
            except SubscriptionEndedError as ended:
                raise ended_error(ended.reason, self.cursor) from None
            if batch is None:
                yield self._heartbeat(subscription)
                continue
            #: encoded event frames (or runs of them: a whole commit's), ``count`` events
            parts: list[bytes] = []
            count = 0
            size = 0
            #: the cursor of the last event in ``parts`` (else the last one sent)
            cursor = self.cursor
            deleted: SessionDeleted | None = None
            # Everything already buffered, up to a frame's worth (a commit is never split
            # between two takes, but may be between two frames).
            while batch is not None:
                run = commit_run(batch, by_sequence, frames)
                if (
                    run is not None
                    and run.first > cursor
                    and count + run.size <= per_frame
                    and (not parts or size + len(run.frames) <= max_bytes)
                ):
                    # The usual case: the commit's frames, encoded once for all subscribers.
                    parts.append(run.frames)
                    count += run.size
                    size += len(run.frames)
                    cursor = run.last
                else:
                    for change in batch:
                        if type(change) is not LoggedEvent:
                            if isinstance(change, SessionDeleted):
                                deleted = change
                                break
                            continue
                        at = change.event.sequence if by_sequence else change.position
                        if at <= cursor:
                            continue
                        encoded = event_frame(change, by_sequence)
                        if count == per_frame or (parts and size + len(encoded) > max_bytes):
                            yield encode_batch(parts)
                            self.cursor = cursor
                            parts = []
                            count = 0
                            size = 0
                        parts.append(encoded)
                        count += 1
                        size += len(encoded)
                        cursor = at
                if deleted is not None or count >= per_frame or size >= max_bytes:
                    break
                batch = subscription.poll()
            if parts:
                yield encode_batch(parts)
            self.cursor = cursor
            if deleted is not None:
                key = deleted.key
                raise session_not_found(key.app_name, key.user_id, key.session_id)

    def _subscribe(self) -> Subscription:
        self.close()
        matcher = self._spec.matcher
        accept: Callable[[Change], bool]
        if self._spec.by_sequence:
            # Session scope also wants the deletion of its session: the stream ends then.
            def accept(change: Change) -> bool:
                if isinstance(change, LoggedEvent):
                    return matcher.matches(change.event)
                return isinstance(change, SessionDeleted)

        elif matcher.is_everything:

            def accept(change: Change) -> bool:
                return isinstance(change, LoggedEvent)

        else:

            def accept(change: Change) -> bool:
                return isinstance(change, LoggedEvent) and matcher.matches(change.event)

        self._subscription = self._broadcaster.subscribe(
            self._spec.route,
            accept,
            self._settings.buffer,
            capacity_bytes=self._settings.buffer_bytes,
            # Streams with the same scope and filters accept the same changes: one group.
            group=("events", self._spec.by_sequence, matcher),
            paced=self._spec.max_events_per_frame > 1,
        )
        return self._subscription

    def _cursor_of(self, logged: LoggedEvent) -> int:
        return logged.event.sequence if self._spec.by_sequence else logged.position

    def _reader(self) -> Callable[[int], Awaitable[list[LoggedEvent]]]:
        spec, store = self._spec, self._store
        if spec.by_sequence:

            async def read_session(after: int) -> list[LoggedEvent]:
                page, _ = await store.list_logged_events(spec.key, after, self._limit)
                return page

            return read_session
        user_id = spec.user_id or None

        async def read_scope(after: int) -> list[LoggedEvent]:
            return await store.list_events_after_position(
                spec.app_name, user_id, after, self._limit
            )

        return read_scope

    def _next_limit(self, page: list[LoggedEvent]) -> int:
        """The events to ask for next, after reading ``page`` (a full one)."""
        page_size, budget = self._settings.page_size, self._settings.buffer_bytes
        if budget is None:
            return page_size
        # The events of a small page; of a large one, an even sample of about 64: the mean only
        # steers the next page's length, and measuring 500 small events would cost ~10% of
        # sending them.
        sample = page[:: max(1, len(page) // _SAMPLE)]
        per_event = max(1, sum(logged.event.ByteSize() for logged in sample) // len(sample))
        return max(1, min(page_size, 4 * len(page), budget // per_event))

    async def _start(self) -> list[LoggedEvent]:
        """Registers, then checks the session and the cursor; returns the first replay page."""
        self._subscribe()
        spec = self._spec
        if spec.by_sequence:
            page, last = await self._store.list_logged_events(spec.key, spec.after, self._limit)
            check_within(spec.after, last, spec.cursor_field)
            return page
        check_within(spec.after, await self._store.last_position(), spec.cursor_field)
        return await self._reader()(spec.after)

    async def _replay(self, page: list[LoggedEvent]) -> AsyncIterator[Any]:
        read = self._reader()
        matcher = self._spec.matcher
        per_frame = self._spec.max_events_per_frame
        while True:
            if per_frame > 1:
                async for frame in self._replay_batched(page, per_frame):
                    yield frame
            else:
                for logged in page:
                    cursor = self._cursor_of(logged)
                    if cursor <= self.cursor:
                        continue
                    self.cursor = cursor
                    if matcher.matches(logged.event):
                        yield self._frames.event(logged, self._spec.by_sequence)
            if len(page) < self._limit:
                assert self._subscription is not None
                ended = self._subscription.ended
                if ended is None:
                    return
                if ended is EndReason.SHUTDOWN:
                    raise ended_error(ended, self.cursor)
                # Overflowed while replaying: what it missed is in the store; read on.
                self._subscribe()
            else:
                self._limit = self._next_limit(page)
            page = []  # not held while the next one is read
            page = await read(self.cursor)

    async def _replay_batched(self, page: list[LoggedEvent], per_frame: int) -> AsyncIterator[Any]:
        """One replay page as ``events`` frames of up to ``per_frame`` events."""
        matcher = self._spec.matcher
        by_sequence = self._spec.by_sequence
        max_bytes = self._settings.frame_bytes
        pending: list[bytes] = []
        size = 0
        for logged in page:
            cursor = self._cursor_of(logged)
            if cursor <= self.cursor:
                continue
            if matcher.matches(logged.event):
                encoded = self._frames.event(logged, by_sequence)
                if pending and size + len(encoded) > max_bytes:
                    yield encode_batch(pending)
                    pending, size = [], 0
                pending.append(encoded)
                size += len(encoded)
                if len(pending) == per_frame:
                    yield encode_batch(pending)
                    pending, size = [], 0
            self.cursor = cursor
        if pending:
            yield encode_batch(pending)
