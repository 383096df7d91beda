"""Appending a summary event only while the plan it was made from still holds.

A summary is appended only if the log did not move in a way that invalidates its plan: a rewind
or another summary appended after the plan was made, or the session deleted and created again,
discards it (ADK discards a summary whose append conflicts, too). Appends that land between the
check and the summary's own append are caught by the store's sequence check, and the check is
repeated.
"""

from __future__ import annotations

from collections.abc import Callable

from contextengine.core.errors import ContextEngineError
from contextengine.core.events import normalize_for_append
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.store import EventLog, SessionKey
from contextengine.v1 import event_pb2

__all__ = ["append_summary", "invalidated_since"]

#: How many times an append is retried when other appends keep moving the log's end.
_APPEND_ATTEMPTS = 8


def _is_invalidating(event: event_pb2.Event) -> bool:
    return bool(event.actions.rewind_before_invocation_id) or event.actions.HasField("compaction")


def invalidated_since(events: list[event_pb2.Event], based_on: int) -> event_pb2.Event | None:
    """The first event of the log ``events`` after sequence ``based_on`` that invalidates a plan
    made there (a rewind or a summary), if any."""
    for event in events[based_on:]:  # sequences start at 1, without gaps
        if event.sequence > based_on and _is_invalidating(event):
            return event
    return None


async def append_summary(
    store: EventLog,
    events: SessionEventCache,
    key: SessionKey,
    event: event_pb2.Event,
    based_on: int,
    *,
    created: float,
    new_id: Callable[[], str],
) -> event_pb2.Event | None:
    """Appends ``event`` to the session created at ``created`` unless a rewind or a summary was
    appended after ``based_on``, or the session is another one by now (then None)."""
    normalized = normalize_for_append(event, event.id or new_id())
    for _ in range(_APPEND_ATTEMPTS):
        log = await events.log(key)
        if log.create_time != created or invalidated_since(log.events, based_on) is not None:
            return None
        try:
            outcome = await store.append_events(key, [normalized], log.last_sequence)
        except ContextEngineError as error:
            if error.reason == "SEQUENCE_MISMATCH":
                continue
            raise
        return outcome.events[0]
    # The log kept moving under the check: give up rather than append unguarded.
    return None
