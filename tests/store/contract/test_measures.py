"""The ``ContentMeasures`` contract: ``get_content_measures`` / ``put_content_measures`` (the token
measures kept for BuildContext's cold start); on every backend."""

from __future__ import annotations

import pytest

from contextengine.store import EventStore, SessionKey
from contextengine.v1 import event_pb2

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "u", "s")
OTHER = SessionKey("app", "u", "other")
COUNTER = "tiktoken/cl100k_base"

A = b"a" * 16
B = b"b" * 16
C = b"c" * 16


def _event(event_id: str, text: str) -> event_pb2.Event:
    event = event_pb2.Event(id=event_id, author="user", invocation_id="i", timestamp=1.0)
    event.content.role = "user"
    event.content.parts.add().text = text
    return event


async def test_measures_are_kept_per_session_and_counter(store: EventStore) -> None:
    await store.create_session(KEY, {}, 1.0)
    await store.create_session(OTHER, {}, 1.0)
    assert await store.get_content_measures(KEY, COUNTER) == {}
    await store.put_content_measures(KEY, COUNTER, {A: (3, 12), B: (5, 20)})
    await store.put_content_measures(KEY, "chars/4", {A: (4, 16)})
    await store.put_content_measures(OTHER, COUNTER, {C: (1, 4)})
    assert await store.get_content_measures(KEY, COUNTER) == {A: (3, 12), B: (5, 20)}
    assert await store.get_content_measures(KEY, "chars/4") == {A: (4, 16)}
    assert await store.get_content_measures(OTHER, COUNTER) == {C: (1, 4)}
    # A digest already recorded keeps its numbers (equal contents count the same).
    await store.put_content_measures(KEY, COUNTER, {A: (99, 99), C: (2, 8)})
    assert await store.get_content_measures(KEY, COUNTER) == {A: (3, 12), B: (5, 20), C: (2, 8)}


async def test_measures_are_read_by_digest(store: EventStore) -> None:
    await store.create_session(KEY, {}, 1.0)
    await store.create_session(OTHER, {}, 1.0)
    await store.put_content_measures(KEY, COUNTER, {A: (3, 12), B: (5, 20)})
    await store.put_content_measures(KEY, "chars/4", {C: (4, 16)})
    await store.put_content_measures(OTHER, COUNTER, {C: (1, 4)})
    # Only those asked for, of this session and counter; digests nothing was kept for are left
    # out (in any number: more than one query's worth of them too).
    unknown = [bytes([n % 256, n // 256]) * 8 for n in range(1200)]
    assert await store.get_content_measures(KEY, COUNTER, [A, C, *unknown]) == {A: (3, 12)}
    assert await store.get_content_measures(KEY, COUNTER, [*unknown, B]) == {B: (5, 20)}
    assert await store.get_content_measures(KEY, COUNTER, []) == {}
    assert await store.get_content_measures(SessionKey("app", "u", "nobody"), COUNTER, [A]) == {}


async def test_measures_go_with_the_session(store: EventStore) -> None:
    unknown = SessionKey("app", "u", "nobody")
    await store.put_content_measures(unknown, COUNTER, {A: (1, 1)})  # nothing, no error
    assert await store.get_content_measures(unknown, COUNTER) == {}
    await store.create_session(KEY, {}, 1.0)
    await store.append_events(KEY, [_event("e1", "hello")], None)
    await store.put_content_measures(KEY, COUNTER, {A: (3, 12)})
    assert await store.delete_session(KEY)
    assert await store.get_content_measures(KEY, COUNTER) == {}
    await store.create_session(KEY, {}, 1.0)  # made again: starts without measures
    assert await store.get_content_measures(KEY, COUNTER) == {}
