"""MemoryService and the memory preload through the real server, over gRPC: every RPC, its
invalid inputs (status and ErrorInfo reason), app configuration, restart and FTS5 fallback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.store import SessionKey, is_postgres_dsn
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from contextengine.v1 import (
    config_pb2,
    memory_service_pb2 as pb,
    memory_service_pb2_grpc,
    session_service_pb2,
    session_service_pb2_grpc,
)
from tests.service.helpers import Owner, text_event
from tests.service.test_bad_input import expect

pytestmark = pytest.mark.service

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
A: Owner = {"app_name": "app", "user_id": "alice"}


@pytest.fixture
async def stub(
    server: ContextEngineServer,
) -> AsyncIterator[memory_service_pb2_grpc.MemoryServiceStub]:
    async with grpc.aio.insecure_channel(server.target) as channel:
        sessions = session_service_pb2_grpc.SessionServiceStub(channel)
        await sessions.CreateSession(session_service_pb2.CreateSessionRequest(session_id="s1", **A))
        yield memory_service_pb2_grpc.MemoryServiceStub(channel)


async def test_round_trip(client: ContextEngineClient, server: ContextEngineServer) -> None:
    s = await client.create_session("app", "alice", "trip")
    await client.append_event(
        "app", "alice", s.id, text_event("We should visit Kyoto in autumn", event_id="a")
    )
    await client.append_event(
        "app",
        "alice",
        s.id,
        text_event("京都の紅葉はきれいです", author="guide", event_id="b", invocation_id="inv-1"),
    )
    added = await client.add_session_to_memory("app", "alice", s.id)
    assert (added.entry_count, added.added_count, added.removed_count, added.last_sequence) == (
        2,
        2,
        0,
        2,
    )
    found = await client.search_memory("app", "alice", "Kyoto autumn")
    # FTS5's BM25 on SQLite and in process memory; PostgreSQL's ts_rank on PostgreSQL.
    postgres = is_postgres_dsn(server.settings.db)
    assert found.ranking == ("ts_rank" if postgres else "bm25")
    [memory] = found.memories
    assert (memory.session_id, memory.sequence, memory.event_id, memory.author) == (
        "trip",
        1,
        "a",
        "user",
    )
    assert memory.invocation_id == "inv-1"
    assert memory.timestamp > 0
    assert memory.content.parts[0].text == "We should visit Kyoto in autumn"
    assert memory.score > 0
    assert [m.event_id for m in (await client.search_memory("app", "alice", "紅葉")).memories] == [
        "b"
    ]
    assert (await client.search_memory("app", "bob", "kyoto")).memories == []
    chosen = await client.add_events_to_memory("app", "alice", s.id, [2, 1])
    assert (list(chosen.remembered_sequences), list(chosen.skipped_sequences)) == ([1, 2], [])
    assert await client.delete_memory("app", "alice", s.id) == 2
    assert await client.delete_memory("app", "alice") == 0
    assert (await client.search_memory("app", "alice", "kyoto")).memories == []


async def test_preload_through_build_context(client: ContextEngineClient) -> None:
    old = await client.create_session("app", "carol", "old")
    await client.append_event(
        "app", "carol", old.id, text_event("My dog is called Biscuit", event_id="d")
    )
    await client.add_session_to_memory("app", "carol", old.id)
    new = await client.create_session("app", "carol", "new")
    await client.append_event("app", "carol", new.id, text_event("What is my dog called?"))
    context = await client.build_context("app", "carol", new.id, preload_memory=True)
    preload = context.memory_preload
    assert preload.query == "What is my dog called?"
    assert [m.event_id for m in preload.memories] == ["d"]
    assert "user: My dog is called Biscuit" in preload.text
    assert [c.parts[0].text for c in context.contents] == ["What is my dog called?"]
    # The query can be given; without preload_memory nothing is searched.
    other = await client.build_context(
        "app", "carol", new.id, preload_memory=True, memory_query="cats"
    )
    assert (other.memory_preload.query, other.memory_preload.text) == ("cats", "")
    plain = await client.build_context("app", "carol", new.id)
    assert not plain.HasField("memory_preload")


async def test_background_ingestion_and_config(server: ContextEngineServer) -> None:
    async with ContextEngineClient(server.target, attempts=1) as client:
        config = config_pb2.AppConfig(app_name="bg")
        config.memory.ingest_on_end_invocation = True
        config.memory.max_results = 2
        stored = await client.update_app_config(config)
        assert stored.memory.ingest_on_end_invocation
        s = await client.create_session("bg", "dave")
        for n in range(3):
            await client.append_event("bg", "dave", s.id, text_event(f"note {n} about tea"))
        # EndInvocation calls on_invocation_end (test_end_invocation_hook.py); here it is direct.
        assert server.memory is not None
        assert await server.memory.on_invocation_end(SessionKey("bg", "dave", s.id))
        await server.memory.wait_idle()
        assert len((await client.search_memory("bg", "dave", "tea")).memories) == 2
        assert len((await client.search_memory("bg", "dave", "tea", limit=3)).memories) == 3


async def test_add_session_bad_input(stub: Any) -> None:
    await expect(
        stub.AddSessionToMemory(pb.AddSessionToMemoryRequest(user_id="u", session_id="s")),
        INVALID,
        "MISSING_FIELD",
        "app_name",
    )
    await expect(
        stub.AddSessionToMemory(pb.AddSessionToMemoryRequest(**A)),
        INVALID,
        "MISSING_FIELD",
        "session_id",
    )
    await expect(
        stub.AddSessionToMemory(pb.AddSessionToMemoryRequest(session_id="s\x00", **A)),
        INVALID,
        "INVALID_ID",
        "session_id",
    )
    await expect(
        stub.AddSessionToMemory(pb.AddSessionToMemoryRequest(session_id="nope", **A)),
        NOT_FOUND,
        "SESSION_NOT_FOUND",
    )


async def test_add_events_bad_input(stub: Any) -> None:
    request = pb.AddEventsToMemoryRequest
    await expect(
        stub.AddEventsToMemory(request(session_id="s1", **A)), INVALID, "MISSING_FIELD", "sequences"
    )
    await expect(
        stub.AddEventsToMemory(request(session_id="s1", sequences=[1, 0], **A)),
        INVALID,
        "INVALID_ARGUMENT",
        "sequences",
    )
    await expect(
        stub.AddEventsToMemory(request(session_id="s1", sequences=list(range(1, 1002)), **A)),
        INVALID,
        "INVALID_ARGUMENT",
        "sequences",
    )
    await expect(
        stub.AddEventsToMemory(request(session_id="s1", sequences=[1], user_id="u", app_name="")),
        INVALID,
        "MISSING_FIELD",
        "app_name",
    )
    await expect(
        stub.AddEventsToMemory(request(session_id="s1", sequences=[1], **A)),
        NOT_FOUND,
        "EVENT_NOT_FOUND",
    )
    await expect(
        stub.AddEventsToMemory(request(session_id="nope", sequences=[1], **A)),
        NOT_FOUND,
        "SESSION_NOT_FOUND",
    )


async def test_search_bad_input(stub: Any) -> None:
    request = pb.SearchMemoryRequest
    await expect(stub.SearchMemory(request(**A)), INVALID, "MISSING_FIELD", "query")
    await expect(stub.SearchMemory(request(query=" \n\t ", **A)), INVALID, "MISSING_FIELD", "query")
    await expect(
        stub.SearchMemory(request(query="x" * 10_001, **A)), INVALID, "INVALID_ARGUMENT", "query"
    )
    await expect(
        stub.SearchMemory(request(query="x", limit=-1, **A)), INVALID, "INVALID_ARGUMENT", "limit"
    )
    await expect(
        stub.SearchMemory(request(query="x", limit=1001, **A)),
        INVALID,
        "INVALID_ARGUMENT",
        "limit",
    )
    await expect(
        stub.SearchMemory(request(query="x", app_name="app")), INVALID, "MISSING_FIELD", "user_id"
    )
    await expect(
        stub.SearchMemory(request(query="x", user_id=" u", app_name="app")),
        INVALID,
        "INVALID_ID",
        "user_id",
    )
    # Punctuation only, FTS5 syntax, an unknown user: empty results, not errors.
    for query in ["?!", '"', "NEAR(a b) AND x* OR (", "words:x", "x" * 10_000]:
        response = await stub.SearchMemory(request(query=query, **A))
        assert list(response.memories) == []
    assert (
        list((await stub.SearchMemory(request(query="x", app_name="a", user_id="z"))).memories)
        == []
    )


async def test_delete_bad_input(stub: Any) -> None:
    request = pb.DeleteMemoryRequest
    await expect(stub.DeleteMemory(request(user_id="u")), INVALID, "MISSING_FIELD", "app_name")
    await expect(stub.DeleteMemory(request(app_name="a")), INVALID, "MISSING_FIELD", "user_id")
    await expect(
        stub.DeleteMemory(request(session_id="s" * 257, **A)), INVALID, "INVALID_ID", "session_id"
    )
    assert (await stub.DeleteMemory(request(session_id="never", **A))).deleted_count == 0


async def test_memory_config_validation(client: ContextEngineClient) -> None:
    bad: list[tuple[config_pb2.MemoryConfig, str]] = [
        (config_pb2.MemoryConfig(max_results=0), "config.memory.max_results"),
        (config_pb2.MemoryConfig(max_results=1001), "config.memory.max_results"),
        (
            config_pb2.MemoryConfig(preload_template="no placeholder"),
            "config.memory.preload_template",
        ),
        (
            config_pb2.MemoryConfig(preload_template="{memories} {x}"),
            "config.memory.preload_template",
        ),
        (
            config_pb2.MemoryConfig(preload_template="{memories} {"),
            "config.memory.preload_template",
        ),
        (
            config_pb2.MemoryConfig(preload_template="{memories}" + "x" * 10_000),
            "config.memory.preload_template",
        ),
        (
            # a number that no PreloadTimeFormat value has
            config_pb2.MemoryConfig(preload_time_format=config_pb2.PreloadTimeFormat.ValueType(7)),
            "config.memory.preload_time_format",
        ),
    ]
    for memory, field in bad:
        config = config_pb2.AppConfig(app_name="app", memory=memory)
        with pytest.raises(ContextEngineError) as err:
            await client.update_app_config(config)
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.reason, err.value.metadata["field"]) == ("INVALID_MEMORY_CONFIG", field)
    ok = config_pb2.AppConfig(
        app_name="app",
        memory=config_pb2.MemoryConfig(
            max_results=1000,
            preload_template="{{literal}} {memories}",
            preload_time_format=config_pb2.PRELOAD_TIME_FORMAT_LOCAL,
        ),
    )
    assert (await client.update_app_config(ok)).memory.max_results == 1000


async def test_reflection_lists_memory_service() -> None:
    async with (
        start_local_server() as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)

        async def requests() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
            yield reflection_pb2.ServerReflectionRequest(list_services="")

        names: list[str] = []
        async for reply in stub.ServerReflectionInfo(requests()):
            names = [s.name for s in reply.list_services_response.service]
        assert "contextengine.v1.MemoryService" in names


async def test_memory_survives_a_server_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "restart.db")
    async with start_local_server(db) as server, ContextEngineClient(server.target) as client:
        s = await client.create_session("app", "erin", "s")
        await client.append_event("app", "erin", s.id, text_event("my locker is number 42"))
        await client.add_session_to_memory("app", "erin", s.id)
    async with start_local_server(db) as server, ContextEngineClient(server.target) as client:
        found = await client.search_memory("app", "erin", "locker")
        assert [m.content.parts[0].text for m in found.memories] == ["my locker is number 42"]


async def test_server_without_fts5(tmp_path: Path) -> None:
    settings = ServerSettings(memory_fts="off")
    async with (
        start_local_server(str(tmp_path / "nofts.db"), settings=settings) as server,
        ContextEngineClient(server.target) as client,
    ):
        s = await client.create_session("app", "finn", "s")
        for text in ["green tea", "green tea with lemon", "black coffee"]:
            await client.append_event("app", "finn", s.id, text_event(text))
        await client.add_session_to_memory("app", "finn", s.id)
        found = await client.search_memory("app", "finn", "lemon tea")
        assert found.ranking == "matched_terms"
        assert [(m.content.parts[0].text, m.score) for m in found.memories] == [
            ("green tea with lemon", 2.0),
            ("green tea", 1.0),
        ]
