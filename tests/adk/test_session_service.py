"""``ContextEngineSessionService`` against ADK's own expectations of a session service.

Every test runs on four services: the drop-in in both modes (``sidecar``: a real sidecar out of
process; ``embedded``: the engine in process on a SQLite file) and ADK's own
``InMemorySessionService`` and ``SqliteSessionService`` as the reference, so each expectation is
checked on ADK itself too. Where ADK's two services disagree the drop-in follows the SQLite one;
the tests that show a disagreement say so in their docstring (``REFERENCE_DIFFERS``).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.adk.apps.app import App
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.platform import uuid as platform_uuid
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from contextengine.adk import (
    Backend,
    ContextEngineSessionService,
    embedded_backend,
    sidecar_backend,
)
from contextengine.client import ContextEngineError
from tests.adk.differential import quiet_adk
from tests.adk.scripted import (
    ScriptedLlm,
    build_agents,
    deterministic_adk,
    fixed_script,
    run_conversation,
)
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.process

KINDS = ("sidecar", "embedded", "adk-memory", "adk-sqlite")
OURS = ("sidecar", "embedded")


class Services:
    """Makes services of one kind over ONE store (a second service is "another process")."""

    def __init__(self, kind: str, target: str, tmp_path: Path) -> None:
        self.kind = kind
        self._target = target
        self._tmp = tmp_path
        self._made: list[BaseSessionService] = []
        self._backends: list[Backend] = []
        self._memory = InMemorySessionService()

    def make(self) -> BaseSessionService:
        service: BaseSessionService
        if self.kind == "sidecar":
            backend = sidecar_backend(self._target, attempts=2)
            self._backends.append(backend)
            service = ContextEngineSessionService(backend=backend)
        elif self.kind == "embedded":
            if not self._backends:  # one process opens a SQLite file once: share its engine
                self._backends.append(embedded_backend(str(self._tmp / "engine.db")))
            service = ContextEngineSessionService(backend=self._backends[0])
        elif self.kind == "adk-memory":
            service = self._memory  # in-memory storage lives in the object: the same one
        else:
            service = SqliteSessionService(str(self._tmp / "adk.db"))
        self._made.append(service)
        return service

    async def close(self) -> None:
        for service in self._made:
            if isinstance(service, SqliteSessionService):
                await service.close()
        for backend in self._backends:
            await backend.aclose()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Which service: the drop-in in either mode, or one of ADK's (tests of the drop-in only
    parametrize ``kind`` over ``OURS``)."""
    return str(request.param)


@pytest.fixture
def target(kind: str, request: pytest.FixtureRequest) -> str:
    """The shared sidecar's address for ``sidecar`` (started here, outside the test's loop)."""
    if kind != "sidecar":
        return ""
    sidecar: Sidecar = request.getfixturevalue("adk_sidecar")
    return sidecar.target


@pytest.fixture
async def services(kind: str, target: str, tmp_path: Path) -> AsyncIterator[Services]:
    made = Services(kind, target, tmp_path)
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
def service(services: Services) -> BaseSessionService:
    return services.make()


def _event(
    author: str = "user",
    text: str = "hello",
    *,
    delta: dict[str, Any] | None = None,
    timestamp: float | None = None,
    partial: bool | None = None,
) -> Event:
    event = Event(
        author=author,
        invocation_id="inv-1",
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text)]
        ),
        actions=EventActions(state_delta=delta or {}),
        partial=partial,
    )
    if timestamp is not None:
        event.timestamp = timestamp
    return event


# --------------------------------------------------------------------------- create and get


async def test_create_with_an_id_and_get_it_back(
    service: BaseSessionService, app_name: str
) -> None:
    created = await service.create_session(
        app_name=app_name, user_id="u1", session_id="s-1", state={"k": "v", "n": 3}
    )
    assert (created.id, created.app_name, created.user_id) == ("s-1", app_name, "u1")
    assert created.state == {"k": "v", "n": 3}
    assert created.events == []
    assert created.last_update_time > 0
    got = await service.get_session(app_name=app_name, user_id="u1", session_id="s-1")
    assert got == created


async def test_create_without_an_id_makes_one(service: BaseSessionService, app_name: str) -> None:
    first = await service.create_session(app_name=app_name, user_id="u1")
    second = await service.create_session(app_name=app_name, user_id="u1", session_id="")
    assert first.id
    assert second.id
    assert first.id != second.id
    got = await service.get_session(app_name=app_name, user_id="u1", session_id=first.id)
    assert got is not None
    assert got.id == first.id


