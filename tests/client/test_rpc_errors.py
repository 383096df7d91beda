"""The error model the ADK drop-ins share with the client: ids refused before any lookup."""

from __future__ import annotations

import grpc
import pytest

from contextengine.client import ContextEngineError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("reason", ["MISSING_FIELD", "INVALID_ID"])
def test_an_id_refused_before_any_lookup_is_recognised_by_its_field(reason: str) -> None:
    err = ContextEngineError(
        grpc.StatusCode.INVALID_ARGUMENT, "bad id", reason, {"field": "session_id"}
    )
    assert err.is_invalid_id("session_id")
    assert not err.is_invalid_id("user_id")


def test_a_missing_session_is_not_a_refused_id() -> None:
    err = ContextEngineError(
        grpc.StatusCode.NOT_FOUND, "gone", "SESSION_NOT_FOUND", {"session_id": "s"}
    )
    assert not err.is_invalid_id("session_id")
