"""Every SessionService RPC with invalid input: a clear status and an ErrorInfo reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from contextengine.server import ServerSettings
from contextengine.testing import start_local_server
from contextengine.v1 import config_pb2, session_service_pb2 as pb, session_service_pb2_grpc
from tests.service.helpers import Owner, SessionRef, text_event

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
