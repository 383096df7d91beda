"""The first BuildContext after a restart: the token measures of the session's contents are kept
in the store (measured at a build, or in the background for events appended to a session in
use) and read back instead of tokenizing the whole history again."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import struct_pb2

from contextengine.core.tokens import default_counter
from contextengine.engine import EngineSettings, open_engine
from contextengine.store import SessionKey
from contextengine.v1 import context_service_pb2 as cpb, event_pb2, session_service_pb2 as spb

pytestmark = pytest.mark.unit

APP, USER, SESSION = "app", "u", "s"
WHERE: dict[str, Any] = {"app_name": APP, "user_id": USER, "session_id": SESSION}
KEY = SessionKey(APP, USER, SESSION)

#: added to every kept token count, so the estimate tells kept counts from fresh ones
SHIFT = 1000


def _event(author: str, invocation: str, role: str, **part: Any) -> event_pb2.Event:
    event = event_pb2.Event(author=author, invocation_id=invocation)
    event.content.role = role
    event.content.parts.add(**part)
    return event


def _call(invocation: str, call_id: str, city: str) -> list[event_pb2.Event]:
    args = struct_pb2.Struct()
    args.update({"units": "metric", "city": city, "days": 3})  # not in sorted order
    response = struct_pb2.Struct()
    response.update({"high": 21, "forecast": f"sunny in {city}"})
    return [
        _event(
            "agent",
            invocation,
            "model",
            function_call={"id": call_id, "name": "get_weather", "args": args},
        ),
        _event(
            "agent",
            invocation,
            "user",
            function_response={"id": call_id, "name": "get_weather", "response": response},
        ),
    ]


def _invocation(index: int, *, other_agent: bool) -> list[event_pb2.Event]:
    invocation = f"i{index}"
    events = [_event("user", invocation, "user", text=f"What is the weather in city {index}?")]
    events += _call(invocation, f"adk-{index}", f"city {index}")
    events.append(_event("agent", invocation, "model", text=f"It is sunny in city {index}."))
    if other_agent:  # framed for "agent" ("For context: ..."): a content no event holds
        events.append(_event("researcher", invocation, "model", text=f"Noted city {index}."))
    return events


def _counted(response: cpb.BuildContextResponse) -> int:
    return sum(default_counter().count_contents(list(response.contents)))


async def test_the_first_build_after_a_restart_uses_the_measures_kept(tmp_path: Path) -> None:
    db = tmp_path / "ce.db"
    settings = EngineSettings(db=str(db))
    request = cpb.BuildContextRequest(**WHERE, agent_name="agent")
    async with await open_engine(settings) as engine:
        await engine.create_session(spb.CreateSessionRequest(**WHERE))
        first = [e for i in range(3) for e in _invocation(i, other_agent=True)]
        await engine.append_events(spb.AppendEventsRequest(**WHERE, events=first))
        built = (await engine.build_context(request)).response()
        assert built.token_estimate.tokens == _counted(built)
        # Appended to a session in use and never built before the restart: measured in the
        # background, as the view emits them (without their adk- call ids).
        later = [e for i in range(3, 6) for e in _invocation(i, other_agent=False)]
        await engine.append_events(spb.AppendEventsRequest(**WHERE, events=later))

    conn = sqlite3.connect(db, isolation_level=None)
    try:
        kept = conn.execute("SELECT COUNT(*) FROM content_measures").fetchone()[0]
        conn.execute("UPDATE content_measures SET tokens = tokens + ?", (SHIFT,))
    finally:
        conn.close()
    assert kept >= len(built.contents)

    async with await open_engine(settings) as engine:
        response = (await engine.build_context(request)).response()
    assert len(response.contents) == len(built.contents) + len(later)
    # Every content's count is a kept one (none was tokenized again), the rest is unchanged.
    assert response.token_estimate.tokens == _counted(response) + SHIFT * len(response.contents)
    assert list(response.contents[: len(built.contents)]) == list(built.contents)


async def test_a_session_made_again_does_not_use_the_old_measures(tmp_path: Path) -> None:
    settings = EngineSettings(db=str(tmp_path / "ce.db"))
    request = cpb.BuildContextRequest(**WHERE, agent_name="agent")
    events = _invocation(0, other_agent=True)
    async with await open_engine(settings) as engine:
        await engine.create_session(spb.CreateSessionRequest(**WHERE))
        await engine.append_events(spb.AppendEventsRequest(**WHERE, events=events))
        await engine.build_context(request)
    async with await open_engine(settings) as engine:
        await engine.delete_session(spb.DeleteSessionRequest(**WHERE))
        await engine.create_session(spb.CreateSessionRequest(**WHERE))
        assert await engine.store.get_content_measures(KEY, default_counter().name) == {}
        await engine.append_events(spb.AppendEventsRequest(**WHERE, events=events))
        response = (await engine.build_context(request)).response()
    assert response.token_estimate.tokens == _counted(response)


def _timed(events: list[event_pb2.Event], start: float) -> list[event_pb2.Event]:
    for offset, event in enumerate(events):
        event.timestamp = start + offset
    return events


async def test_a_compacted_view_reads_only_the_measures_of_its_contents(tmp_path: Path) -> None:
    db = tmp_path / "ce.db"
    settings = EngineSettings(db=str(db))
    request = cpb.BuildContextRequest(**WHERE, agent_name="agent")
    events = _timed([e for i in range(12) for e in _invocation(i, other_agent=False)], 100.0)
    summary = event_pb2.Event(author="user", invocation_id="c", timestamp=events[-1].timestamp + 1)
    summary.actions.compaction.start_timestamp = events[0].timestamp
    summary.actions.compaction.end_timestamp = events[-5].timestamp  # all but the last turn
    summary.actions.compaction.compacted_content.role = "model"
    summary.actions.compaction.compacted_content.parts.add().text = "The weather of 11 cities."
    async with await open_engine(settings) as engine:
        await engine.create_session(spb.CreateSessionRequest(**WHERE))
        await engine.append_events(spb.AppendEventsRequest(**WHERE, events=events[:4]))
        await engine.build_context(request)
        # In use: what is appended now is measured in the background, and kept.
        await engine.append_events(spb.AppendEventsRequest(**WHERE, events=[*events[4:], summary]))
        built = (await engine.build_context(request)).response()
    assert built.token_estimate.tokens == _counted(built)
    assert 4 * len(built.contents) < len(events)  # the view holds a few of the events

    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("UPDATE content_measures SET tokens = tokens + ?", (SHIFT,))
        kept = conn.execute("SELECT COUNT(*) FROM content_measures").fetchone()[0]
    finally:
        conn.close()
    assert kept > len(built.contents)  # the events' contents were measured too

    async with await open_engine(settings) as engine:
        response = (await engine.build_context(request)).response()
        # Only the view's contents' measures were read: those of the hidden events were not.
        counter = (await engine.events.log(KEY)).counter
        assert len(counter) == len({c.SerializeToString() for c in response.contents})
    assert list(response.contents) == list(built.contents)
    assert response.token_estimate.tokens == _counted(response) + SHIFT * len(response.contents)
