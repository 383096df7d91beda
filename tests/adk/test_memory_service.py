"""ContextEngineMemoryService: google-adk's memory service over the engine, in both modes.

Sessions are written through the backend (the session service is tested on its own); the memory
service is then used as ADK uses one. Which memories a query finds is compared with ADK's own
InMemoryMemoryService fed the same events (the ranking differs on purpose: BM25, not a count of
matched words).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import datetime

import grpc
import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App
from google.adk.events.event import Event
from google.adk.memory import InMemoryMemoryService
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.session import Session
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from pydantic import Field

from contextengine.adk import (
    Backend,
    ContextEngineMemoryService,
    ContextEnginePlugin,
    ContextEngineSessionService,
)
from contextengine.client import ContextEngineError
from contextengine.v1 import content_pb2, event_pb2, session_service_pb2 as spb

pytestmark = pytest.mark.process

USER = "u1"

TEXTS = [
    ("user", "I moved to Lisbon last spring"),
    ("model", "Lisbon is lovely in spring."),
    ("user", "My cat is called Pixel"),
    ("model", "Pixel is a nice name for a cat!"),
    ("user", "私はPythonを使う"),
    ("model", "東京都に住んでいます"),
]


def _adk_event(index: int, author: str, text: str) -> Event:
    return Event(
        id=f"ev-{index}",
        invocation_id=f"inv-{index // 2}",
        author=author,
        timestamp=1_700_000_000.0 + index,
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text)]
        ),
    )


def _proto_event(event: Event) -> event_pb2.Event:
    assert event.content is not None
    return event_pb2.Event(
        id=event.id,
        invocation_id=event.invocation_id,
        author=event.author,
        timestamp=event.timestamp,
        content=content_pb2.Content(
            role=event.content.role or "",
            parts=[content_pb2.Part(text=p.text or "") for p in event.content.parts or []],
        ),
    )


async def _store(
    backend: Backend, app: str, session_id: str, events: list[Event], user: str = USER
) -> None:
    await backend.create_session(
        spb.CreateSessionRequest(app_name=app, user_id=user, session_id=session_id)
    )
    for event in events:
        await backend.append_event(
            spb.AppendEventRequest(
                app_name=app, user_id=user, session_id=session_id, event=_proto_event(event)
            )
        )


def _session(app: str, session_id: str, events: list[Event], user: str = USER) -> Session:
    return Session(id=session_id, app_name=app, user_id=user, events=events)


@pytest.fixture
async def memory(backend: Backend) -> AsyncIterator[ContextEngineMemoryService]:
    service = ContextEngineMemoryService(backend=backend)
    yield service
    await service.close()  # not the shared backend's owner: a no-op


EVENTS = [_adk_event(i, author, text) for i, (author, text) in enumerate(TEXTS)]


async def test_add_session_then_search_finds_what_adk_finds(
    backend: Backend, memory: ContextEngineMemoryService, app_name: str
) -> None:
    await _store(backend, app_name, "s1", EVENTS)
    reference = InMemoryMemoryService()
    await reference.add_session_to_memory(_session(app_name, "s1", EVENTS))
    await memory.add_session_to_memory(_session(app_name, "s1", EVENTS))
    for query in ["Lisbon", "what is my CAT called", "python", "東京", "nothing matches", "pixel"]:
        ours = await memory.search_memory(app_name=app_name, user_id=USER, query=query)
        theirs = await reference.search_memory(app_name=app_name, user_id=USER, query=query)
        assert {m.id for m in ours.memories} == {m.id for m in theirs.memories}, query
        by_id = {m.id: m for m in theirs.memories}
        for entry in ours.memories:
            expected = by_id[entry.id]
            assert entry.content == expected.content
            assert entry.author == expected.author
            assert entry.timestamp == expected.timestamp
            assert entry.custom_metadata == {"session_id": "s1", "event_id": entry.id}


async def test_entry_fields(
    backend: Backend, memory: ContextEngineMemoryService, app_name: str
) -> None:
    await _store(backend, app_name, "s1", EVENTS)
    await memory.add_session_to_memory(_session(app_name, "s1", EVENTS))
    found = await memory.search_memory(app_name=app_name, user_id=USER, query="Pixel cat")
    assert [m.id for m in found.memories][:2] == ["ev-3", "ev-2"] or {
        m.id for m in found.memories
    } == {"ev-2", "ev-3"}
    first = next(m for m in found.memories if m.id == "ev-2")
    assert first.author == "user"
    assert first.timestamp == datetime.fromtimestamp(1_700_000_002.0).isoformat()
    assert first.content == types.Content(role="user", parts=[types.Part(text=TEXTS[2][1])])


async def test_memories_are_per_user_and_blank_queries_find_nothing(
    backend: Backend, memory: ContextEngineMemoryService, app_name: str
) -> None:
    await _store(backend, app_name, "s1", EVENTS)
    await _store(backend, app_name, "s2", [_adk_event(9, "user", "Lisbon again")], user="u2")
    await memory.add_session_to_memory(_session(app_name, "s1", EVENTS))
    await memory.add_session_to_memory(_session(app_name, "s2", [], user="u2"))
    mine = await memory.search_memory(app_name=app_name, user_id=USER, query="Lisbon")
    theirs = await memory.search_memory(app_name=app_name, user_id="u2", query="Lisbon")
    assert {m.id for m in mine.memories} == {"ev-0", "ev-1"}
    assert [m.id for m in theirs.memories] == ["ev-9"]
    assert (await memory.search_memory(app_name=app_name, user_id=USER, query="  ")).memories == []
    assert (await memory.search_memory(app_name=app_name, user_id=USER, query="?!")).memories == []
    long_query = "Lisbon " + "x" * 20_000
    found = await memory.search_memory(app_name=app_name, user_id=USER, query=long_query)
    assert {m.id for m in found.memories} == {"ev-0", "ev-1"}


async def test_add_events_is_a_delta(
    backend: Backend, memory: ContextEngineMemoryService, app_name: str
) -> None:
    await _store(backend, app_name, "s1", EVENTS)
    await memory.add_events_to_memory(
        app_name=app_name,
        user_id=USER,
        session_id="s1",
        events=EVENTS[2:4],
        custom_metadata={"ttl": "1d"},
    )
    assert (
        await memory.search_memory(app_name=app_name, user_id=USER, query="Lisbon")
    ).memories == []
    found = await memory.search_memory(app_name=app_name, user_id=USER, query="Pixel")
    assert {m.id for m in found.memories} == {"ev-2", "ev-3"}
    # a second delta adds to the first; an event the engine's session does not hold is skipped
    stranger = _adk_event(42, "user", "Lisbon from nowhere")
    await memory.add_events_to_memory(
        app_name=app_name, user_id=USER, session_id="s1", events=[EVENTS[0], stranger]
    )
    found = await memory.search_memory(app_name=app_name, user_id=USER, query="Lisbon Pixel")
    assert {m.id for m in found.memories} == {"ev-0", "ev-2", "ev-3"}
    await memory.add_events_to_memory(app_name=app_name, user_id=USER, session_id="s1", events=[])
    with pytest.raises(ValueError, match="session_id"):
        await memory.add_events_to_memory(app_name=app_name, user_id=USER, events=EVENTS)


async def test_unknown_session_is_an_rpc_error(
    memory: ContextEngineMemoryService, app_name: str
) -> None:
    with pytest.raises(ContextEngineError) as raised:
        await memory.add_session_to_memory(_session(app_name, "missing", []))
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    assert raised.value.reason == "SESSION_NOT_FOUND"


def test_constructor_needs_exactly_one_backend() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ContextEngineMemoryService()
    with pytest.raises(ValueError, match="exactly one"):
        ContextEngineMemoryService(target="127.0.0.1:1", db=":memory:")


class _Echo(BaseLlm):
    """Answers every call with "noted: <the user's last text>"."""

    model: str = "echo"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        said = last.parts[0].text if last.parts else ""
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=f"noted: {said}")])
        )


async def test_with_the_session_service_and_a_rewind(backend: Backend, app_name: str) -> None:
    """The memory of a session an ADK Runner wrote through ContextEngineSessionService on the
    same backend: a rewound turn is not remembered."""
    app = app_name.replace("-", "_")
    sessions = ContextEngineSessionService(backend=backend)
    memory = ContextEngineMemoryService(backend=backend)
    runner = Runner(
        app=App(name=app, root_agent=LlmAgent(name="scribe", model=_Echo())),
        session_service=sessions,
        memory_service=memory,
    )
    session = await sessions.create_session(app_name=app, user_id=USER)
    for said in ["my locker code is 4711", "my favourite colour is teal"]:
        message = types.Content(role="user", parts=[types.Part(text=said)])
        async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
            pass
    current = await sessions.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert current is not None
    second_turn = current.events[-1].invocation_id
    await runner.rewind_async(
        user_id=USER, session_id=session.id, rewind_before_invocation_id=second_turn
    )
    current = await sessions.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert current is not None
    await memory.add_session_to_memory(current)
    locker = await memory.search_memory(app_name=app, user_id=USER, query="locker code")
    assert [m.author for m in locker.memories] == ["user", "scribe"]
    assert locker.memories[0].content.parts
    assert locker.memories[0].content.parts[0].text == "my locker code is 4711"
    assert (await memory.search_memory(app_name=app, user_id=USER, query="teal")).memories == []
    await runner.close()


class _Recording(_Echo):
    """``_Echo`` that records the contents of every request."""

    seen: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append([c.model_copy(deep=True) for c in llm_request.contents])
        async for response in super().generate_content_async(llm_request, stream):
            yield response


async def test_preload_memory_tool_with_and_without_the_plugin(
    backend: Backend, app_name: str
) -> None:
    """ADK's PreloadMemoryTool searches the memory service and puts what it finds into the
    request's contents; the ContextEnginePlugin keeps that block where ADK put it."""
    app = app_name.replace("-", "_")
    sessions = ContextEngineSessionService(backend=backend)
    memory = ContextEngineMemoryService(backend=backend)

    async def ask(user: str, plugins: list[ContextEnginePlugin]) -> list[list[types.Content]]:
        model = _Recording()
        agent = LlmAgent(name="scribe", model=model, tools=[PreloadMemoryTool()])
        runner = Runner(
            app=App(name=app, root_agent=agent, plugins=list(plugins)),
            session_service=sessions,
            memory_service=memory,
        )
        for said in ["my locker code is 4711", "what is my locker code?"]:
            session = await sessions.create_session(app_name=app, user_id=user)
            message = types.Content(role="user", parts=[types.Part(text=said)])
            async for _ in runner.run_async(
                user_id=user, session_id=session.id, new_message=message
            ):
                pass
            stored = await sessions.get_session(app_name=app, user_id=user, session_id=session.id)
            assert stored is not None
            await memory.add_session_to_memory(stored)
        await runner.close()
        return model.seen

    def without_times(content: types.Content) -> list[str]:
        assert content.parts
        lines = (content.parts[0].text or "").splitlines()
        return [line for line in lines if not line.startswith("Time: ")]

    plain = await ask("plain", [])
    with_plugin = await ask("plugged", [ContextEnginePlugin(backend=backend)])
    assert len(plain[1]) == len(with_plugin[1]) == 2  # the memory block, then the question
    assert "scribe: noted: my locker code is 4711" in without_times(plain[1][0])
    assert without_times(with_plugin[1][0]) == without_times(plain[1][0])
    assert with_plugin[1][1] == plain[1][1]


async def test_a_sidecar_that_is_not_running() -> None:
    """Every call fails at once with UNAVAILABLE naming the address (nothing listens on it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    memory = ContextEngineMemoryService(target=f"127.0.0.1:{port}", attempts=1, timeout=5.0)
    try:
        with pytest.raises(ContextEngineError) as raised:
            await memory.search_memory(app_name="app", user_id=USER, query="anything")
        assert raised.value.code == grpc.StatusCode.UNAVAILABLE
        assert f"127.0.0.1:{port}" in raised.value.message
    finally:
        await memory.close()
