"""Keeps recently used sessions' logs in memory and tops them up with what was appended since.

The sidecar is the only writer of its store, but the cache still asks the store for the session's
head (last sequence, creation time) on every use and reads only the events after the cached ones,
so it is never stale: a deleted and re-created session is detected by its creation time. Memory is
bounded by the total number of cached events (least recently used sessions are dropped first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from contextengine.core.context import Item, item_from_event
from contextengine.store import EventFilter, EventStore, SessionKey
from contextengine.v1 import event_pb2

_PAGE = 1000


@dataclass
class _Entry:
    create_time: float
    last_sequence: int = 0
    events: list[event_pb2.Event] = field(default_factory=list)
    #: the context pipeline's per-event facts, parallel to ``events`` (events never change)
    items: list[Item] = field(default_factory=list)
    #: bumped whenever the cached list is replaced rather than extended
    generation: int = 0


@dataclass(frozen=True)
class SessionLog:
    events: list[event_pb2.Event]
    items: list[Item]
    last_sequence: int
    #: changes when the cached log was rebuilt from scratch (views over it must rebuild too)
    generation: int
    #: the session's creation time: a session deleted and created again has another one
    create_time: float


class SessionEventCache:
    def __init__(self, store: EventStore, max_events: int = 500_000) -> None:
        self._store = store
        self._max_events = max_events
        self._entries: OrderedDict[SessionKey, _Entry] = OrderedDict()
        self._cached_events = 0
        self._generations = 0

    async def log(self, key: SessionKey) -> SessionLog:
        """The session's whole log (raises SESSION_NOT_FOUND)."""
        head = await self._store.get_session(key, EventFilter(num_recent_events=0))
        entry = self._entries.get(key)
        if (
            entry is None
            or entry.create_time != head.create_time
            or entry.last_sequence > head.last_sequence
        ):
            self._drop(key)
            self._generations += 1
            entry = _Entry(create_time=head.create_time, generation=self._generations)
            self._entries[key] = entry
        self._entries.move_to_end(key)
        while entry.last_sequence < head.last_sequence:
            page, _ = await self._store.list_events(key, entry.last_sequence, _PAGE)
            if not page:
                break
            # Another caller may have topped the entry up while this one awaited the store:
            # keep only what is still missing, so the list stays one event per sequence.
            fresh = [event for event in page if event.sequence > entry.last_sequence]
            entry.events.extend(fresh)
            entry.items.extend(item_from_event(event) for event in fresh)
            if fresh:
                entry.last_sequence = fresh[-1].sequence
            self._cached_events += len(fresh)
        self._evict(keep=key)
        return SessionLog(
            entry.events, entry.items, entry.last_sequence, entry.generation, entry.create_time
        )

    def invalidate(self, key: SessionKey) -> None:
        self._drop(key)

    def _drop(self, key: SessionKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._cached_events -= len(entry.events)

    def _evict(self, keep: SessionKey) -> None:
        while self._cached_events > self._max_events and len(self._entries) > 1:
            oldest = next(iter(self._entries))
            if oldest == keep:
                self._entries.move_to_end(keep)
                continue
            self._drop(oldest)
