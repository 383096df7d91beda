"""SessionService over a real gRPC server: sessions, state scopes, listing, deletion."""

from __future__ import annotations

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.structs import struct_to_dict
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

APP = "app"


async def test_create_get_with_scoped_state(client: ContextEngineClient) -> None:
    session = await client.create_session(
        APP, "u1", "s1", state={"k": 1, "app:theme": "dark", "user:lang": "fr", "temp:x": 9}
    )
    assert session.id == "s1"
    assert struct_to_dict(session.state, "s") == {"k": 1, "app:theme": "dark", "user:lang": "fr"}
    assert session.last_sequence == 0
    assert session.create_time > 0
    # app: state is shared with every user of the app, user: with the user's other sessions.
    other_user = await client.create_session(APP, "u2", "s2")
    assert struct_to_dict(other_user.state, "s") == {"app:theme": "dark"}
    same_user = await client.create_session(APP, "u1", "s3")
    assert struct_to_dict(same_user.state, "s") == {"app:theme": "dark", "user:lang": "fr"}


async def test_generated_session_id(client: ContextEngineClient) -> None:
    session = await client.create_session(APP, "u1")
    assert len(session.id) == 36
    fetched = await client.get_session(APP, "u1", session.id)
    assert fetched.id == session.id


async def test_duplicate_create_is_already_exists(client: ContextEngineClient) -> None:
    await client.create_session(APP, "u1", "dup")
    with pytest.raises(ContextEngineError) as err:
        await client.create_session(APP, "u1", "dup")
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert err.value.reason == "SESSION_ALREADY_EXISTS"


async def test_unknown_session_is_not_found(client: ContextEngineClient) -> None:
    with pytest.raises(ContextEngineError) as err:
        await client.get_session(APP, "u1", "nope")
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    assert err.value.reason == "SESSION_NOT_FOUND"
    assert err.value.metadata == {"app_name": APP, "user_id": "u1", "session_id": "nope"}


async def test_state_delta_applied_by_scope(client: ContextEngineClient) -> None:
    await client.create_session(APP, "u1", "s1")
    await client.create_session(APP, "u1", "s2")
    await client.append_event(
        APP,
        "u1",
        "s1",
        text_event("hi", state_delta={"a": 1, "app:b": 2, "user:c": 3, "temp:d": 4, "n": None}),
    )
    s1 = await client.get_session(APP, "u1", "s1")
    assert struct_to_dict(s1.state, "s") == {"a": 1, "n": None, "app:b": 2, "user:c": 3}
    # temp: keys never reach storage, not even inside the recorded event.
    assert "temp:d" not in s1.events[0].actions.state_delta.fields
    s2 = await client.get_session(APP, "u1", "s2")
    assert struct_to_dict(s2.state, "s") == {"app:b": 2, "user:c": 3}


async def test_get_session_filters(client: ContextEngineClient) -> None:
    await client.create_session(APP, "u1", "s1")
    for i in range(1, 6):
        await client.append_event(APP, "u1", "s1", text_event(f"m{i}", timestamp=float(i)))
    full = await client.get_session(APP, "u1", "s1")
    assert [e.sequence for e in full.events] == [1, 2, 3, 4, 5]
    assert full.last_update_time == 5.0
    recent = await client.get_session(APP, "u1", "s1", num_recent_events=2)
    assert [e.sequence for e in recent.events] == [4, 5]
    none = await client.get_session(APP, "u1", "s1", num_recent_events=0)
    assert list(none.events) == []
    assert none.last_sequence == 5
    after_ts = await client.get_session(APP, "u1", "s1", after_timestamp=3.0)
    assert [e.sequence for e in after_ts.events] == [3, 4, 5]
    after_seq = await client.get_session(APP, "u1", "s1", after_sequence=3, num_recent_events=1)
    assert [e.sequence for e in after_seq.events] == [5]


async def test_list_sessions_paginates(client: ContextEngineClient) -> None:
    for user in ("u1", "u2"):
        for i in range(5):
            await client.create_session(APP, user, f"s{i}", state={"user:x": user})
    await client.create_session("other-app", "u1", "z")
    everyone = [s async for s in client.list_sessions(APP, page_size=3)]
    assert [(s.user_id, s.id) for s in everyone] == [
        (u, f"s{i}") for u in ("u1", "u2") for i in range(5)
    ]
    assert all(len(s.events) == 0 for s in everyone)
    assert struct_to_dict(everyone[-1].state, "s") == {"user:x": "u2"}
    only_u2 = [s.id async for s in client.list_sessions(APP, "u2", page_size=2)]
    assert only_u2 == [f"s{i}" for i in range(5)]


async def test_delete_session(client: ContextEngineClient) -> None:
    await client.create_session(APP, "u1", "s1", state={"app:keep": True})
    await client.append_event(APP, "u1", "s1", text_event("hello"))
    assert await client.delete_session(APP, "u1", "s1") is True
    with pytest.raises(ContextEngineError) as err:
        await client.get_session(APP, "u1", "s1")
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(ContextEngineError) as err:
        await client.delete_session(APP, "u1", "s1")
    assert err.value.reason == "SESSION_NOT_FOUND"
    assert await client.delete_session(APP, "u1", "s1", allow_missing=True) is False
    again = await client.create_session(APP, "u1", "s1")
    assert again.last_sequence == 0
    assert struct_to_dict(again.state, "s") == {"app:keep": True}