async def test_a_made_id_comes_from_adks_id_provider(
    service: BaseSessionService, app_name: str
) -> None:
    platform_uuid.set_id_provider(lambda: "made-by-adk")
    try:
        created = await service.create_session(app_name=app_name, user_id="u1")
    finally:
        platform_uuid.reset_id_provider()
    assert created.id == "made-by-adk"


async def test_ids_are_stripped(service: BaseSessionService, app_name: str) -> None:
    created = await service.create_session(app_name=app_name, user_id="u1", session_id="  s-2 ")
    assert created.id == "s-2"
    got = await service.get_session(app_name=app_name, user_id="u1", session_id=" s-2")
    assert got is not None
    assert got.id == "s-2"


async def test_an_id_in_use_is_already_exists(service: BaseSessionService, app_name: str) -> None:
    await service.create_session(app_name=app_name, user_id="u1", session_id="dup")
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=app_name, user_id="u1", session_id="dup")
    # the same id for another user is another session
    other = await service.create_session(app_name=app_name, user_id="u2", session_id="dup")
    assert other.user_id == "u2"


async def test_a_missing_session_is_none(service: BaseSessionService, app_name: str) -> None:
    assert await service.get_session(app_name=app_name, user_id="u1", session_id="nope") is None
    await service.create_session(app_name=app_name, user_id="u1", session_id="s")
    assert await service.get_session(app_name=app_name, user_id="u2", session_id="s") is None
    assert await service.get_session(app_name=f"{app_name}-x", user_id="u1", session_id="s") is None


@pytest.mark.parametrize("session_id", ["", "a\x00b", "x" * 300])
async def test_an_id_no_session_can_have_is_a_missing_session(
    service: BaseSessionService, app_name: str, session_id: str
) -> None:
    assert await service.get_session(app_name=app_name, user_id="u1", session_id=session_id) is None
    await service.delete_session(app_name=app_name, user_id="u1", session_id=session_id)


async def test_ids_follow_the_engines_rule(
    service: BaseSessionService, services: Services, app_name: str
) -> None:
    """REFERENCE_DIFFERS: ADK's services take any id; the engine's are at most 256 characters
    without control characters, and the drop-in raises its INVALID_ID for another."""
    long_id = "x" * 257
    if services.kind in OURS:
        with pytest.raises(ContextEngineError) as caught:
            await service.create_session(app_name=app_name, user_id="u1", session_id=long_id)
        assert caught.value.reason == "INVALID_ID"
    else:
        created = await service.create_session(app_name=app_name, user_id="u1", session_id=long_id)
        assert created.id == long_id
    made = await service.create_session(app_name=app_name, user_id="u1", session_id="x" * 256)
    assert made.id == "x" * 256


# --------------------------------------------------------------------------- state scopes


async def test_state_scopes_across_sessions_users_and_apps(
    service: BaseSessionService, app_name: str
) -> None:
    state = {"app:a": 1, "user:u": "x", "s": True, "temp:t": 4}
    s1 = await service.create_session(app_name=app_name, user_id="u1", state=state)
    assert s1.state == {"app:a": 1, "user:u": "x", "s": True}
    s2 = await service.create_session(app_name=app_name, user_id="u1")
    assert s2.state == {"app:a": 1, "user:u": "x"}
    s3 = await service.create_session(app_name=app_name, user_id="u2")
    assert s3.state == {"app:a": 1}
    other_app = await service.create_session(app_name=f"{app_name}-other", user_id="u1")
    assert other_app.state == {}
    assert await service.get_user_state(app_name=app_name, user_id="u1") == {"u": "x"}
    assert await service.get_user_state(app_name=app_name, user_id="nobody") == {}

    # an event's delta reaches every session of its scope
    await service.append_event(s2, _event(delta={"app:a": 2, "user:v": [1, 2.5], "own": None}))
    got1 = await service.get_session(app_name=app_name, user_id="u1", session_id=s1.id)
    got3 = await service.get_session(app_name=app_name, user_id="u2", session_id=s3.id)
    assert got1 is not None
    assert got3 is not None
    assert got1.state == {"app:a": 2, "user:u": "x", "user:v": [1, 2.5], "s": True}
    assert got3.state == {"app:a": 2}
    got2 = await service.get_session(app_name=app_name, user_id="u1", session_id=s2.id)
    assert got2 is not None
    assert got2.state == {"app:a": 2, "user:u": "x", "user:v": [1, 2.5], "own": None}
    assert await service.get_user_state(app_name=app_name, user_id="u1") == {
        "u": "x",
        "v": [1, 2.5],
    }


