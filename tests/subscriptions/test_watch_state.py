"""WatchSessionState over a real server (memory and SQLite) through the Python client."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.structs import struct_to_dict
from contextengine.v1 import subscription_service_pb2 as spb

from .helpers import APP, SESSION, USER, has_kind, kind, message, take

pytestmark = pytest.mark.service


def delta_of(frame: spb.WatchSessionStateResponse) -> dict[str, Any]:
    return struct_to_dict(frame.delta.delta, "delta")


async def test_snapshot_then_deltas_from_every_scope(client: ContextEngineClient) -> None:
    await client.create_session(
        APP, USER, SESSION, state={"turns": 0, "user:name": "Alice", "app:model": "m1"}
    )
    await client.create_session(APP, USER, "sibling")
    await client.create_session(APP, "bob", "bobs")
    await client.create_session("other-app", USER, SESSION)

    stream = client.watch_session_state(APP, USER, SESSION)
    async with contextlib.aclosing(stream):
        (snapshot,) = await take(stream, has_kind("snapshot"))
        assert struct_to_dict(snapshot.snapshot.state, "state") == {
            "turns": 0,
            "user:name": "Alice",
            "app:model": "m1",
        }
        start = snapshot.snapshot.position

        own = await client.append_event(
            APP, USER, SESSION, message("x", state_delta={"turns": 1, "temp:t": 1, "n": None})
        )
        await client.append_event(  # other user, same app: only app: keys
            APP, "bob", "bobs", message("x", state_delta={"app:model": "m2", "user:name": "Bob"})
        )
        await client.append_event(APP, USER, "sibling", message("no state"))
        await client.append_event(  # same user: user: keys, not its session keys
            APP, USER, "sibling", message("x", state_delta={"user:name": "Al", "mine": 1})
        )
        await client.append_event(  # other app: nothing
            "other-app", USER, SESSION, message("x", state_delta={"app:model": "zz"})
        )
        await client.create_session(APP, USER, "third", state={"user:lang": "fr", "x": 1})
        frames = await take(stream, lambda frames: len(frames) == 4)

    assert [kind(f) for f in frames] == ["delta"] * 4
    assert [delta_of(f) for f in frames] == [
        {"turns": 1, "n": None},
        {"app:model": "m2"},
        {"user:name": "Al"},
        {"user:lang": "fr"},
    ]
    assert [(f.delta.session_id, f.delta.sequence) for f in frames] == [
        (SESSION, own.event.sequence),
        ("bobs", 1),
        ("sibling", 2),
        ("third", 0),  # not an event: the initial state of a new session
    ]
    positions = [f.delta.position for f in frames]
    assert start < positions[0]
    assert positions == sorted(set(positions))


async def test_the_deltas_rebuild_the_state(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION, state={"a": 1})
    stream = client.watch_session_state(APP, USER, SESSION)
    async with contextlib.aclosing(stream):
        (snapshot,) = await take(stream, has_kind("snapshot"))
        state = struct_to_dict(snapshot.snapshot.state, "state")
        for n in range(5):
            await client.append_event(
                APP, USER, SESSION, message("x", state_delta={"a": n, f"k{n}": n, "app:g": n})
            )
        for frame in await take(stream, lambda frames: len(frames) == 5):
            state.update(delta_of(frame))
    stored = await client.get_session(APP, USER, SESSION, num_recent_events=0)
    assert state == struct_to_dict(stored.state, "state")


async def test_heartbeats(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    stream = client.watch_session_state(APP, USER, SESSION, heartbeat_seconds=1)
    async with contextlib.aclosing(stream):
        frames = await take(stream, has_kind("heartbeat"), seconds=5)
    assert [kind(f) for f in frames] == ["snapshot", "heartbeat"]
    assert frames[1].heartbeat.cursor == str(frames[0].snapshot.position)


async def test_deleting_the_session_ends_the_watch(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    stream = client.watch_session_state(APP, USER, SESSION)
    async with contextlib.aclosing(stream):
        await take(stream, has_kind("snapshot"))
        await client.delete_session(APP, USER, SESSION)
        with pytest.raises(ContextEngineError) as info:
            await take(stream, lambda frames: False)
    assert info.value.reason == "SESSION_NOT_FOUND"
