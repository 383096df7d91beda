"""Domain errors and the one table that maps them to gRPC status codes.

Every error the engine raises is a :class:`ContextEngineError` carrying an ``ErrorReason`` name
(see ``proto/contextengine/v1/errors.proto``) and string metadata. The service layer turns it into a
gRPC status with a ``google.rpc.ErrorInfo`` detail; nothing else in the code base knows about gRPC
status codes.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

DOMAIN = "contextengine.v1"


class Code(enum.Enum):
    """gRPC status codes used by the engine (names match ``grpc.StatusCode``)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    ABORTED = "ABORTED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"


#: reason (ErrorReason value name without its prefix) -> status code. The single mapping table.
REASON_CODES: Mapping[str, Code] = {
    "MISSING_FIELD": Code.INVALID_ARGUMENT,
    "INVALID_ID": Code.INVALID_ARGUMENT,
    "INVALID_STATE": Code.INVALID_ARGUMENT,
    "INVALID_EVENT": Code.INVALID_ARGUMENT,
    "INVALID_COMPACTION_CONFIG": Code.INVALID_ARGUMENT,
    "INVALID_CACHE_CONFIG": Code.INVALID_ARGUMENT,
    "INVALID_PAGE_TOKEN": Code.INVALID_ARGUMENT,
    "INVALID_ARGUMENT": Code.INVALID_ARGUMENT,
    "INVALID_CURSOR": Code.INVALID_ARGUMENT,
    "INVALID_SUMMARIZER_CONFIG": Code.INVALID_ARGUMENT,
    "INVALID_COMPACTION_RANGE": Code.INVALID_ARGUMENT,
    "INVALID_MEMORY_CONFIG": Code.INVALID_ARGUMENT,
    "INVALID_MODEL_INPUT": Code.INVALID_ARGUMENT,
    "UNKNOWN_CONTEXT_TOOL": Code.INVALID_ARGUMENT,
    "INVALID_TOOL_ARGUMENTS": Code.INVALID_ARGUMENT,
    "SESSION_NOT_FOUND": Code.NOT_FOUND,
    "INVOCATION_NOT_FOUND": Code.NOT_FOUND,
    "EVENT_NOT_FOUND": Code.NOT_FOUND,
    "NOT_A_SUMMARY": Code.FAILED_PRECONDITION,
    "COMPACTION_PLAN_STALE": Code.FAILED_PRECONDITION,
    "COMPACTION_NOT_CONFIGURED": Code.FAILED_PRECONDITION,
    "CONTEXT_TOOLS_DISABLED": Code.FAILED_PRECONDITION,
    "CONTEXT_EDIT_REFUSED": Code.FAILED_PRECONDITION,
    "SESSION_ALREADY_EXISTS": Code.ALREADY_EXISTS,
    "EVENT_ID_CONFLICT": Code.ALREADY_EXISTS,
    "SEQUENCE_MISMATCH": Code.ABORTED,
    "REQUEST_TOO_LARGE": Code.RESOURCE_EXHAUSTED,
    "SUBSCRIBER_LAGGED": Code.RESOURCE_EXHAUSTED,
    "STORAGE_FULL": Code.RESOURCE_EXHAUSTED,
    "SHUTTING_DOWN": Code.UNAVAILABLE,
    "STORAGE_UNAVAILABLE": Code.UNAVAILABLE,
    "STORAGE_BUSY": Code.UNAVAILABLE,
    "INTERNAL": Code.INTERNAL,
    "UNAUTHENTICATED": Code.UNAUTHENTICATED,
    "TOKEN_INVALID": Code.UNAUTHENTICATED,
    "PERMISSION_DENIED": Code.PERMISSION_DENIED,
}


class ContextEngineError(Exception):
    """An error with a machine-readable reason; the message is for humans."""

    def __init__(self, reason: str, message: str, **metadata: object) -> None:
        if reason not in REASON_CODES:
            raise ValueError(f"unknown error reason {reason!r}")
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = {k: str(v) for k, v in metadata.items()}

    @property
    def code(self) -> Code:
        return REASON_CODES[self.reason]

    def __repr__(self) -> str:
        return f"ContextEngineError({self.reason!r}, {self.message!r}, {self.metadata!r})"


def invalid(reason: str, field: str, message: str) -> ContextEngineError:
    """An INVALID_ARGUMENT error about one request field."""
    return ContextEngineError(reason, message, field=field)


def session_not_found(app_name: str, user_id: str, session_id: str) -> ContextEngineError:
    return ContextEngineError(
        "SESSION_NOT_FOUND",
        f"session {session_id!r} of user {user_id!r} in app {app_name!r} does not exist",
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
    )


def session_already_exists(session_id: str) -> ContextEngineError:
    return ContextEngineError(
        "SESSION_ALREADY_EXISTS",
        f"a session with id {session_id!r} already exists",
        session_id=session_id,
    )


def event_id_conflict(event_id: str, sequence: int) -> ContextEngineError:
    return ContextEngineError(
        "EVENT_ID_CONFLICT",
        f"event {event_id!r} is already recorded (sequence {sequence}) with a different payload",
        event_id=event_id,
        sequence=sequence,
    )


def sequence_mismatch(expected: int, current: int) -> ContextEngineError:
    return ContextEngineError(
        "SEQUENCE_MISMATCH",
        f"expected last sequence {expected} but the session is at {current}",
        expected_last_sequence=expected,
        current_last_sequence=current,
    )