async def test_temp_keys_live_in_the_session_object_only(
    service: BaseSessionService, app_name: str
) -> None:
    session = await service.create_session(app_name=app_name, user_id="u1")
    event = _event(delta={"temp:scratch": "t", "kept": 1})
    returned = await service.append_event(session, event)
    assert session.state == {"temp:scratch": "t", "kept": 1}
    assert returned.actions.state_delta == {"kept": 1}
    assert event.actions.state_delta == {"kept": 1}  # trimmed in place, as ADK's base does
    assert session.events[-1] is returned
    got = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got is not None
    assert got.state == {"kept": 1}
    assert got.events[0].actions.state_delta == {"kept": 1}


async def test_append_keeps_the_event_and_updates_the_session(
    service: BaseSessionService, app_name: str
) -> None:
    session = await service.create_session(app_name=app_name, user_id="u1")
    event = _event(delta={"k": {"nested": [1, "two"]}}, timestamp=session.last_update_time + 5)
    returned = await service.append_event(session, event)
    assert returned is event
    assert session.last_update_time == event.timestamp
    assert session.events == [event]
    got = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got == session
    assert got is not None
    assert got.events[0].id == event.id
    assert got.events[0].timestamp == event.timestamp


async def test_a_partial_event_is_returned_untouched_and_not_stored(
    service: BaseSessionService, app_name: str
) -> None:
    session = await service.create_session(app_name=app_name, user_id="u1")
    event = _event(delta={"temp:x": 1, "k": 2}, partial=True)
    before = event.model_copy(deep=True)
    assert await service.append_event(session, event) is event
    assert event == before
    assert session.events == []
    assert session.state == {}
    got = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got is not None
    assert got.events == []
    assert got.state == {}


# --------------------------------------------------------------------------- get filters


async def test_get_session_config_filters_events(
    service: BaseSessionService, app_name: str
) -> None:
    session = await service.create_session(app_name=app_name, user_id="u1")
    start = session.last_update_time
    events = [_event(text=f"m{i}", timestamp=start + 1 + i) for i in range(5)]
    for event in events:
        await service.append_event(session, event)

    async def texts(config: GetSessionConfig | None) -> list[str]:
        got = await service.get_session(
            app_name=app_name, user_id="u1", session_id=session.id, config=config
        )
        assert got is not None
        return [e.content.parts[0].text or "" for e in got.events if e.content and e.content.parts]

    assert await texts(None) == ["m0", "m1", "m2", "m3", "m4"]
    assert await texts(GetSessionConfig()) == ["m0", "m1", "m2", "m3", "m4"]
    assert await texts(GetSessionConfig(num_recent_events=0)) == []
    assert await texts(GetSessionConfig(num_recent_events=2)) == ["m3", "m4"]
    assert await texts(GetSessionConfig(num_recent_events=9)) == ["m0", "m1", "m2", "m3", "m4"]
    # timestamp >= after_timestamp
    assert await texts(GetSessionConfig(after_timestamp=start + 3)) == ["m2", "m3", "m4"]
    assert await texts(GetSessionConfig(after_timestamp=start + 3.5)) == ["m3", "m4"]
    assert await texts(GetSessionConfig(after_timestamp=start + 9)) == []
    both = GetSessionConfig(num_recent_events=2, after_timestamp=start + 2)
    assert await texts(both) == ["m3", "m4"]
    few = GetSessionConfig(num_recent_events=4, after_timestamp=start + 4)
    assert await texts(few) == ["m3", "m4"]
    with pytest.raises(ValueError, match="num_recent_events"):
        GetSessionConfig(num_recent_events=-1)


# --------------------------------------------------------------------------- list and delete


async def test_list_sessions_is_oldest_update_first_without_events(
    service: BaseSessionService, app_name: str
) -> None:
    first = await service.create_session(app_name=app_name, user_id="u2", session_id="a")
    second = await service.create_session(
        app_name=app_name, user_id="u1", session_id="b", state={"user:k": 1}
    )
    third = await service.create_session(app_name=app_name, user_id="u1", session_id="c")
    # "a" becomes the most recently updated one
    later = max(first.last_update_time, second.last_update_time, third.last_update_time) + 10
    await service.append_event(first, _event(timestamp=later, delta={"app:z": 0}))

    listed = (await service.list_sessions(app_name=app_name)).sessions
    assert [(s.user_id, s.id) for s in listed] == [("u1", "b"), ("u1", "c"), ("u2", "a")]
    assert all(s.events == [] for s in listed)
    assert listed[0].state == {"app:z": 0, "user:k": 1}
    assert listed[2].state == {"app:z": 0}
    assert listed[2].last_update_time == later

    mine = (await service.list_sessions(app_name=app_name, user_id="u1")).sessions
    assert [s.id for s in mine] == ["b", "c"]
    assert (await service.list_sessions(app_name=app_name, user_id="nobody")).sessions == []
    assert (await service.list_sessions(app_name=f"{app_name}-none")).sessions == []


