"""SessionService.GetUserState, over gRPC and in process (the engine), on memory and SQLite.

``api`` (also used by ``test_list_order``) runs one request through a real sidecar's stubs or
through an in-process ``Engine`` and turns a failure into the same ``RefusedError`` either way, so each
test below asserts the same results in the four modes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf import message
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.errors import ContextEngineError as EngineError
from contextengine.core.structs import dict_to_struct, struct_to_dict
from contextengine.engine import Engine, EngineSettings, open_engine
from contextengine.testing import start_local_server
from contextengine.v1 import session_service_pb2 as pb, session_service_pb2_grpc
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

APP = "app"
M = TypeVar("M", bound=message.Message)


@dataclass(frozen=True)
class RefusedError(Exception):
    """A failed call, as the gRPC code name, the ErrorInfo reason and its ``field``."""

    code: str
    reason: str
    field: str | None


class Api:
    """One SessionService, called by its engine method names (``get_user_state``, ...)."""

    def __init__(self, mode: str, engine: Engine | None, channel: grpc.aio.Channel | None) -> None:
        self.mode = mode
        self.target = ""
        self._engine = engine
        self._stub = (
            None if channel is None else session_service_pb2_grpc.SessionServiceStub(channel)
        )

    async def __call__(self, method: str, request: M) -> Any:
        if self._engine is not None:
            try:
                return await getattr(self._engine, method)(request)
            except EngineError as err:
                raise RefusedError(err.code.name, err.reason, err.metadata.get("field")) from None
        rpc = "".join(part.title() for part in method.split("_"))
        try:
            return await getattr(self._stub, rpc)(request)
        except grpc.aio.AioRpcError as err:
            status = rpc_status.from_call(err)
            assert status is not None, "status details missing"
            info = error_details_pb2.ErrorInfo()
            assert status.details[0].Unpack(info)
            raise RefusedError(err.code().name, info.reason, info.metadata.get("field")) from None


MODES = ["grpc-memory", "grpc-sqlite", "engine-memory", "engine-sqlite"]


async def open_api(mode: str, tmp_path: Path, stack: AsyncExitStack) -> Api:
    db = ":memory:" if mode.endswith("memory") else str(tmp_path / f"{mode}.db")
    if mode.startswith("engine"):
        engine = await stack.enter_async_context(await open_engine(EngineSettings(db=db)))
        return Api(mode, engine, None)
    server = await stack.enter_async_context(start_local_server(db))
    channel = await stack.enter_async_context(grpc.aio.insecure_channel(server.target))
    api = Api(mode, None, channel)
    api.target = server.target
    return api


@pytest.fixture(params=MODES)
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    async with AsyncExitStack() as stack:
        yield await open_api(request.param, tmp_path, stack)


async def refused(call: Awaitable[object]) -> RefusedError:
    with pytest.raises(RefusedError) as info:
        await call
    return info.value


async def in_every_mode(tmp_path: Path, scenario: Callable[[Api], Awaitable[object]]) -> object:
    """Runs ``scenario`` in each mode and checks they all return the same; returns it."""
    results = []
    for mode in MODES:
        async with AsyncExitStack() as stack:
            results.append(await scenario(await open_api(mode, tmp_path, stack)))
    assert all(result == results[0] for result in results[1:]), dict(
        zip(MODES, results, strict=True)
    )
    return results[0]


async def user_state(api: Api, user_id: str, app_name: str = APP) -> dict[str, Any]:
    response = await api(
        "get_user_state", pb.GetUserStateRequest(app_name=app_name, user_id=user_id)
    )
    return struct_to_dict(response.state, "state")


# --- behaviour -----------------------------------------------------------------------------------


async def test_unknown_user_has_an_empty_state(api: Api) -> None:
    assert await user_state(api, "nobody") == {}
    await api("create_session", pb.CreateSessionRequest(app_name=APP, user_id="u1", session_id="s"))
    assert await user_state(api, "u1") == {}  # a user whose sessions set no user: key


async def test_the_user_scope_without_its_prefix(api: Api) -> None:
    await api(
        "create_session",
        pb.CreateSessionRequest(
            app_name=APP,
            user_id="u1",
            session_id="s1",
            state=dict_to_struct({"user:lang": "fr", "app:theme": "dark", "k": 1, "temp:t": 0}),
        ),
    )
    await api(
        "append_event",
        pb.AppendEventRequest(
            app_name=APP,
            user_id="u1",
            session_id="s1",
            event=text_event(
                "hi",
                state_delta={"user:n": 2, "user:deep": {"a": [1, 2.5]}, "m": 3, "temp:x": 1},
            ),
        ),
    )
    assert await user_state(api, "u1") == {"lang": "fr", "n": 2, "deep": {"a": [1, 2.5]}}
    # Shared by the user's other sessions, not by other users or apps.
    await api(
        "create_session", pb.CreateSessionRequest(app_name=APP, user_id="u2", session_id="s2")
    )
    assert await user_state(api, "u2") == {}
    assert await user_state(api, "u1", "other-app") == {}
    # A null keeps the key (as the merged state does); deleting the session keeps the state.
    await api(
        "append_event",
        pb.AppendEventRequest(
            app_name=APP,
            user_id="u1",
            session_id="s1",
            event=text_event("again", state_delta={"user:lang": None}),
        ),
    )
    await api(
        "delete_session", pb.DeleteSessionRequest(app_name=APP, user_id="u1", session_id="s1")
    )
    assert await user_state(api, "u1") == {"lang": None, "n": 2, "deep": {"a": [1, 2.5]}}


async def test_same_results_over_grpc_and_in_process(tmp_path: Path) -> None:
    async def scenario(api: Api) -> list[dict[str, Any]]:
        seen = [await user_state(api, "u")]
        await api(
            "create_session",
            pb.CreateSessionRequest(
                app_name=APP, user_id="u", session_id="s", state=dict_to_struct({"user:a": 1})
            ),
        )
        seen.append(await user_state(api, "u"))
        await api(
            "append_events",
            pb.AppendEventsRequest(
                app_name=APP,
                user_id="u",
                session_id="s",
                events=[
                    text_event("1", state_delta={"user:b": "x"}),
                    text_event("2", state_delta={"user:a": [True, None]}),
                ],
            ),
        )
        seen.append(await user_state(api, "u"))
        return seen

    assert await in_every_mode(tmp_path, scenario) == [
        {},
        {"a": 1},
        {"a": [True, None], "b": "x"},
    ]


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_fields", "reason", "field"),
    [
        ({"user_id": "u"}, "MISSING_FIELD", "app_name"),
        ({"app_name": APP}, "MISSING_FIELD", "user_id"),
        ({"app_name": " app", "user_id": "u"}, "INVALID_ID", "app_name"),
        ({"app_name": APP, "user_id": "u\n"}, "INVALID_ID", "user_id"),
        ({"app_name": APP, "user_id": "u" * 257}, "INVALID_ID", "user_id"),
    ],
)
async def test_bad_input_is_invalid_argument_with_error_info(
    api: Api, request_fields: dict[str, str], reason: str, field: str
) -> None:
    failure = await refused(api("get_user_state", pb.GetUserStateRequest(**request_fields)))
    assert failure == RefusedError("INVALID_ARGUMENT", reason, field)


# --- the Python client ---------------------------------------------------------------------------


async def test_client_get_user_state(client: ContextEngineClient) -> None:
    assert await client.get_user_state(APP, "u1") == {}
    await client.create_session(
        APP, "u1", "s1", state={"user:count": 3, "user:ratio": 0.5, "user:list": [1, {"x": None}]}
    )
    got = await client.get_user_state(APP, "u1")
    assert got == {"count": 3, "ratio": 0.5, "list": [1, {"x": None}]}
    assert isinstance(got["count"], int)  # integral numbers come back as int, as on the server
    with pytest.raises(ContextEngineError) as err:
        await client.get_user_state(APP, "")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.reason == "MISSING_FIELD"
