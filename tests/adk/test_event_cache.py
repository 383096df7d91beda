"""The session service's event cache (``contextengine.adk._event_cache``): a session read again
fetches only the events appended since, and what it returns equals a fresh read (a service that
never read the session) after every kind of change: appends, a rewind, summaries the engine's
compaction wrote, a caller changing the returned session, a delete and re-create, another writer.
Both modes (``backend_mode``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types

from contextengine.adk import (
    Backend,
    ContextEngineSessionService,
    EmbeddedBackend,
    SidecarBackend,
)
from contextengine.adk._event_cache import MAX_SESSIONS
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    session_service_pb2 as spb,
)

pytestmark = pytest.mark.process

USER = "user-1"


class Recording:
    """A backend that records the GetSession requests (to see what was re-read)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.reads: list[spb.GetSessionRequest] = []
        self.returned: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get_session(self, request: spb.GetSessionRequest) -> spb.GetSessionResponse:
        self.reads.append(request)
        response = await self.inner.get_session(request)
        self.returned.append(len(response.session.events))
        return response

    def last_after(self) -> int | None:
        last = self.reads[-1]
        return last.after_sequence if last.HasField("after_sequence") else None


def _event(text: str, author: str = "user", **actions: Any) -> Event:
    return Event(
        author=author,
        invocation_id=f"inv-{text}",
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text)]
        ),
        actions=EventActions(**actions),
    )


def _dump(session: Session | None) -> dict[str, Any]:
    assert session is not None
    return session.model_dump(mode="json")


async def _fresh(backend: Backend, app: str, session_id: str) -> dict[str, Any]:
    """The session as a service that never read it returns it."""
    other = ContextEngineSessionService(backend=backend)
    return _dump(await other.get_session(app_name=app, user_id=USER, session_id=session_id))


async def _cached(
    service: ContextEngineSessionService, app: str, session_id: str
) -> dict[str, Any]:
    return _dump(await service.get_session(app_name=app, user_id=USER, session_id=session_id))


@pytest.fixture
def recording(backend: Backend) -> Recording:
    return Recording(backend)


async def test_a_second_read_fetches_only_what_was_appended(
    recording: Recording, backend: Backend, app_name: str
) -> None:
    service = ContextEngineSessionService(backend=recording)
    session = await service.create_session(app_name=app_name, user_id=USER, state={"k": 1})
    for i in range(5):
        await service.append_event(session, _event(f"q{i}", state_delta={"n": i}))
    first = await _cached(service, app_name, session.id)
    assert recording.last_after() is None
    assert recording.returned[-1] == 5
    again = await service.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    assert again is not None
    assert recording.last_after() == 5
    assert recording.returned[-1] == 0
    assert _dump(again) == first == await _fresh(backend, app_name, session.id)
    await service.append_event(again, _event("q5", author="root"))
    await service.append_event(again, _event("q6", state_delta={"n": 6}))
    after = await _cached(service, app_name, session.id)
    assert recording.last_after() == 5
    assert recording.returned[-1] == 2
    assert after == await _fresh(backend, app_name, session.id)
    assert [e["content"]["parts"][0]["text"] for e in after["events"]][-2:] == ["q5", "q6"]
    assert after["state"]["n"] == 6


async def test_a_filtered_read_is_not_cached_and_leaves_the_cache_alone(
    recording: Recording, backend: Backend, app_name: str
) -> None:
    service = ContextEngineSessionService(backend=recording)
    session = await service.create_session(app_name=app_name, user_id=USER)
    for i in range(4):
        await service.append_event(session, _event(f"q{i}"))
    await _cached(service, app_name, session.id)
    recent = await service.get_session(
        app_name=app_name,
        user_id=USER,
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=2),
    )
    assert recent is not None
    assert len(recent.events) == 2
    assert recording.last_after() is None
    assert await _cached(service, app_name, session.id) == await _fresh(
        backend, app_name, session.id
    )
    assert recording.last_after() == 4


async def test_a_caller_changing_the_returned_session_changes_no_later_read(
    backend: Backend, app_name: str
) -> None:
    service = ContextEngineSessionService(backend=backend)
    session = await service.create_session(app_name=app_name, user_id=USER)
    await service.append_event(session, _event("q0", state_delta={"a": [1, 2]}))
    read = await service.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    assert read is not None
    read.events[0].content.parts[0].text = "changed"  # type: ignore[index, union-attr]
    read.events[0].actions.state_delta["a"].append(3)
    read.events.append(_event("not stored"))
    read.events.pop(0)
    assert await _cached(service, app_name, session.id) == await _fresh(
        backend, app_name, session.id
    )
    again = await service.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    other = await service.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    assert again is not None
    assert other is not None
    assert again.events[0] is not other.events[0]
    assert again.events[0].content is not other.events[0].content


async def test_a_rewind_reads_as_a_fresh_read(
    recording: Recording, backend: Backend, app_name: str
) -> None:
    service = ContextEngineSessionService(backend=recording)
    session = await service.create_session(app_name=app_name, user_id=USER)
    for i in range(3):
        await service.append_event(session, _event(f"q{i}", state_delta={f"k{i}": i}))
    await _cached(service, app_name, session.id)
    await _rewind(backend, app_name, session.id)
    after = await _cached(service, app_name, session.id)
    assert recording.last_after() == 3
    assert recording.returned[-1] == 1
    assert after == await _fresh(backend, app_name, session.id)
    assert after["events"][-1]["actions"]["rewind_before_invocation_id"] == "inv-q1"
    assert after["state"] == {"k0": 0, "k1": None, "k2": None}  # ADK's rewind sets them to None


