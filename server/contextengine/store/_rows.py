"""How values are laid out in rows, by the SQLite and the PostgreSQL store alike: JSON state text
and event rows."""

from __future__ import annotations

import json
from typing import Any

from contextengine.core.state import JsonObject
from contextengine.v1 import event_pb2

#: column order of ``event_row``, for ``INSERT INTO events``
EVENT_COLUMNS = "session, sequence, event_id, invocation_id, author, timestamp, is_compaction, data"


def dump_state(state: JsonObject) -> str:
    return json.dumps(state, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def load_state(text: str | None) -> JsonObject:
    """A state column; NULL (no row for that scope) is the empty state."""
    if text is None:
        return {}
    state = json.loads(text)
    if not isinstance(state, dict):
        raise ValueError("a state column does not hold a JSON object")
    return state


def event_row(session_pk: int, event: event_pb2.Event) -> tuple[Any, ...]:
    return (
        session_pk,
        event.sequence,
        event.id,
        event.invocation_id,
        event.author,
        event.timestamp,
        int(event.actions.HasField("compaction")),
        event.SerializeToString(deterministic=True),
    )


def load_event(data: bytes) -> event_pb2.Event:
    return event_pb2.Event.FromString(data)
