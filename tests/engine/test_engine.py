"""The in-process engine: its public surface, a round trip on a SQLite file, its errors (the
same reasons and codes as over gRPC) and its lifecycle."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import message
from google.rpc import error_details_pb2
from grpc_status import rpc_status

import contextengine.engine as engine_module
from contextengine.core.errors import Code
from contextengine.engine import ContextEngineError, Engine, EngineSettings, open_engine
from contextengine.settings import ServerSettings
from contextengine.store.sqlite import DatabaseLockedError
from contextengine.testing import start_local_server
from contextengine.transport import SERVICES
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    compaction_service_pb2_grpc,
    context_service_pb2 as cpb,
    memory_service_pb2 as mpb,
    memory_service_pb2_grpc,
    session_service_pb2 as spb,
    session_service_pb2_grpc,
    subscription_service_pb2 as subpb,
)
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

APP, USER = "app", "u"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_the_public_surface_is_explicit() -> None:
    assert set(engine_module.__all__) == {
        "DEFAULT_DB",
        "MEMORY_DB",
        "ContextEngineError",
        "ContextResult",
        "Engine",
        "EngineSettings",
        "Stream",
        "open_engine",
    }
    for name in engine_module.__all__:
        assert getattr(engine_module, name) is not None
    public = {name for name in dir(engine_module) if not name.startswith("_")}
    assert public - set(engine_module.__all__) <= {"annotations"}


def test_every_rpc_is_an_engine_method() -> None:
    """One method per RPC, snake_case: a coroutine for a unary RPC, a plain function returning an
    async iterator for a stream."""
    for service in SERVICES:
        for method in service.methods:
            attribute = getattr(Engine, _snake(method.name))
            assert inspect.iscoroutinefunction(attribute) != method.server_streaming, method.name
    for component in (
        "store",
        "events",
        "app_configs",
        "session_configs",
        "resolver",
        "compactor",
        "prompt_cache",
        "memory",
        "broadcaster",
    ):
        assert isinstance(inspect.getattr_static(Engine, component), property), component


def test_server_settings_carry_the_engine_settings() -> None:
    chosen = ServerSettings(db="x.db", heartbeat_seconds=3.0, memory_fts="off")
    assert chosen.engine() == EngineSettings(db="x.db", heartbeat_seconds=3.0, memory_fts="off")
    assert ServerSettings().engine() == EngineSettings()
    with pytest.raises(ValueError, match="target_demand"):
        EngineSettings(subscription_target_load=0.0)


async def test_a_round_trip_in_process_on_a_sqlite_file(tmp_path: Path) -> None:
    settings = EngineSettings(db=str(tmp_path / "ce.db"))
    async with await open_engine(settings) as engine:
        created = await engine.create_session(
            spb.CreateSessionRequest(app_name=APP, user_id=USER, session_id="s1")
        )
        assert created.session.id == "s1"
        where: dict[str, Any] = {"app_name": APP, "user_id": USER, "session_id": "s1"}
        first = await engine.append_event(
            spb.AppendEventRequest(**where, event=text_event("hello", invocation_id="i1"))
        )
        assert first.stored
        assert first.last_sequence == 1
        appended = await engine.append_events(
            spb.AppendEventsRequest(
                **where,
                events=[
                    text_event("hi there", author="agent", invocation_id="i1"),
                    text_event("and now?", invocation_id="i2"),
                ],
            )
        )
        assert appended.last_sequence == 3

        result = await engine.build_context(cpb.BuildContextRequest(**where, agent_name="agent"))
        response = result.response()
        assert [c.parts[0].text for c in response.contents] == ["hello", "hi there", "and now?"]
        assert cpb.BuildContextResponse.FromString(result.encoded()) == response
        assert result.last_sequence == 3

        page = await engine.list_events(spb.ListEventsRequest(**where, page_size=2))
        assert [e.sequence for e in page.events] == [1, 2]
        assert page.next_page_token
        rest = await engine.list_events(
            spb.ListEventsRequest(**where, page_size=2, page_token=page.next_page_token)
        )
        assert [e.sequence for e in rest.events] == [3]
        assert not rest.next_page_token

        rewound = await engine.rewind_session(
            spb.RewindSessionRequest(**where, rewind_before_invocation_id="i2")
        )
        assert rewound.event.sequence == 4
        assert rewound.event.actions.rewind_before_invocation_id == "i2"

        status = await engine.get_compaction_status(kpb.GetCompactionStatusRequest(**where))
        assert not status.running
        assert status.summaries == 0

        stream = engine.subscribe_events(subpb.SubscribeEventsRequest(**where))
        replayed = []
        async for frame in stream:
            if frame.HasField("caught_up"):
                break
            replayed.append(frame.event.event.sequence)
        assert replayed == [1, 2, 3, 4]
        await engine.append_event(spb.AppendEventRequest(**where, event=text_event("live")))
        live = await asyncio.wait_for(anext(stream), 5)
        assert live.event.event.sequence == 5
        stream.close()
        await eventually(lambda: engine.broadcaster.active == 0)

        watched = engine.watch_session_state(subpb.WatchSessionStateRequest(**where))
        snapshot = await asyncio.wait_for(anext(watched), 5)
        assert isinstance(snapshot, subpb.WatchSessionStateResponse)
        await watched.aclose()

    async with await open_engine(settings) as again:  # the file keeps what was written
        listed = await again.list_events(spb.ListEventsRequest(**where))
        assert listed.last_sequence == 5


async def eventually(check: Callable[[], bool], seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"not within {seconds} s")


#: (engine method, request) pairs that are refused
_REFUSED: list[tuple[str, message.Message]] = [
    ("get_session", spb.GetSessionRequest(app_name=APP, user_id=USER, session_id="missing")),
    ("create_session", spb.CreateSessionRequest(app_name="", user_id=USER)),
    (
        "list_events",
        spb.ListEventsRequest(app_name=APP, user_id=USER, session_id="s", page_size=-1),
    ),
    ("list_sessions", spb.ListSessionsRequest(app_name=APP, page_token="not-a-token")),
    ("update_app_config", spb.UpdateAppConfigRequest()),
    ("search_memory", mpb.SearchMemoryRequest(app_name=APP, user_id=USER, query="  ")),
    (
        "compact",
        kpb.CompactRequest(
            app_name=APP,
            user_id=USER,
            session_id="missing",
            trigger=kpb.CompactionTrigger.ValueType(99),
        ),
    ),
]


async def _over_grpc(channel: grpc.aio.Channel, method: str, request: message.Message) -> Any:
    stubs = {
        "search_memory": memory_service_pb2_grpc.MemoryServiceStub,
        "compact": compaction_service_pb2_grpc.CompactionServiceStub,
    }
    stub = stubs.get(method, session_service_pb2_grpc.SessionServiceStub)(channel)
    rpc = "".join(part.title() for part in method.split("_"))
    return await getattr(stub, rpc)(request)


async def test_errors_are_the_ones_grpc_callers_get() -> None:
    async with await open_engine(EngineSettings(db=":memory:")) as engine:
        in_process = {}
        for method, request in _REFUSED:
            with pytest.raises(ContextEngineError) as refused:
                await getattr(engine, method)(request)
            in_process[method] = (refused.value.code.value, refused.value.reason)
    assert in_process["get_session"] == (Code.NOT_FOUND.value, "SESSION_NOT_FOUND")
    assert in_process["create_session"][0] == Code.INVALID_ARGUMENT.value
    over_grpc = {}
    async with start_local_server() as server, grpc.aio.insecure_channel(server.target) as channel:
        for method, request in _REFUSED:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await _over_grpc(channel, method, request)
            status = rpc_status.from_call(failed.value)
            assert status is not None
            info = error_details_pb2.ErrorInfo()
            status.details[0].Unpack(info)
            over_grpc[method] = (failed.value.code().name, info.reason)
    assert over_grpc == in_process


async def test_a_bad_subscription_is_refused_before_it_is_iterated() -> None:
    async with await open_engine(EngineSettings(db=":memory:")) as engine:
        with pytest.raises(ContextEngineError) as refused:
            engine.subscribe_events(
                subpb.SubscribeEventsRequest(app_name=APP, user_id=USER, max_events_per_frame=-1)
            )
        assert refused.value.code is Code.INVALID_ARGUMENT


async def test_close_is_idempotent_and_ends_open_streams() -> None:
    engine = await open_engine(EngineSettings(db=":memory:"))
    await engine.create_session(
        spb.CreateSessionRequest(app_name=APP, user_id=USER, session_id="s")
    )
    stream = engine.subscribe_events(
        subpb.SubscribeEventsRequest(app_name=APP, user_id=USER, session_id="s")
    )
    assert (await anext(stream)).HasField("caught_up")
    await engine.close()
    assert engine.closed
    with pytest.raises(ContextEngineError) as ended:
        await asyncio.wait_for(anext(stream), 5)
    assert ended.value.reason == "SHUTTING_DOWN"
    await engine.close()  # again: nothing happens
    with pytest.raises(RuntimeError):
        await engine.open()  # a closed engine stays closed


async def test_an_engine_that_cannot_open_closes_what_it_opened(tmp_path: Path) -> None:
    settings = EngineSettings(db=str(tmp_path / "ce.db"))
    async with await open_engine(settings) as first:
        with pytest.raises(DatabaseLockedError):
            await open_engine(settings)  # one process per file, as for the sidecar
        await first.create_session(spb.CreateSessionRequest(app_name=APP, user_id=USER))
    async with await open_engine(settings) as later:  # the failed one left no lock behind
        assert later.storage_problem is None


async def test_storage_health_is_read_through_the_engine() -> None:
    async with await open_engine(EngineSettings(db=":memory:")) as engine:
        told: list[ContextEngineError | None] = []
        remove = engine.add_storage_listener(told.append)
        assert engine.storage_problem is None
        remove()
        assert told == []
