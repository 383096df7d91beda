"""One ``WatchSessionState`` stream: a snapshot of the merged state, then one delta per change.

As for event streams, the subscription is registered before the snapshot is read. The snapshot
says which position it reflects; buffered changes at or before it are already in it and are
skipped, later ones are sent as deltas in commit order. A watch has no cursor to resume from: a
watcher that reconnects gets a fresh snapshot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

from google.protobuf import struct_pb2

from contextengine.core.errors import session_not_found
from contextengine.core.structs import dict_to_struct
from contextengine.store import Change, Coordination, LoggedEvent, SessionCreated, SessionDeleted
from contextengine.subscriptions.broadcaster import (
    Broadcaster,
    Subscription,
    SubscriptionEndedError,
    app_route,
)
from contextengine.subscriptions.event_stream import StreamSettings, ended_error
from contextengine.subscriptions.frames import heartbeat
from contextengine.subscriptions.requests import WatchSpec
from contextengine.subscriptions.state_watch import changed_keys, concerns
from contextengine.v1 import subscription_service_pb2 as pb


def delta_frame(change: Change, keys: list[str]) -> pb.WatchSessionStateResponse | None:
    """The delta of ``keys`` set by ``change`` (None for a change that sets nothing)."""
    if not keys:
        return None
    delta = struct_pb2.Struct()
    if isinstance(change, LoggedEvent):
        fields = change.event.actions.state_delta.fields
        for key in keys:
            delta.fields[key].CopyFrom(fields[key])
        sequence = change.event.sequence
    elif isinstance(change, SessionCreated):
        delta = dict_to_struct({key: change.shared_state[key] for key in keys})
        sequence = 0  # not an event: the initial state of a new session
    else:
        return None
    return pb.WatchSessionStateResponse(
        delta=pb.StateDelta(
            delta=delta,
            session_id=change.key.session_id,
            sequence=sequence,
            position=change.position,
        )
    )


class StateStream:
    """Produces the frames of one state watch."""

    def __init__(
        self,
        spec: WatchSpec,
        store: Coordination,
        broadcaster: Broadcaster,
        settings: StreamSettings,
    ) -> None:
        self._spec = spec
        self._store = store
        self._broadcaster = broadcaster
        self._settings = settings
        self._subscription: Subscription | None = None

    def close(self) -> None:
        """Releases the subscription (idempotent; also called when the RPC ends)."""
        if self._subscription is not None:
            self._subscription.close()

    async def frames(self) -> AsyncIterator[pb.WatchSessionStateResponse]:
        watched = self._spec.key
        subscription = self._broadcaster.subscribe(
            app_route(watched.app_name),
            partial(concerns, watched),
            self._settings.buffer,
            capacity_bytes=self._settings.buffer_bytes,
        )
        self._subscription = subscription
        try:
            snapshot = await self._store.get_state(watched)
            position = snapshot.position
            yield pb.WatchSessionStateResponse(
                snapshot=pb.StateSnapshot(state=dict_to_struct(snapshot.state), position=position)
            )
            while True:
                try:
                    batch = await subscription.next(self._spec.heartbeat_seconds)
                except SubscriptionEndedError as ended:
                    raise ended_error(ended.reason, position) from None
                if batch is None:
                    seen = subscription.last_seen
                    if seen is not None:
                        position = max(position, seen.position)
                    yield pb.WatchSessionStateResponse(heartbeat=heartbeat(position))
                    continue
                for change in batch:
                    if isinstance(change, SessionDeleted):
                        raise session_not_found(
                            watched.app_name, watched.user_id, watched.session_id
                        )
                    if change.position <= position:
                        continue  # already in the snapshot
                    position = change.position
                    frame = delta_frame(change, changed_keys(watched, change))
                    if frame is not None:
                        yield frame
        finally:
            self.close()
