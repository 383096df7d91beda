"""The state delta of a rewind (google-adk's ``compute_state_delta_for_rewind``), pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextengine.core.state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX
from contextengine.core.structs import struct_to_dict
from contextengine.v1 import event_pb2

_SCOPED = (APP_PREFIX, USER_PREFIX, TEMP_PREFIX)


def first_index_of_invocation(events: Sequence[event_pb2.Event], invocation_id: str) -> int | None:
    """Index of the first event of ``invocation_id`` in log order, or None."""
    for index, event in enumerate(events):
        if event.invocation_id == invocation_id:
            return index
    return None


def session_state_before(events: Sequence[event_pb2.Event], index: int) -> dict[str, Any]:
    """Session-scope state as the deltas of ``events[:index]`` leave it, where a null value
    removes the key (app:, user: and temp: keys are not session state)."""
    state: dict[str, Any] = {}
    for event in events[:index]:
        if not event.actions.HasField("state_delta"):
            continue
        delta = struct_to_dict(event.actions.state_delta, "state_delta")
        for key, value in delta.items():
            if key.startswith(_SCOPED):
                continue
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value
    return state


def rewind_state_delta(
    current_state: Mapping[str, Any], state_at_rewind_point: Mapping[str, Any]
) -> dict[str, Any]:
    """The delta that turns the session-scope part of ``current_state`` back into
    ``state_at_rewind_point``: changed or missing keys get their old value; session keys added
    since get null (ADK never deletes a key, it nulls it)."""
    delta: dict[str, Any] = {
        key: old
        for key, old in state_at_rewind_point.items()
        if key not in current_state or current_state[key] != old
    }
    for key in current_state:
        if key.startswith(_SCOPED):
            continue
        if key not in state_at_rewind_point:
            delta[key] = None
    return delta
