"""What the contract modules share: a session key, events, and short calls of the store."""

from __future__ import annotations

from typing import Any

import pytest

from contextengine.core.errors import ContextEngineError
from contextengine.core.structs import dict_to_struct
from contextengine.store import (
    EventFilter,
    EventStore,
    SessionKey,
    StoredSession,
)
from contextengine.v1 import event_pb2

APP = "app"
KEY = SessionKey(APP, "u1", "s1")


def ev(
    event_id: str,
    *,
    text: str | None = None,
    delta: dict[str, Any] | None = None,
    timestamp: float = 1.0,
    author: str = "user",
    invocation_id: str = "inv-1",
) -> event_pb2.Event:
    event = event_pb2.Event(
        id=event_id, author=author, invocation_id=invocation_id, timestamp=timestamp
    )
    if text is not None:
        event.content.role = "user"
        event.content.parts.add().text = text
    if delta is not None:
        event.actions.state_delta.CopyFrom(dict_to_struct(delta))
    return event


def seqs(events: list[event_pb2.Event]) -> list[int]:
    return [event.sequence for event in events]


def ids(events: list[event_pb2.Event]) -> list[str]:
    return [event.id for event in events]


async def create(
    store: EventStore, key: SessionKey = KEY, state: dict[str, Any] | None = None, now: float = 1.0
) -> StoredSession:
    return await store.create_session(key, state or {}, now)


async def all_events(store: EventStore, key: SessionKey = KEY) -> list[event_pb2.Event]:
    return (await store.get_session(key, EventFilter())).events


async def raises(reason: str, call: Any) -> ContextEngineError:
    with pytest.raises(ContextEngineError) as info:
        await call
    assert info.value.reason == reason
    return info.value
