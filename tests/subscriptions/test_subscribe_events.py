"""SubscribeEvents over a real server (memory and SQLite) through the Python client."""

from __future__ import annotations

import contextlib

import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.transport import ContextEngineServer
from contextengine.v1 import content_pb2, event_pb2, subscription_service_pb2 as spb

from .helpers import APP, SESSION, USER, count_events, has_kind, kind, message, sequences, take

pytestmark = pytest.mark.service


async def test_replay_then_caught_up_then_live(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    recorded = [
        (await client.append_event(APP, USER, SESSION, message(f"m{n}"))).event for n in range(3)
    ]
    async with contextlib.aclosing(client.subscribe_events(APP, USER, SESSION)) as stream:
        replayed = await take(stream, has_kind("caught_up"))
        assert [kind(f) for f in replayed] == ["event"] * 3 + ["caught_up"]
        assert [f.event.event for f in replayed[:3]] == recorded
        assert [f.event.cursor for f in replayed[:3]] == ["1", "2", "3"]
        assert replayed[3].caught_up.cursor == "3"
        first = replayed[0].event
        assert (first.app_name, first.user_id, first.session_id) == (APP, USER, SESSION)
        positions = [f.event.position for f in replayed[:3]]
        assert positions == sorted(set(positions))

        live = [(await client.append_event(APP, USER, SESSION, message("l0"))).event]
        live.append((await client.append_event(APP, USER, SESSION, message("l1"))).event)
        frames = await take(stream, count_events(2))
        assert [f.event.event for f in frames] == live
        assert [f.event.cursor for f in frames] == ["4", "5"]
        assert frames[0].event.position > positions[-1]


async def test_start_after_a_sequence(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    await client.append_events(APP, USER, SESSION, [message(f"m{n}") for n in range(5)])
    async with contextlib.aclosing(client.subscribe_events(APP, USER, SESSION, cursor="3")) as s:
        frames = await take(s, has_kind("caught_up"))
    assert sequences(frames) == [4, 5]
    async with contextlib.aclosing(client.subscribe_events(APP, USER, SESSION, cursor="5")) as s:
        (only,) = await take(s, has_kind("caught_up"))
    assert only.caught_up.cursor == "5"


async def test_an_empty_session_is_caught_up_at_once(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    async with contextlib.aclosing(client.subscribe_events(APP, USER, SESSION)) as stream:
        (frame,) = await take(stream, has_kind("caught_up"))
    assert frame.caught_up.cursor == "0"


async def test_heartbeats_carry_the_cursor(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    await client.append_events(APP, USER, SESSION, [message("a"), message("b")])
    stream = client.subscribe_events(APP, USER, SESSION, heartbeat_seconds=1)
    async with contextlib.aclosing(stream):
        frames = await take(stream, has_kind("heartbeat"), seconds=5)
    beat = frames[-1].heartbeat
    assert beat.cursor == "2"
    assert beat.server_time > 1e9


async def test_filtered_out_events_move_the_heartbeat_cursor(client: ContextEngineClient) -> None:
    """A filtered stream resumes after the events it skipped, not before them."""
    await client.create_session(APP, USER, SESSION)
    stream = client.subscribe_events(APP, USER, SESSION, authors=["planner"], heartbeat_seconds=1)
    async with contextlib.aclosing(stream):
        await take(stream, has_kind("caught_up"))
        await client.append_events(APP, USER, SESSION, [message("a"), message("b")])
        frames = await take(stream, has_kind("heartbeat"), seconds=5)
    assert [kind(f) for f in frames] == ["heartbeat"]
    assert frames[0].heartbeat.cursor == "2"


async def test_filters(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    tool_call = message("calling", author="planner", branch="root.planner")
    tool_call.content.parts.add().function_call.name = "search"
    events = [
        message("hello"),  # 1: user, no branch, message
        message("noted", author="planner", branch="root.planner", state_delta={"k": 1}),  # 2
        tool_call,  # 3
        message("other", author="coder", branch="root.coder"),  # 4
    ]
    await client.append_events(APP, USER, SESSION, events)
    # (authors, branches, kinds, the sequences streamed)
    cases: list[tuple[list[str], list[str], list[spb.EventKind.ValueType], list[int]]] = [
        (["planner"], [], [], [2, 3]),
        ([], [""], [], [1]),
        ([], ["root.coder", "root.planner"], [], [2, 3, 4]),
        (["planner"], ["root.coder"], [], []),
        ([], [], [spb.EVENT_KIND_TOOL_CALL], [3]),
        ([], [], [spb.EVENT_KIND_STATE_CHANGE, spb.EVENT_KIND_TOOL_CALL], [2, 3]),
        (["user"], [], [spb.EVENT_KIND_MESSAGE], [1]),
    ]
    for authors, branches, kinds, expected in cases:
        stream = client.subscribe_events(
            APP, USER, SESSION, authors=authors, branches=branches, kinds=kinds
        )
        async with contextlib.aclosing(stream):
            frames = await take(stream, has_kind("caught_up"))
        assert sequences(frames) == expected, (authors, branches, kinds)
        assert frames[-1].caught_up.cursor == "4"


async def test_engine_appended_events_are_streamed(client: ContextEngineClient) -> None:
    """The rewind events the engine appends itself, and summary events, arrive like any other."""
    await client.create_session(APP, USER, SESSION)
    first = message("first")
    first.invocation_id = "inv-a"
    await client.append_event(APP, USER, SESSION, first)
    kinds = [spb.EVENT_KIND_REWIND, spb.EVENT_KIND_COMPACTION]
    stream = client.subscribe_events(APP, USER, SESSION, kinds=kinds)
    async with contextlib.aclosing(stream):
        await take(stream, has_kind("caught_up"))
        rewind = await client.rewind_session(APP, USER, SESSION, "inv-a")
        summary = event_pb2.Event(
            author="user",
            invocation_id="inv-b",
            content=content_pb2.Content(role="model", parts=[content_pb2.Part(text="summary")]),
        )
        summary.actions.compaction.start_timestamp = 1.0
        summary.actions.compaction.end_timestamp = 2.0
        await client.append_event(APP, USER, SESSION, summary)
        frames = await take(stream, count_events(2))
    assert frames[0].event.event == rewind
    assert frames[0].event.event.actions.rewind_before_invocation_id == "inv-a"
    assert frames[1].event.event.actions.compaction.end_timestamp == 2.0


async def test_deleting_the_session_ends_its_stream(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    stream = client.subscribe_events(APP, USER, SESSION)
    async with contextlib.aclosing(stream):
        await take(stream, has_kind("caught_up"))
        await client.delete_session(APP, USER, SESSION)
        with pytest.raises(ContextEngineError) as info:
            await take(stream, lambda frames: False)
    assert info.value.reason == "SESSION_NOT_FOUND"
    assert info.value.code.name == "NOT_FOUND"


@pytest.mark.parametrize("scope", ["user", "app"])
async def test_user_and_app_scope_follow_sessions_created_later(
    client: ContextEngineClient, server: ContextEngineServer, scope: str
) -> None:
    await client.create_session(APP, USER, "old")
    await client.append_event(APP, USER, "old", message("before"))
    user_id = USER if scope == "user" else ""
    stream = client.subscribe_events(APP, user_id)
    async with contextlib.aclosing(stream):
        replayed = await take(stream, has_kind("caught_up"))
        assert [(f.event.session_id, f.event.event.sequence) for f in replayed[:-1]] == [("old", 1)]
        await client.create_session(APP, USER, "new")
        await client.create_session(APP, "someone-else", "theirs")
        await client.create_session("other-app", USER, "elsewhere")
        await client.append_event("other-app", USER, "elsewhere", message("never"))
        await client.append_event(APP, "someone-else", "theirs", message("maybe"))
        await client.append_event(APP, USER, "new", message("mine"))
        expected = [("new", "mine")] if scope == "user" else [("theirs", "maybe"), ("new", "mine")]
        frames = await take(stream, count_events(len(expected)))
    got = [(f.event.session_id, f.event.event.content.parts[0].text) for f in frames]
    assert got == expected
    cursors = [replayed[0].event.cursor] + [f.event.cursor for f in frames]
    assert cursors == [str(f) for f in sorted(int(c) for c in cursors)]
    assert all(f.event.cursor == str(f.event.position) for f in frames)

    # Resuming from the first cursor gives the rest, and only that.
    async with contextlib.aclosing(client.subscribe_events(APP, user_id, cursor=cursors[0])) as s:
        resumed = await take(s, has_kind("caught_up"))
    assert [f.event.cursor for f in resumed[:-1]] == cursors[1:]
    assert resumed[-1].caught_up.cursor == cursors[-1]