async def test_delete_session(service: BaseSessionService, app_name: str) -> None:
    session = await service.create_session(
        app_name=app_name, user_id="u1", session_id="gone", state={"app:a": 1, "user:b": 2}
    )
    await service.append_event(session, _event())
    await service.delete_session(app_name=app_name, user_id="u1", session_id="gone")
    assert await service.get_session(app_name=app_name, user_id="u1", session_id="gone") is None
    assert (await service.list_sessions(app_name=app_name)).sessions == []
    # deleting again, or a session never made, is no error
    await service.delete_session(app_name=app_name, user_id="u1", session_id="gone")
    await service.delete_session(app_name=app_name, user_id="u9", session_id="never")
    # app and user state stay; the id can be used again
    again = await service.create_session(app_name=app_name, user_id="u1", session_id="gone")
    assert again.state == {"app:a": 1, "user:b": 2}
    assert again.events == []


# --------------------------------------------------------------------------- other writers


async def test_append_to_a_session_deleted_by_another_process(
    services: Services, app_name: str
) -> None:
    mine, theirs = services.make(), services.make()
    session = await mine.create_session(app_name=app_name, user_id="u1")
    await theirs.delete_session(app_name=app_name, user_id="u1", session_id=session.id)
    with pytest.raises(SessionNotFoundError):
        await mine.append_event(session, _event())
    assert await mine.get_session(app_name=app_name, user_id="u1", session_id=session.id) is None


async def test_append_to_a_stale_session_object(services: Services, app_name: str) -> None:
    """REFERENCE_DIFFERS: ADK's InMemorySessionService has no stale check (it appends to the
    stored session whatever copy the caller holds); the SQLite one raises StaleSessionError, and
    so does the drop-in (its check is the engine's last sequence, not a timestamp)."""
    mine, theirs = services.make(), services.make()
    session = await mine.create_session(app_name=app_name, user_id="u1")
    copy = await theirs.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert copy is not None
    await mine.append_event(session, _event(timestamp=session.last_update_time + 1))
    late = _event(text="late", timestamp=session.last_update_time + 1)
    if services.kind == "adk-memory":
        await theirs.append_event(copy, late)
        return
    with pytest.raises(StaleSessionError):
        await theirs.append_event(copy, late)
    got = await mine.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got is not None
    assert [e.id for e in got.events] == [session.events[0].id]
    # read again, the copy is current
    fresh = await theirs.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert fresh is not None
    await theirs.append_event(fresh, _event(text="retried", timestamp=late.timestamp + 1))
    # and mine is now the stale one
    with pytest.raises(StaleSessionError):
        await mine.append_event(session, _event(timestamp=late.timestamp + 2))


@pytest.mark.parametrize("kind", OURS)
async def test_conflicting_concurrent_writers(services: Services, app_name: str) -> None:
    """Two writers append to the same state of a session at once: one wins, the other gets
    StaleSessionError and nothing of its event is stored."""
    one, two = services.make(), services.make()
    session = await one.create_session(app_name=app_name, user_id="u1", state={"n": 0})
    copy = await two.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert copy is not None
    outcomes = await asyncio.gather(
        one.append_event(session, _event(text="one", delta={"n": 1})),
        two.append_event(copy, _event(text="two", delta={"n": 2})),
        return_exceptions=True,
    )
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failed) == 1, outcomes
    assert isinstance(failed[0], StaleSessionError), outcomes
    [won] = [o for o in outcomes if isinstance(o, Event)]
    got = await one.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got is not None
    assert [e.id for e in got.events] == [won.id]
    assert got.state == {"n": won.actions.state_delta["n"]}


