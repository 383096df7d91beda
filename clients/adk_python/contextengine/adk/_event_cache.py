"""The converted events of the sessions a session service read last, so that reading a session
again (ADK's ``Runner`` reads the whole session at every invocation) fetches and converts only
the events appended since (``GetSession`` with ``after_sequence``).

Sound because a session's log is append-only: an event keeps its sequence and content forever
(rewinds and compaction summaries are new events, another writer's events are new events). A
session deleted and made again under the same id is told apart by its ``create_time`` (or a
``last_sequence`` below the kept one) and read whole. Every read returns deep copies (ADK changes
the session and may change the events it is given), and at most :data:`MAX_SESSIONS` sessions are
kept, the least recently read dropped first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from google.adk.events.event import Event

from contextengine.adk._convert import event_from_proto
from contextengine.v1 import session_pb2

__all__ = ["MAX_SESSIONS", "EventCache", "Kept"]

#: sessions kept (each with all its events)
MAX_SESSIONS = 16

_Key = tuple[str, str, str]


@dataclass(frozen=True)
class Kept:
    """What is kept of a session: its incarnation (``create_time``) and its last sequence."""

    create_time: float
    last_sequence: int


@dataclass
class _Entry:
    kept: Kept
    events: list[Event]


class EventCache:
    """See the module documentation. Not shared between services: each keeps its own."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._max = max_sessions
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()

    def get(self, key: _Key) -> Kept | None:
        """What is kept of the session ``key`` (app, user, session id), if anything."""
        entry = self._entries.get(key)
        return entry.kept if entry is not None else None

    def update(
        self, key: _Key, message: session_pb2.Session, after: Kept | None
    ) -> list[Event] | None:
        """Adds the events of ``message`` (read whole when ``after`` is None, else with
        ``after_sequence=after.last_sequence``) and returns copies of every event of the session;
        None when ``message`` is not the session kept (deleted and made again meanwhile: the
        caller reads it whole)."""
        entry = self._entries.pop(key, None)
        if after is None:
            events = [event_from_proto(event) for event in message.events]
        else:
            if (
                entry is None
                or entry.kept.create_time != message.create_time
                or entry.kept.last_sequence < after.last_sequence
                or message.last_sequence < entry.kept.last_sequence
            ):
                return None
            # another read of this service may have added some of these events meanwhile
            last = entry.kept.last_sequence
            events = entry.events
            events.extend(
                event_from_proto(event) for event in message.events if event.sequence > last
            )
        self._entries[key] = _Entry(Kept(message.create_time, message.last_sequence), events)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return [event.model_copy(deep=True) for event in events]

    def delete(self, key: _Key) -> None:
        """Forgets the session ``key``."""
        self._entries.pop(key, None)
