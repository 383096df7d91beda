"""Small builders shared by the service tests."""

from __future__ import annotations

from typing import Any, TypedDict

from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, event_pb2


class Owner(TypedDict):
    """A request's app_name and user_id, to pass as keywords (`**owner`) to its constructor."""

    app_name: str
    user_id: str


class SessionRef(Owner):
    """A request's app_name, user_id and session_id, to pass as keywords (`**ref`)."""

    session_id: str


def text_event(
    text: str,
    *,
    author: str = "user",
    invocation_id: str = "inv-1",
    event_id: str = "",
    timestamp: float = 0.0,
    state_delta: dict[str, Any] | None = None,
) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    event = event_pb2.Event(
        author=author,
        invocation_id=invocation_id,
        id=event_id,
        timestamp=timestamp,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )
    if state_delta is not None:
        event.actions.state_delta.CopyFrom(dict_to_struct(state_delta))
    return event