@pytest.mark.parametrize("kind", OURS)
async def test_a_summary_appended_meanwhile_is_taken_in(services: Services, app_name: str) -> None:
    """The engine's compaction appends summary events by itself (during BuildContext or after an
    invocation), where ADK's own compaction appends them through the runner's session object: a
    session object that missed only summaries is not stale. They are added to its events before
    the new one, so it stays equal to the stored session. (ADK's SQLite service would call the
    object stale here, its in-memory one would append without adding the summary.)"""
    mine, compactor = services.make(), services.make()
    session = await mine.create_session(app_name=app_name, user_id="u1")
    first = _event(text="first", timestamp=session.last_update_time + 1)
    await mine.append_event(session, first)
    copy = await compactor.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert copy is not None
    summary = Event(
        author="user",
        invocation_id="inv-1",
        timestamp=first.timestamp + 1,
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=first.timestamp,
                end_timestamp=first.timestamp,
                compacted_content=types.Content(role="model", parts=[types.Part(text="sum")]),
            )
        ),
    )
    await compactor.append_event(copy, summary)
    after = _event(text="after", timestamp=summary.timestamp + 1)
    await mine.append_event(session, after)
    assert [e.id for e in session.events] == [first.id, summary.id, after.id]
    got = await mine.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got == session
    # a writer's ordinary event still makes the object stale
    await compactor.append_event(got, _event(text="other", timestamp=after.timestamp + 1))
    with pytest.raises(StaleSessionError):
        await mine.append_event(session, _event(text="late", timestamp=after.timestamp + 2))


@pytest.mark.parametrize("kind", OURS)
async def test_appending_the_same_event_again_changes_nothing(
    services: Services, app_name: str
) -> None:
    """A retried append (ADK's in-memory service is idempotent for it too)."""
    service = services.make()
    session = await service.create_session(app_name=app_name, user_id="u1")
    event = _event(delta={"k": 1})
    await service.append_event(session, event)
    await service.append_event(session, event)
    assert session.events == [event]
    got = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got == session


@pytest.mark.parametrize("kind", OURS)
async def test_an_integral_float_reads_back_as_an_int(services: Services, app_name: str) -> None:
    """REFERENCE_DIFFERS (both): ADK's services keep ``2.0`` a float; the engine keeps JSON
    numbers as doubles, so the drop-in restores every integral one below 2**53 as an int (what ADK
    wrote for ints, the common case) and a float ``2.0`` reads back as ``2``."""
    service = services.make()
    state = {"f": 2.0, "i": 3, "x": 2.5, "big": 2**53, "neg": -0.0}
    session = await service.create_session(app_name=app_name, user_id="u1", state=state)
    got = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got is not None
    for value in (session.state, got.state):
        assert value == {"f": 2, "i": 3, "x": 2.5, "big": float(2**53), "neg": -0.0}
        assert [type(value[k]) for k in ("f", "i", "x", "big")] == [int, int, float, float]


# --------------------------------------------------------------------------- round trips


def _rich_events(start: float) -> list[Event]:
    """Events with every part type and the event fields an agent produces."""
    user = Event(
        author="user",
        invocation_id="inv-9",
        timestamp=start + 1,
        content=types.Content(
            role="user",
            parts=[
                types.Part(text="look at this ✓ 漢字"),
                types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\x00\xff")),
                types.Part(
                    file_data=types.FileData(
                        mime_type="application/pdf", file_uri="gs://bucket/doc.pdf"
                    )
                ),
            ],
        ),
    )
    call = Event(
        author="agent",
        invocation_id="inv-9",
        branch="agent",
        timestamp=start + 2,
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="thinking", thought=True, thought_signature=b"sig\x01"),
                types.Part(
                    function_call=types.FunctionCall(
                        id="call-1", name="lookup", args={"n": 3, "x": 1.5, "l": [1, {"d": -2}]}
                    )
                ),
                types.Part(
                    executable_code=types.ExecutableCode(
                        language=types.Language.PYTHON, code="print(1)"
                    )
                ),
                types.Part(
                    code_execution_result=types.CodeExecutionResult(
                        outcome=types.Outcome.OUTCOME_OK, output="1\n"
                    )
                ),
            ],
        ),
        long_running_tool_ids={"call-1"},
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=12, candidates_token_count=5, total_token_count=17
        ),
        grounding_metadata=types.GroundingMetadata(web_search_queries=["contextengine"]),
        custom_metadata={"trace": {"id": 7, "tags": ["a"]}},
        finish_reason=types.FinishReason.STOP,
        model_version="gemini-x",
        turn_complete=True,
    )
    response = Event(
        author="agent",
        invocation_id="inv-9",
        timestamp=start + 3,
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1", name="lookup", response={"result": 42, "ok": True}
                    )
                )
            ],
        ),
        actions=EventActions(
            state_delta={"count": 2, "ratio": 0.25, "none": None},
            artifact_delta={"report.txt": 1},
            transfer_to_agent="helper",
            skip_summarization=True,
        ),
        input_transcription=types.Transcription(text="spoken", finished=True),
        output_transcription=types.Transcription(text="said"),
        error_code="E1",
        error_message="partly failed",
    )
    return [user, call, response]


