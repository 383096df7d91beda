"""Oversized requests through the Python client: always ``REQUEST_TOO_LARGE``.

Up to twice ``max_request_bytes`` the server reads the request and answers with its ErrorInfo;
beyond that grpc core refuses it unread with a bare RESOURCE_EXHAUSTED, which the client reads as
the same reason (see errors.proto). A response larger than the client's own receive limit is not
the request's fault and stays a bare RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

LIMIT = 64 * 1024
APP, USER = "app", "u1"


@pytest.fixture
async def small_server() -> AsyncIterator[ContextEngineServer]:
    async with start_local_server(settings=ServerSettings(max_request_bytes=LIMIT)) as server:
        yield server


async def _append_error(client: ContextEngineClient, text_bytes: int) -> ContextEngineError:
    session = await client.create_session(APP, USER)
    with pytest.raises(ContextEngineError) as raised:
        await client.append_event(APP, USER, session.id, text_event("x" * text_bytes))
    return raised.value


async def test_within_the_transport_bound_the_server_says_so(
    small_server: ContextEngineServer,
) -> None:
    async with ContextEngineClient(small_server.target, attempts=1) as client:
        error = await _append_error(client, LIMIT + LIMIT // 2)
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.reason == "REQUEST_TOO_LARGE"
    assert error.metadata["limit_bytes"] == str(LIMIT)


async def test_beyond_the_transport_bound_the_client_says_the_same(
    small_server: ContextEngineServer,
) -> None:
    async with ContextEngineClient(small_server.target, attempts=1) as client:
        error = await _append_error(client, 4 * LIMIT)
        assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error.reason == "REQUEST_TOO_LARGE"
        assert error.metadata["refused_by"] == "server_transport"
        assert error.metadata["transport_limit_bytes"] == str(2 * LIMIT)
        assert int(error.metadata["request_bytes"]) > 4 * LIMIT
        # The server is fine and still takes ordinary appends.
        session = await client.create_session(APP, USER)
        await client.append_event(APP, USER, session.id, text_event("fits"))


async def test_beyond_the_clients_send_limit(small_server: ContextEngineServer) -> None:
    async with ContextEngineClient(
        small_server.target, attempts=1, max_message_bytes=LIMIT // 2
    ) as client:
        error = await _append_error(client, LIMIT)
    assert error.reason == "REQUEST_TOO_LARGE"
    assert error.metadata["refused_by"] == "client"
    assert error.metadata["transport_limit_bytes"] == str(LIMIT // 2)


async def test_a_response_too_large_for_the_client_is_not_the_requests_fault() -> None:
    async with start_local_server() as server:
        async with ContextEngineClient(server.target, attempts=1) as writer:
            session = await writer.create_session(APP, USER)
            for i in range(4):
                await writer.append_event(APP, USER, session.id, text_event(f"{i}" * 20_000))
        async with ContextEngineClient(
            server.target, attempts=1, max_message_bytes=40_000
        ) as reader:
            with pytest.raises(ContextEngineError) as raised:
                await reader.get_session(APP, USER, session.id)
    assert raised.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert raised.value.reason == ""