async def _rewind(backend: Backend, app: str, session_id: str) -> None:
    request = spb.RewindSessionRequest(
        app_name=app, user_id=USER, session_id=session_id, rewind_before_invocation_id="inv-q1"
    )
    if isinstance(backend, SidecarBackend):
        await backend.client().rewind_session(app, USER, session_id, "inv-q1")
    else:
        assert isinstance(backend, EmbeddedBackend)
        await (await backend.engine()).rewind_session(request)


async def test_summaries_the_engine_wrote_read_as_a_fresh_read(
    recording: Recording, backend: Backend, app_name: str
) -> None:
    config = config_pb2.AppConfig(
        app_name=app_name,
        events_compaction_config=config_pb2.EventsCompactionConfig(
            compaction_interval=1, overlap_size=0
        ),
        summarizer=config_pb2.SummarizerConfig(extractive=config_pb2.ExtractiveSummarizerConfig()),
    )
    if isinstance(backend, SidecarBackend):
        await backend.client().update_app_config(config)
    else:
        assert isinstance(backend, EmbeddedBackend)
        await (await backend.engine()).update_app_config(spb.UpdateAppConfigRequest(config=config))
    service = ContextEngineSessionService(backend=recording)
    session = await service.create_session(app_name=app_name, user_id=USER)
    await service.append_event(session, _event("q0"))
    await service.append_event(session, _event("q0", author="root"))
    before = await _cached(service, app_name, session.id)
    await backend.end_invocation(
        kpb.EndInvocationRequest(
            app_name=app_name, user_id=USER, session_id=session.id, invocation_id="inv-q0"
        )
    )
    for _ in range(200):  # the engine compacts in the background after EndInvocation
        after = await _cached(service, app_name, session.id)
        if len(after["events"]) > len(before["events"]):
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("no summary after EndInvocation")
    assert recording.last_after() == 2
    assert after["events"][-1]["actions"]["compaction"] is not None
    assert after == await _fresh(backend, app_name, session.id)


async def test_a_session_deleted_and_made_again_is_read_whole(
    backend: Backend, app_name: str
) -> None:
    service = ContextEngineSessionService(backend=backend)
    other = ContextEngineSessionService(backend=backend)  # deletes behind the first's back
    session = await service.create_session(app_name=app_name, user_id=USER, session_id="s")
    for i in range(3):
        await service.append_event(session, _event(f"old{i}"))
    await _cached(service, app_name, "s")
    await other.delete_session(app_name=app_name, user_id=USER, session_id="s")
    remade = await other.create_session(app_name=app_name, user_id=USER, session_id="s")
    for i in range(4):  # more events than before: the last sequence alone cannot tell
        await other.append_event(remade, _event(f"new{i}"))
    after = await _cached(service, app_name, "s")
    assert [e["content"]["parts"][0]["text"] for e in after["events"]] == [
        f"new{i}" for i in range(4)
    ]
    assert after == await _fresh(backend, app_name, "s")
    await other.delete_session(app_name=app_name, user_id=USER, session_id="s")
    assert await service.get_session(app_name=app_name, user_id=USER, session_id="s") is None
    await service.create_session(app_name=app_name, user_id=USER, session_id="s")
    assert (await _cached(service, app_name, "s"))["events"] == []


async def test_another_writers_appends_are_read(
    recording: Recording, make_backend: Any, backend: Backend, app_name: str
) -> None:
    service = ContextEngineSessionService(backend=recording)
    second = make_backend()
    writer = ContextEngineSessionService(backend=second)
    session = await service.create_session(app_name=app_name, user_id=USER)
    await service.append_event(session, _event("mine"))
    await _cached(service, app_name, session.id)
    theirs = await writer.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    assert theirs is not None
    await writer.append_event(theirs, _event("theirs", author="root", state_delta={"w": 1}))
    after = await _cached(service, app_name, session.id)
    assert recording.last_after() == 1
    assert recording.returned[-1] == 1
    assert after == await _fresh(backend, app_name, session.id)
    assert [e["content"]["parts"][0]["text"] for e in after["events"]] == ["mine", "theirs"]
    if second is not backend:
        await second.aclose()


async def test_the_least_recently_read_session_is_dropped_first(
    recording: Recording, app_name: str
) -> None:
    service = ContextEngineSessionService(backend=recording)
    ids = [f"s{i}" for i in range(MAX_SESSIONS + 1)]
    for session_id in ids:
        await service.create_session(app_name=app_name, user_id=USER, session_id=session_id)
        await service.get_session(app_name=app_name, user_id=USER, session_id=session_id)
    await service.get_session(app_name=app_name, user_id=USER, session_id=ids[-1])
    assert recording.last_after() == 0  # kept
    await service.get_session(app_name=app_name, user_id=USER, session_id=ids[0])
    assert recording.last_after() is None  # dropped: read whole