async def test_events_with_every_part_type_round_trip_equal(
    service: BaseSessionService, app_name: str
) -> None:
    session = await service.create_session(app_name=app_name, user_id="u1")
    events = _rich_events(session.last_update_time)
    for event in events:
        await service.append_event(session, event)
    got = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert got is not None
    for sent, back in zip(events, got.events, strict=True):
        assert back.model_dump() == sent.model_dump()
        assert back == sent
    assert got == session


async def _run_script(service: BaseSessionService, app_name: str) -> Session:
    """The fixed scripted conversation through a real ``Runner`` over ``service``; the session."""
    model = ScriptedLlm()
    with quiet_adk():
        runner = Runner(
            app=App(name=app_name, root_agent=build_agents(model)), session_service=service
        )
        await service.create_session(app_name=app_name, user_id="user", session_id="session")
        with deterministic_adk():
            await run_conversation(runner, model, fixed_script())
    session = await service.get_session(app_name=app_name, user_id="user", session_id="session")
    assert session is not None
    return session


async def test_a_runner_leaves_the_session_adk_leaves(services: Services, app_name: str) -> None:
    """A real ``Runner`` over the service (tools, parallel calls, a long-running call, a
    confirmation, transfers, a rewind: ``tests/adk/scripted.py``'s fixed script) records the
    events and the state that it records over ADK's ``InMemorySessionService``.

    REFERENCE_DIFFERS, and here the drop-in follows the in-memory service: ADK appends a tool
    confirmation request after the function response that it stamped earlier, so the log's
    timestamps are not monotonic; ADK's SQLite service reads events back sorted by timestamp
    (ties in append order), the in-memory service (and the engine's log) in append order, which
    is the order the Runner saw them in. The SQLite reference is therefore compared with the
    in-memory events sorted by timestamp: that is its only difference."""
    reference = await _run_script(InMemorySessionService(), app_name)
    got = await _run_script(services.make(), app_name)
    if services.kind == "adk-sqlite":
        assert got.events != reference.events
        reference.events.sort(key=lambda event: event.timestamp)
    assert len(got.events) == len(reference.events) > 20
    for mine, theirs in zip(got.events, reference.events, strict=True):
        assert mine.model_dump() == theirs.model_dump()
    assert got.events == reference.events
    assert got.state == reference.state


# --------------------------------------------------------------------------- construction, faults


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_sidecar_that_is_down_is_a_clear_error() -> None:
    target = f"127.0.0.1:{_free_port()}"
    service = ContextEngineSessionService(target=target, timeout=2.0, attempts=2)
    try:
        started = time.monotonic()
        with pytest.raises(ContextEngineError) as caught:
            await service.create_session(app_name="app", user_id="u1")
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE
        assert target in str(caught.value)
        assert "not reachable" in str(caught.value)
        assert time.monotonic() - started < 5
    finally:
        await service.close()


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"target": "127.0.0.1:1", "db": ":memory:"}, {"db": ":memory:", "timeout": 1.0}],
)
def test_exactly_one_of_target_db_and_backend(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="target"):
        ContextEngineSessionService(**kwargs)


async def test_a_shared_backend_is_not_closed_by_the_service(
    make_backend: Callable[[], Backend], app_name: str
) -> None:
    backend = make_backend()
    try:
        first = ContextEngineSessionService(backend=backend)
        await first.create_session(app_name=app_name, user_id="u1", session_id="s")
        await first.close()
        second = ContextEngineSessionService(backend=first.backend)
        got = await second.get_session(app_name=app_name, user_id="u1", session_id="s")
        assert got is not None
    finally:
        await backend.aclose()


async def test_an_owned_embedded_engine_is_closed_with_the_service(tmp_path: Path) -> None:
    db = str(tmp_path / "own.db")
    service = ContextEngineSessionService(db=db)
    session = await service.create_session(app_name="app", user_id="u1", state={"k": 1})
    await service.close()
    reopened = ContextEngineSessionService(db=db)  # the file's lock was released
    try:
        got = await reopened.get_session(app_name="app", user_id="u1", session_id=session.id)
        assert got == session
    finally:
        await reopened.close()
