"""Every SessionService RPC with invalid input: a clear status and an ErrorInfo reason."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from google.protobuf import message_factory, struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from contextengine.core import page_tokens
from contextengine.settings import ServerSettings
from contextengine.store import SqliteStore
from contextengine.testing import start_local_server
from contextengine.v1 import (
    compaction_service_pb2,
    config_pb2,
    context_service_pb2,
    memory_service_pb2,
    session_service_pb2,
    session_service_pb2 as pb,
    session_service_pb2_grpc,
    subscription_service_pb2,
    subscription_service_pb2 as spb,
    subscription_service_pb2_grpc,
)
from tests.service.helpers import Owner, SessionRef, text_event

pytestmark = pytest.mark.service

A: Owner = {"app_name": "app", "user_id": "u1"}
INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture
async def stub() -> AsyncIterator[session_service_pb2_grpc.SessionServiceStub]:
    settings = ServerSettings(max_request_bytes=64 * 1024)
    async with (
        start_local_server(settings=settings) as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        s = session_service_pb2_grpc.SessionServiceStub(channel)
        await s.CreateSession(pb.CreateSessionRequest(session_id="s1", **A))
        yield s


def _error_info(err: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    status = rpc_status.from_call(err)
    assert status is not None, "status details missing"
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert info.domain == "contextengine.v1"
    return info


async def expect(call: Any, code: grpc.StatusCode, reason: str, field: str | None = None) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == code, err.value.details()
    info = _error_info(err.value)
    assert info.reason == reason
    if field is not None:
        assert info.metadata["field"] == field


def _bad_struct() -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.fields["k"].SetInParent()  # a Value with no kind: not JSON
    return s


async def test_create_session_bad_input(stub: Any) -> None:

    await expect(
        stub.CreateSession(pb.CreateSessionRequest(user_id="u")),
        INVALID,
        "MISSING_FIELD",
        "app_name",
    )
    await expect(
        stub.CreateSession(pb.CreateSessionRequest(app_name="a")),
        INVALID,
        "MISSING_FIELD",
        "user_id",
    )
    await expect(
        stub.CreateSession(pb.CreateSessionRequest(app_name="a\x00", user_id="u")),
        INVALID,
        "INVALID_ID",
        "app_name",
    )
    await expect(
        stub.CreateSession(pb.CreateSessionRequest(app_name="a", user_id="u" * 257)),
        INVALID,
        "INVALID_ID",
        "user_id",
    )
    await expect(
        stub.CreateSession(pb.CreateSessionRequest(session_id=" padded", **A)),
        INVALID,
        "INVALID_ID",
        "session_id",
    )
    await expect(
        stub.CreateSession(pb.CreateSessionRequest(state=_bad_struct(), **A)),
        INVALID,
        "INVALID_STATE",
        "state.k",
    )
    nan = struct_pb2.Struct()
    nan.fields["x"].number_value = float("nan")
    await expect(
        stub.CreateSession(pb.CreateSessionRequest(state=nan, **A)),
        INVALID,
        "INVALID_STATE",
        "state.x",
    )
    prefix_only = struct_pb2.Struct()
    prefix_only.fields["app:"].string_value = "v"
    await expect(
        stub.CreateSession(pb.CreateSessionRequest(state=prefix_only, **A)),
        INVALID,
        "INVALID_STATE",
    )
    await expect(
        stub.CreateSession(pb.CreateSessionRequest(session_id="s1", **A)),
        grpc.StatusCode.ALREADY_EXISTS,
        "SESSION_ALREADY_EXISTS",
    )
    half = config_pb2.EventsCompactionConfig(compaction_interval=2)  # overlap_size missing
    await expect(
        stub.CreateSession(
            pb.CreateSessionRequest(
                session_id="s9", config=config_pb2.SessionConfig(events_compaction_config=half), **A
            )
        ),
        INVALID,
        "INVALID_COMPACTION_CONFIG",
        "config.events_compaction_config.compaction_interval",  # the pair's first field
    )


async def test_get_list_delete_bad_input(stub: Any) -> None:

    await expect(stub.GetSession(pb.GetSessionRequest(**A)), INVALID, "MISSING_FIELD", "session_id")
    await expect(
        stub.GetSession(pb.GetSessionRequest(session_id="zz", **A)),
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )
    await expect(
        stub.GetSession(pb.GetSessionRequest(session_id="s1", num_recent_events=-1, **A)),
        INVALID,
        "INVALID_ARGUMENT",
        "num_recent_events",
    )
    await expect(
        stub.ListSessions(pb.ListSessionsRequest(user_id="u")), INVALID, "MISSING_FIELD", "app_name"
    )
    await expect(
        stub.ListSessions(pb.ListSessionsRequest(page_size=-1, **A)),
        INVALID,
        "INVALID_ARGUMENT",
        "page_size",
    )
    await expect(
        stub.ListSessions(pb.ListSessionsRequest(page_token="garbage!", **A)),
        INVALID,
        "INVALID_PAGE_TOKEN",
    )
    await expect(
        stub.DeleteSession(pb.DeleteSessionRequest(session_id="zz", **A)),
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )
    await expect(
        stub.DeleteSession(pb.DeleteSessionRequest(**A)), INVALID, "MISSING_FIELD", "session_id"
    )


async def test_page_token_is_bound_to_its_request(stub: Any) -> None:
    for i in range(3):
        await stub.CreateSession(pb.CreateSessionRequest(session_id=f"p{i}", **A))
    page = await stub.ListSessions(pb.ListSessionsRequest(page_size=1, **A))
    assert page.next_page_token
    await expect(
        stub.ListSessions(
            pb.ListSessionsRequest(
                app_name="app", user_id="someone-else", page_token=page.next_page_token
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PAGE_TOKEN",
    )
    tampered = page.next_page_token[:-2] + (
        "AA" if not page.next_page_token.endswith("AA") else "BB"
    )
    await expect(
        stub.ListSessions(pb.ListSessionsRequest(page_token=tampered, **A)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PAGE_TOKEN",
    )


async def test_append_bad_input(stub: Any) -> None:

    req: SessionRef = {"session_id": "s1", **A}
    await expect(stub.AppendEvent(pb.AppendEventRequest(**req)), INVALID, "MISSING_FIELD", "event")
    await expect(
        stub.AppendEvent(pb.AppendEventRequest(event=text_event("x", author=""), **req)),
        INVALID,
        "MISSING_FIELD",
        "event.author",
    )
    await expect(
        stub.AppendEvent(pb.AppendEventRequest(event=text_event("x", author="bad\nname"), **req)),
        INVALID,
        "INVALID_ID",
        "event.author",
    )
    await expect(
        stub.AppendEvent(
            pb.AppendEventRequest(event=text_event("x", timestamp=float("inf")), **req)
        ),
        INVALID,
        "INVALID_EVENT",
        "event.timestamp",
    )
    await expect(
        stub.AppendEvent(pb.AppendEventRequest(event=text_event("x", timestamp=-1.0), **req)),
        INVALID,
        "INVALID_EVENT",
        "event.timestamp",
    )
    bad_delta = text_event("x")
    bad_delta.actions.state_delta.CopyFrom(_bad_struct())
    await expect(
        stub.AppendEvent(pb.AppendEventRequest(event=bad_delta, **req)),
        INVALID,
        "INVALID_STATE",
        "event.actions.state_delta.k",
    )
    await expect(
        stub.AppendEvent(
            pb.AppendEventRequest(
                event=text_event("x"), app_name="app", user_id="u1", session_id="missing"
            )
        ),
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )
    await expect(
        stub.AppendEvent(
            pb.AppendEventRequest(event=text_event("x"), expected_last_sequence=7, **req)
        ),
        grpc.StatusCode.ABORTED,
        "SEQUENCE_MISMATCH",
    )
    await expect(
        stub.AppendEvents(pb.AppendEventsRequest(events=[text_event("x", author="")], **req)),
        INVALID,
        "MISSING_FIELD",
        "events[0].author",
    )
    # Nothing of the above was recorded.
    session = await stub.GetSession(pb.GetSessionRequest(**req))
    assert session.session.last_sequence == 0


async def test_list_events_bad_input(stub: Any) -> None:

    req: SessionRef = {"session_id": "s1", **A}
    await expect(
        stub.ListEvents(pb.ListEventsRequest(after_sequence=-1, **req)),
        INVALID,
        "INVALID_ARGUMENT",
        "after_sequence",
    )
    await expect(
        stub.ListEvents(pb.ListEventsRequest(page_size=-5, **req)),
        INVALID,
        "INVALID_ARGUMENT",
        "page_size",
    )
    await expect(
        stub.ListEvents(pb.ListEventsRequest(page_token="x", **req)), INVALID, "INVALID_PAGE_TOKEN"
    )
    await expect(
        stub.ListEvents(pb.ListEventsRequest(app_name="app", user_id="u1", session_id="nope")),
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )


async def test_app_config_bad_input(stub: Any) -> None:

    await expect(stub.GetAppConfig(pb.GetAppConfigRequest()), INVALID, "MISSING_FIELD", "app_name")
    await expect(
        stub.UpdateAppConfig(pb.UpdateAppConfigRequest()), INVALID, "MISSING_FIELD", "config"
    )
    bad = config_pb2.AppConfig(
        app_name="app",
        events_compaction_config=config_pb2.EventsCompactionConfig(token_threshold=10),
    )
    await expect(
        stub.UpdateAppConfig(pb.UpdateAppConfigRequest(config=bad)),
        INVALID,
        "INVALID_COMPACTION_CONFIG",
    )


async def test_session_config_bad_input(stub: Any) -> None:
    session: SessionRef = {"session_id": "s1", **A}
    for call, request in (
        (stub.GetSessionConfig, pb.GetSessionConfigRequest),
        (stub.UpdateSessionConfig, pb.UpdateSessionConfigRequest),
    ):
        await expect(call(request(user_id="u1")), INVALID, "MISSING_FIELD", "app_name")
        await expect(call(request(app_name="app")), INVALID, "MISSING_FIELD", "user_id")
        await expect(call(request(**A)), INVALID, "MISSING_FIELD", "session_id")
        await expect(call(request(session_id="s\x00", **A)), INVALID, "INVALID_ID", "session_id")
    empty = config_pb2.SessionConfig()
    await expect(
        stub.GetSessionConfig(pb.GetSessionConfigRequest(session_id="nope", **A)),
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )
    await expect(
        stub.UpdateSessionConfig(
            pb.UpdateSessionConfigRequest(session_id="nope", config=empty, **A)
        ),
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )
    await expect(
        stub.UpdateSessionConfig(pb.UpdateSessionConfigRequest(**session)),
        INVALID,
        "MISSING_FIELD",
        "config",
    )
    for bad, field in (
        (
            config_pb2.EventsCompactionConfig(token_threshold=10),
            "config.events_compaction_config.token_threshold",
        ),
        (
            config_pb2.EventsCompactionConfig(compaction_interval=0, overlap_size=1),
            "config.events_compaction_config.compaction_interval",
        ),
        (config_pb2.EventsCompactionConfig(), "config.events_compaction_config"),
    ):
        await expect(
            stub.UpdateSessionConfig(
                pb.UpdateSessionConfigRequest(
                    config=config_pb2.SessionConfig(events_compaction_config=bad), **session
                )
            ),
            INVALID,
            "INVALID_COMPACTION_CONFIG",
            field,
        )
    # Nothing was stored by the rejected updates.
    stored = await stub.GetSessionConfig(pb.GetSessionConfigRequest(**session))
    assert stored.config == empty


async def test_oversized_request_is_resource_exhausted(stub: Any) -> None:
    big = text_event("x" * (100 * 1024))
    await expect(
        stub.AppendEvent(pb.AppendEventRequest(event=big, session_id="s1", **A)),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "REQUEST_TOO_LARGE",
    )
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s1", **A))
    assert session.session.last_sequence == 0


async def test_undecodable_request_is_invalid_argument() -> None:
    async with (
        start_local_server() as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        call = channel.unary_unary(
            "/contextengine.v1.SessionService/GetSession",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        await expect(
            call(b"\xff\xff\xff\xff"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
            "request",
        )


# --- Forged page tokens (issue 13, item 5) and long echoes (item 6) ---------------------------


def _unkeyed_token(kind: str, scope: list[str], cursor_json: str) -> str:
    """A token in the format of the unkeyed tokens of earlier versions, which anyone could mint."""
    body = json.dumps({"v": 1, "k": kind, "s": scope}, separators=(",", ":"))[:-1]
    raw = f'{body},"c":{cursor_json}}}'.encode()
    check = hashlib.sha256(b"contextengine-page-token:" + raw).hexdigest()[:12]
    return base64.urlsafe_b64encode(raw + b"." + check.encode()).decode().rstrip("=")


@pytest.fixture(params=["memory", "sqlite"])
async def any_store_stub(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[session_service_pb2_grpc.SessionServiceStub]:
    """A SessionService stub of a server on either store, with session s1 holding two events."""
    db = ":memory:" if request.param == "memory" else str(tmp_path / "ce.db")
    settings = ServerSettings(max_request_bytes=64 * 1024)
    async with (
        start_local_server(db, settings=settings) as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        s = session_service_pb2_grpc.SessionServiceStub(channel)
        await s.CreateSession(pb.CreateSessionRequest(session_id="s1", **A))
        await s.AppendEvents(
            pb.AppendEventsRequest(session_id="s1", events=[text_event("a"), text_event("b")], **A)
        )
        yield s


async def _s1_unchanged(stub: Any) -> None:
    """The server still answers, and s1 still holds its two events."""
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s1", **A))
    assert [e.content.parts[0].text for e in session.session.events] == ["a", "b"]
    assert session.session.last_sequence == 2


async def test_forged_page_tokens_are_invalid_page_token(any_store_stub: Any) -> None:
    stub = any_store_stub
    events_scope = ["app", "u1", "s1", "0"]
    deep = "[" * 20_000 + "]" * 20_000
    forged_events = [
        _unkeyed_token("events", events_scope, str(2**63)),  # overflowed SQLite's integer
        _unkeyed_token("events", events_scope, str(2**63 - 1)),
        _unkeyed_token("events", events_scope, "-1"),
        _unkeyed_token("events", events_scope, deep),  # RecursionError
        _unkeyed_token("events", events_scope, "1e999"),
        _unkeyed_token("events", events_scope, "1" * 5000),  # beyond int("...")'s digit limit
        # the keyed format, with a key of the attacker's choice
        page_tokens.PageTokens(b"\x00" * 32).encode("events", events_scope, [2**63]),
        page_tokens.PageTokens(b"\x00" * 32).encode("events", events_scope, [0]),
        "A" * 60_000,
        "é" * 100,
        "",  # empty: no token, a first page
    ]
    for token in forged_events:
        call = stub.ListEvents(pb.ListEventsRequest(session_id="s1", page_token=token, **A))
        if token:
            await expect(call, INVALID, "INVALID_PAGE_TOKEN", "page_token")
        else:
            assert len((await call).events) == 2
    sessions_scope = ["app", "u1"]
    for cursor in (deep, '["u1"]', "[1, 2]", '["u1", "s1", "x"]', '"s1"'):
        token = _unkeyed_token("sessions", sessions_scope, cursor)
        await expect(
            stub.ListSessions(pb.ListSessionsRequest(page_token=token, **A)),
            INVALID,
            "INVALID_PAGE_TOKEN",
            "page_token",
        )
    await _s1_unchanged(stub)


async def test_issued_page_tokens_page_through(any_store_stub: Any) -> None:
    stub = any_store_stub
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s2", **A))
    page = await stub.ListEvents(pb.ListEventsRequest(session_id="s1", page_size=1, **A))
    assert [e.sequence for e in page.events] == [1]
    assert page.next_page_token
    rest = await stub.ListEvents(
        pb.ListEventsRequest(session_id="s1", page_size=1, page_token=page.next_page_token, **A)
    )
    assert [e.sequence for e in rest.events] == [2]
    assert not rest.next_page_token
    # Bound to the request: another session, another after_sequence, another method.
    for other in (
        pb.ListEventsRequest(session_id="s2", page_token=page.next_page_token, **A),
        pb.ListEventsRequest(
            session_id="s1", after_sequence=1, page_token=page.next_page_token, **A
        ),
    ):
        await expect(stub.ListEvents(other), INVALID, "INVALID_PAGE_TOKEN", "page_token")
    await expect(
        stub.ListSessions(pb.ListSessionsRequest(page_token=page.next_page_token, **A)),
        INVALID,
        "INVALID_PAGE_TOKEN",
        "page_token",
    )
    sessions = await stub.ListSessions(pb.ListSessionsRequest(page_size=1, **A))
    assert [s.id for s in sessions.sessions] == ["s1"]
    assert sessions.next_page_token
    second = await stub.ListSessions(
        pb.ListSessionsRequest(page_size=1, page_token=sessions.next_page_token, **A)
    )
    assert [s.id for s in second.sessions] == ["s2"]
    # Any edit of an issued token is detected.
    token = sessions.next_page_token
    for i in range(len(token)):
        flipped = token[:i] + ("B" if token[i] != "B" else "C") + token[i + 1 :]
        await expect(
            stub.ListSessions(pb.ListSessionsRequest(page_token=flipped, **A)),
            INVALID,
            "INVALID_PAGE_TOKEN",
        )
    await _s1_unchanged(stub)


async def test_page_tokens_survive_restarts(tmp_path: Path) -> None:
    """The key is stored in the database: a token outlives the server that issued it, and any
    process that opens the file later reads the same key; another database rejects it."""
    db = str(tmp_path / "ce.db")

    async def next_ids(target: str, token: str) -> list[str]:
        async with grpc.aio.insecure_channel(target) as channel:
            s = session_service_pb2_grpc.SessionServiceStub(channel)
            page = await s.ListSessions(pb.ListSessionsRequest(page_token=token, **A))
            return [session.id for session in page.sessions]

    async with (
        start_local_server(db) as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        s = session_service_pb2_grpc.SessionServiceStub(channel)
        for sid in ("s1", "s2", "s3"):
            await s.CreateSession(pb.CreateSessionRequest(session_id=sid, **A))
        token = (await s.ListSessions(pb.ListSessionsRequest(page_size=1, **A))).next_page_token
    async with start_local_server(db) as restarted:
        assert await next_ids(restarted.target, token) == ["s2", "s3"]
    store = SqliteStore(db)  # what another process opening the file sees
    await store.open()
    try:
        tokens = page_tokens.PageTokens(await store.page_token_key())
        assert tokens.decode(token, "sessions", ["app", "u1"]) == ("u1", "s1")
    finally:
        await store.close()
    async with (
        start_local_server(str(tmp_path / "other.db")) as stranger,
        grpc.aio.insecure_channel(stranger.target) as channel,
    ):
        s = session_service_pb2_grpc.SessionServiceStub(channel)
        await expect(
            s.ListSessions(pb.ListSessionsRequest(page_token=token, **A)),
            INVALID,
            "INVALID_PAGE_TOKEN",
        )


async def test_long_input_is_not_echoed_whole(any_store_stub: Any) -> None:
    stub = any_store_stub
    emoji = "\U0001f600" * 256  # a valid id: 256 characters, 1 KiB of UTF-8
    await expect(
        stub.GetSession(pb.GetSessionRequest(app_name=emoji, user_id=emoji, session_id=emoji)),
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )
    await expect(
        stub.CreateSession(
            pb.CreateSessionRequest(app_name=emoji, user_id=emoji, session_id=emoji + "x")
        ),
        INVALID,
        "INVALID_ID",
        "session_id",
    )
    long_key = struct_pb2.Struct()
    long_key.fields["\x01" * 20_000].SetInParent()  # a Value with no kind, under a long key
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CreateSession(pb.CreateSessionRequest(state=long_key, **A))
    assert err.value.code() == INVALID
    info = _error_info(err.value)
    assert info.reason == "INVALID_STATE"
    assert info.metadata["field"].startswith("state.\x01")
    assert "20006 characters" in info.metadata["field"]
    await _s1_unchanged(stub)


async def test_long_subscription_input_is_not_echoed_whole() -> None:
    async with (
        start_local_server() as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        stub = subscription_service_pb2_grpc.SubscriptionServiceStub(channel)
        app_scope = spb.SUBSCRIPTION_SCOPE_APP
        for request, reason, field in (
            (
                spb.SubscribeEventsRequest(
                    scope=app_scope, app_name="app", after_cursor="x" * 10_000
                ),
                "INVALID_CURSOR",
                "after_cursor",
            ),
            (
                spb.SubscribeEventsRequest(
                    scope=app_scope,
                    app_name="app",
                    kinds=cast(Any, [1000 + i for i in range(2000)]),
                ),
                "INVALID_ARGUMENT",
                "kinds",
            ),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                async for _ in stub.SubscribeEvents(request, timeout=10):
                    pass
            assert err.value.code() == INVALID, err.value.details()
            info = _error_info(err.value)
            assert (info.reason, info.metadata["field"]) == (reason, field)
            assert len(err.value.details() or "") <= 512
        # The server is still healthy.
        sessions = session_service_pb2_grpc.SessionServiceStub(channel)
        await sessions.CreateSession(pb.CreateSessionRequest(session_id="after", **A))


async def test_cursor_of_many_digits_is_invalid_cursor() -> None:
    async with (
        start_local_server() as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        stub = subscription_service_pb2_grpc.SubscriptionServiceStub(channel)
        request = spb.SubscribeEventsRequest(
            scope=spb.SUBSCRIPTION_SCOPE_APP, app_name="app", after_cursor="9" * 10_000
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stub.SubscribeEvents(request, timeout=10):
                pass
        assert err.value.code() == INVALID, err.value.details()
        assert _error_info(err.value).reason == "INVALID_CURSOR"


async def test_longest_ids_get_an_error_info_from_every_rpc() -> None:
    """Ids of 256 four-byte characters are valid; a SESSION_NOT_FOUND quoting three of them
    used to exceed the metadata limit (percent-encoded, the message alone was 9 KiB)."""
    emoji = "\U0001f600" * 256
    files = [
        session_service_pb2.DESCRIPTOR,
        context_service_pb2.DESCRIPTOR,
        subscription_service_pb2.DESCRIPTOR,
        compaction_service_pb2.DESCRIPTOR,
        memory_service_pb2.DESCRIPTOR,
    ]
    errors: dict[str, grpc.aio.AioRpcError] = {}
    async with (
        start_local_server() as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        for service in (s for f in files for s in f.services_by_name.values()):
            for method in service.methods:
                cls = message_factory.GetMessageClass(method.input_type)
                fields = method.input_type.fields_by_name
                if not {"app_name", "user_id", "session_id"} <= set(fields):
                    continue
                request = cls(app_name=emoji, user_id=emoji, session_id=emoji)
                path = f"/{service.full_name}/{method.name}"
                identity: Any = lambda b: b  # noqa: E731
                try:
                    if method.server_streaming:
                        stream = channel.unary_stream(
                            path, request_serializer=identity, response_deserializer=identity
                        )
                        call: Any = stream(request.SerializeToString(), timeout=10)
                        async for _ in call:
                            pass
                    else:
                        unary = channel.unary_unary(
                            path, request_serializer=identity, response_deserializer=identity
                        )
                        await unary(request.SerializeToString(), timeout=10)
                except grpc.aio.AioRpcError as err:
                    errors[path] = err
    assert len(errors) >= 15, list(errors)  # most RPCs answer SESSION_NOT_FOUND
    for path, error in errors.items():
        assert error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED, (path, error.details())
        assert _error_info(error).reason, path
