"""RewindSession: ADK's rewind event and state restoration, over gRPC."""

from __future__ import annotations

import grpc
import pytest
from google.adk.events.event import Event as AdkEvent
from google.adk.events.event_actions import EventActions
from google.adk.sessions._rewind_utils import compute_state_delta_for_rewind
from google.adk.sessions.in_memory_session_service import InMemorySessionService

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.structs import struct_to_dict
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

APP = "app"

# (invocation, state delta) per event, in log order
SCRIPT: list[tuple[str, dict[str, object]]] = [
    ("i1", {"a": 1, "user:u": 1}),
    ("i1", {"b": "x"}),
    ("i2", {"a": 2, "c": [1, 2], "app:g": True}),
    ("i3", {"b": None, "d": {"k": "v"}}),
    ("i3", {"temp:t": 1, "e": 5}),
]


async def _adk_delta(initial: dict[str, object], target: str) -> dict[str, object]:
    service = InMemorySessionService()
    session = await service.create_session(app_name=APP, user_id="u1", state=dict(initial))
    for i, (inv, delta) in enumerate(SCRIPT):
        event = AdkEvent(
            author="agent",
            invocation_id=inv,
            timestamp=float(i + 1),
            actions=EventActions(state_delta=dict(delta)),
        )
        await service.append_event(session, event)
    index = next(i for i, e in enumerate(session.events) if e.invocation_id == target)
    return await compute_state_delta_for_rewind(session, index)


@pytest.mark.parametrize("target", ["i1", "i2", "i3"])
async def test_rewind_matches_adk(client: ContextEngineClient, target: str) -> None:
    initial = {"a": 0, "keep": "me", "app:x": 1}
    await client.create_session(APP, "u1", "s1", state=initial)
    for i, (inv, delta) in enumerate(SCRIPT):
        await client.append_event(
            APP,
            "u1",
            "s1",
            text_event(
                "m", author="agent", invocation_id=inv, timestamp=float(i + 1), state_delta=delta
            ),
        )
    rewind = await client.rewind_session(APP, "u1", "s1", target)
    assert rewind.author == "user"
    assert rewind.invocation_id.startswith("e-")
    assert rewind.actions.rewind_before_invocation_id == target
    assert rewind.sequence == len(SCRIPT) + 1
    ours = struct_to_dict(rewind.actions.state_delta, "d")
    assert ours == await _adk_delta(initial, target)
    session = await client.get_session(APP, "u1", "s1")
    state = struct_to_dict(session.state, "s")
    for key, value in ours.items():
        assert state[key] == value


async def test_rewind_unknown_invocation(client: ContextEngineClient) -> None:
    await client.create_session(APP, "u1", "s1")
    await client.append_event(APP, "u1", "s1", text_event("hi", invocation_id="i1"))
    with pytest.raises(ContextEngineError) as err:
        await client.rewind_session(APP, "u1", "s1", "nope")
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    assert err.value.reason == "INVOCATION_NOT_FOUND"
    assert err.value.metadata == {"invocation_id": "nope"}
    with pytest.raises(ContextEngineError) as err:
        await client.rewind_session(APP, "u1", "s1", "")
    assert err.value.reason == "MISSING_FIELD"
    with pytest.raises(ContextEngineError) as err:
        await client.rewind_session(APP, "u1", "missing", "i1")
    assert err.value.reason == "SESSION_NOT_FOUND"
    assert (await client.get_session(APP, "u1", "s1")).last_sequence == 1
