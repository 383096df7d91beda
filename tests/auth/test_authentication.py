"""Who is calling: missing, malformed and unknown tokens on every RPC (UNAUTHENTICATED with
reason UNAUTHENTICATED or TOKEN_INVALID), the single ``auth_token``, health and reflection open
without a token, no token in any log line, and no check at all without tokens."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from tests.auth.helpers import Token, call, methods, reason_of, request, short, write_tokens

pytestmark = pytest.mark.service

SECRET = "s3cret-token-value-never-logged"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ContextEngineServer]:
    tokens = write_tokens(tmp_path / "tokens.json", {"reader": Token(SECRET, "read", ["*"])})
    async with start_local_server(settings=ServerSettings(auth_tokens_file=str(tokens))) as srv:
        yield srv


@pytest.fixture
async def channel(server: ContextEngineServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(server.target) as chan:
        yield chan


#: (what the caller sends as metadata, the reason it gets)
BAD_CREDENTIALS = [
    ([], "UNAUTHENTICATED"),
    ([("authorization", SECRET)], "UNAUTHENTICATED"),  # no scheme
    ([("authorization", f"Basic {SECRET}")], "UNAUTHENTICATED"),
    ([("authorization", "Bearer")], "UNAUTHENTICATED"),
    (
        [("authorization", f"Bearer {SECRET}"), ("authorization", f"Bearer {SECRET}")],
        "UNAUTHENTICATED",
    ),
    ([("x-api-key", SECRET)], "UNAUTHENTICATED"),
    ([("authorization", "Bearer not-a-known-token")], "TOKEN_INVALID"),
    ([("authorization", f"Bearer {SECRET}x")], "TOKEN_INVALID"),
    ([("authorization", "Bearer   ")], "UNAUTHENTICATED"),
]


@pytest.mark.parametrize(("metadata", "reason"), BAD_CREDENTIALS)
async def test_bad_credentials_are_refused_on_every_rpc(
    channel: grpc.aio.Channel, metadata: list[tuple[str, str]], reason: str
) -> None:
    problems = []
    for method in methods():
        outcome = await call(channel, method, request(method, "a", "u"), None, metadata=metadata)
        if (outcome.code, outcome.reason) != (grpc.StatusCode.UNAUTHENTICATED, reason):
            problems.append(f"{short(method)}: {outcome}")
    assert not problems, "\n".join(problems)


async def test_the_scheme_is_case_insensitive(channel: grpc.aio.Channel) -> None:
    [get] = [m for m in methods() if m.name == "GetSession"]
    outcome = await call(
        channel, get, request(get, "a", "u"), None, metadata=[("authorization", f"bearer {SECRET}")]
    )
    assert outcome.reason == "SESSION_NOT_FOUND"


async def test_health_and_reflection_stay_open(channel: grpc.aio.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    names = []
    async for answer in reflection.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
    ):
        names = [s.name for s in answer.list_services_response.service]
    assert "contextengine.v1.SessionService" in names


async def test_no_token_reaches_a_log_line(
    server: ContextEngineServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with ContextEngineClient(server.target, attempts=1, token=SECRET) as reader:
        await reader.get_user_state("a", "u")
        with pytest.raises(ContextEngineError):
            await reader.create_session("a", "u")
    async with ContextEngineClient(server.target, attempts=1, token=SECRET + "x") as stranger:
        with pytest.raises(ContextEngineError) as caught:
            await stranger.get_user_state("a", "u")
    assert caught.value.reason == "TOKEN_INVALID"
    assert SECRET not in str(caught.value)
    text = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert "GetUserState" in text  # the RPC lines were captured
    assert SECRET not in text


async def test_the_single_auth_token_is_admin_on_every_app() -> None:
    settings = ServerSettings(auth_token=SECRET)
    async with start_local_server(settings=settings) as srv:
        async with ContextEngineClient(srv.target, attempts=1, token=SECRET) as admin:
            session = await admin.create_session("any-app", "u")
            await admin.delete_memory("other-app", "u")
            assert (await admin.get_session("any-app", "u", session.id)).id == session.id
        async with ContextEngineClient(srv.target, attempts=1) as anonymous:
            with pytest.raises(ContextEngineError) as caught:
                await anonymous.get_user_state("any-app", "u")
        assert caught.value.reason == "UNAUTHENTICATED"


async def test_without_tokens_nothing_is_checked() -> None:
    async with (
        start_local_server() as srv,
        ContextEngineClient(srv.target, attempts=1, token="whatever") as anyone,
    ):
        session = await anyone.create_session("a", "u")
        await anyone.delete_session("a", "u", session.id)


async def test_a_malformed_request_without_a_token_learns_nothing(
    channel: grpc.aio.Channel,
) -> None:
    """An undecodable request is refused for its missing token first, for its bytes only with
    a valid token."""
    call = channel.unary_unary(
        "/contextengine.v1.SessionService/GetSession",
        request_serializer=bytes,
        response_deserializer=bytes,
    )
    garbage = b"\xff\xff\xff"
    with pytest.raises(grpc.aio.AioRpcError) as anonymous:
        await call(garbage, timeout=5)
    assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert reason_of(anonymous.value) == "UNAUTHENTICATED"
    with pytest.raises(grpc.aio.AioRpcError) as known:
        await call(garbage, timeout=5, metadata=[("authorization", f"Bearer {SECRET}")])
    assert known.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(known.value) == "INVALID_ARGUMENT"
