"""Pure helpers over events: normalization and payload equality for idempotent appends."""

from __future__ import annotations

from contextengine.core.state import TEMP_PREFIX
from contextengine.v1 import event_pb2


def payload_bytes(event: event_pb2.Event, *, ignore_timestamp: bool = False) -> bytes:
    """Deterministic bytes of what a client sent: the event without its server-assigned sequence
    and context edits (and without its timestamp when ``ignore_timestamp``)."""
    copy = event_pb2.Event()
    copy.CopyFrom(event)
    copy.sequence = 0
    del copy.context_edits[:]
    if ignore_timestamp:
        copy.timestamp = 0.0
    return copy.SerializeToString(deterministic=True)


def same_payload(incoming: event_pb2.Event, recorded: event_pb2.Event) -> bool:
    """True when re-appending ``incoming`` is a replay of ``recorded``.

    A zero timestamp on ``incoming`` means "server clock", so it matches any recorded timestamp.
    """
    ignore_ts = incoming.timestamp == 0.0
    return payload_bytes(incoming, ignore_timestamp=ignore_ts) == payload_bytes(
        recorded, ignore_timestamp=ignore_ts
    )


def normalize_for_append(event: event_pb2.Event, new_id: str) -> event_pb2.Event:
    """The event as it will be stored: a copy with no sequence, an id (``new_id`` when it had
    none), ``temp:`` keys removed from the state delta and long-running ids sorted and unique.
    A zero timestamp stays zero: the store stamps it with its clock."""
    out = event_pb2.Event()
    out.CopyFrom(event)
    out.sequence = 0
    if not out.id:
        out.id = new_id
    if out.actions.HasField("state_delta"):
        fields = out.actions.state_delta.fields
        for key in [k for k in fields if k.startswith(TEMP_PREFIX)]:
            del fields[key]
    if out.long_running_tool_ids:
        ids = sorted(set(out.long_running_tool_ids))
        del out.long_running_tool_ids[:]
        out.long_running_tool_ids.extend(ids)
    return out
