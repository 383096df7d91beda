"""Bad requests to both RPCs end the stream at once with the documented status and reason."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.v1 import subscription_service_pb2 as spb, subscription_service_pb2_grpc

from .helpers import APP, SESSION, USER, message, stream_error

pytestmark = pytest.mark.service

SESSION_SCOPE = {"app_name": APP, "user_id": USER, "session_id": SESSION}
APP_SCOPE = {"scope": spb.SUBSCRIPTION_SCOPE_APP, "app_name": APP}
USER_SCOPE = {"scope": spb.SUBSCRIPTION_SCOPE_USER, "app_name": APP, "user_id": USER}

SUBSCRIBE_CASES: list[tuple[str, dict[str, Any], str, str, str | None]] = [
    ("missing session", {**SESSION_SCOPE, "session_id": "nope"}, "NOT_FOUND", "SESSION_NOT_FOUND", None),
    ("sequence beyond the end", {**SESSION_SCOPE, "after_sequence": 3}, "INVALID_ARGUMENT", "INVALID_CURSOR", "after_sequence"),
    ("negative sequence", {**SESSION_SCOPE, "after_sequence": -1}, "INVALID_ARGUMENT", "INVALID_CURSOR", "after_sequence"),
    ("malformed cursor", {**APP_SCOPE, "after_cursor": "abc"}, "INVALID_ARGUMENT", "INVALID_CURSOR", "after_cursor"),
    ("negative cursor", {**USER_SCOPE, "after_cursor": "-1"}, "INVALID_ARGUMENT", "INVALID_CURSOR", "after_cursor"),
    ("padded cursor", {**APP_SCOPE, "after_cursor": "01"}, "INVALID_ARGUMENT", "INVALID_CURSOR", "after_cursor"),
    ("fractional cursor", {**APP_SCOPE, "after_cursor": "1.5"}, "INVALID_ARGUMENT", "INVALID_CURSOR", "after_cursor"),
    ("huge cursor", {**APP_SCOPE, "after_cursor": "9" * 40}, "INVALID_ARGUMENT", "INVALID_CURSOR", "after_cursor"),
    ("cursor beyond the end", {**APP_SCOPE, "after_cursor": "9" * 18}, "INVALID_ARGUMENT", "INVALID_CURSOR", "after_cursor"),
    ("unknown kind", {**SESSION_SCOPE, "kinds": [99]}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "kinds"),
    ("unspecified kind", {**APP_SCOPE, "kinds": [0]}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "kinds"),
    ("unknown scope", {**SESSION_SCOPE, "scope": 7}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "scope"),
    ("no app", {**APP_SCOPE, "app_name": ""}, "INVALID_ARGUMENT", "MISSING_FIELD", "app_name"),
    ("session scope without session", {**SESSION_SCOPE, "session_id": ""}, "INVALID_ARGUMENT", "MISSING_FIELD", "session_id"),
    ("user scope without user", {**USER_SCOPE, "user_id": ""}, "INVALID_ARGUMENT", "MISSING_FIELD", "user_id"),
    ("app scope with a user", {**APP_SCOPE, "user_id": USER}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "user_id"),
    ("user scope with a session", {**USER_SCOPE, "session_id": SESSION}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "session_id"),
    ("session scope with a cursor", {**SESSION_SCOPE, "after_cursor": "1"}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "after_cursor"),
    ("user scope with a sequence", {**USER_SCOPE, "after_sequence": 1}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "after_sequence"),
    ("empty author", {**SESSION_SCOPE, "authors": [""]}, "INVALID_ARGUMENT", "MISSING_FIELD", "authors[0]"),
    ("padded branch", {**SESSION_SCOPE, "branches": ["", " a"]}, "INVALID_ARGUMENT", "INVALID_ID", "branches[1]"),
    ("negative heartbeat", {**SESSION_SCOPE, "heartbeat_seconds": -1}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "heartbeat_seconds"),
    ("endless heartbeat", {**APP_SCOPE, "heartbeat_seconds": 3601}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "heartbeat_seconds"),
    ("negative batch", {**SESSION_SCOPE, "max_events_per_frame": -1}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "max_events_per_frame"),
    ("huge batch", {**APP_SCOPE, "max_events_per_frame": 1001}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "max_events_per_frame"),
]  # fmt: skip

WATCH_CASES: list[tuple[str, dict[str, Any], str, str, str | None]] = [
    ("missing session", {**SESSION_SCOPE, "session_id": "nope"}, "NOT_FOUND", "SESSION_NOT_FOUND", None),
    ("no user", {**SESSION_SCOPE, "user_id": ""}, "INVALID_ARGUMENT", "MISSING_FIELD", "user_id"),
    ("padded session id", {**SESSION_SCOPE, "session_id": " s1"}, "INVALID_ARGUMENT", "INVALID_ID", "session_id"),
    ("negative heartbeat", {**SESSION_SCOPE, "heartbeat_seconds": -5}, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "heartbeat_seconds"),
]  # fmt: skip


async def prepare(client: ContextEngineClient) -> None:
    await client.create_session(APP, USER, SESSION)
    await client.append_events(APP, USER, SESSION, [message("a"), message("b")])


@pytest.mark.parametrize(
    ("request_fields", "code", "reason", "field"),
    [case[1:] for case in SUBSCRIBE_CASES],
    ids=[case[0] for case in SUBSCRIBE_CASES],
)
async def test_subscribe_events_rejects(
    client: ContextEngineClient,
    request_fields: dict[str, Any],
    code: str,
    reason: str,
    field: str | None,
) -> None:
    await prepare(client)
    stub = subscription_service_pb2_grpc.SubscriptionServiceStub(client.channel)
    error = await stream_error(stub.SubscribeEvents(spb.SubscribeEventsRequest(**request_fields)))
    assert (error.code.name, error.reason) == (code, reason), error
    if field is not None:
        assert error.metadata == {"field": field}


@pytest.mark.parametrize(
    ("request_fields", "code", "reason", "field"),
    [case[1:] for case in WATCH_CASES],
    ids=[case[0] for case in WATCH_CASES],
)
async def test_watch_session_state_rejects(
    client: ContextEngineClient,
    request_fields: dict[str, Any],
    code: str,
    reason: str,
    field: str | None,
) -> None:
    await prepare(client)
    stub = subscription_service_pb2_grpc.SubscriptionServiceStub(client.channel)
    call = stub.WatchSessionState(spb.WatchSessionStateRequest(**request_fields))
    error = await stream_error(call)
    assert (error.code.name, error.reason) == (code, reason), error
    if field is not None:
        assert error.metadata == {"field": field}


async def test_the_client_raises_bad_input_without_retrying(
    client: ContextEngineClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await prepare(client)
    attempts = 0
    stub = client._subscriptions
    original = stub.SubscribeEvents

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal attempts
        attempts += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(stub, "SubscribeEvents", counting)
    stream = client.subscribe_events(APP, cursor="9" * 18)  # beyond the end of any log
    async with contextlib.aclosing(stream):
        with pytest.raises(ContextEngineError) as info:
            await anext(stream)
    assert info.value.reason == "INVALID_CURSOR"
    assert attempts == 1
    with pytest.raises(ValueError, match="sequence"):
        await anext(client.subscribe_events(APP, USER, SESSION, cursor="abc"))
