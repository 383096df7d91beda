"""Turns domain errors into gRPC statuses carrying a ``google.rpc.ErrorInfo``.

A status always fits the peer's metadata limit (8 KiB by default; a larger one reaches the client
as a transport error without ErrorInfo): it travels in the trailers twice, as ``grpc-message``
(percent-encoded: up to 3 bytes per byte of the message) and inside ``grpc-status-details-bin``
(base64: 4 bytes per 3, holding the message again and the ErrorInfo). So the message is cut to
:data:`MAX_MESSAGE_BYTES` and the metadata values to :data:`MAX_METADATA_VALUE_BYTES` each and
:data:`MAX_METADATA_BYTES` together (see ``contextengine.core.echo.shorten``): at most about
3 * 512 + 4 / 3 * (512 + 2048 + keys and framing) bytes, under 6 KiB.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from contextengine.core.echo import shorten
from contextengine.core.errors import DOMAIN, Code, ContextEngineError

_LOG = logging.getLogger("contextengine.rpc")

#: the longest status message sent, in UTF-8 bytes
MAX_MESSAGE_BYTES = 512
#: the longest ErrorInfo metadata value sent, in UTF-8 bytes (an id of 256 four-byte characters)
MAX_METADATA_VALUE_BYTES = 1024
#: the most bytes all ErrorInfo metadata values of one status take together
MAX_METADATA_BYTES = 2048
#: the most bytes a metadata key takes (keys are the engine's own names)
_MAX_KEY_BYTES = 64

_RPC_CODES: dict[Code, int] = {
    Code.INVALID_ARGUMENT: code_pb2.INVALID_ARGUMENT,
    Code.NOT_FOUND: code_pb2.NOT_FOUND,
    Code.ALREADY_EXISTS: code_pb2.ALREADY_EXISTS,
    Code.FAILED_PRECONDITION: code_pb2.FAILED_PRECONDITION,
    Code.ABORTED: code_pb2.ABORTED,
    Code.RESOURCE_EXHAUSTED: code_pb2.RESOURCE_EXHAUSTED,
    Code.UNAVAILABLE: code_pb2.UNAVAILABLE,
    Code.INTERNAL: code_pb2.INTERNAL,
    Code.UNAUTHENTICATED: code_pb2.UNAUTHENTICATED,
    Code.PERMISSION_DENIED: code_pb2.PERMISSION_DENIED,
}


def bounded_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """``metadata`` with values shortened to fit the budgets: values that fit an equal share of
    what the shorter ones leave are kept whole, the longest ones share the rest."""
    sizes = {key: len(value.encode("utf-8", "replace")) for key, value in metadata.items()}
    cap = MAX_METADATA_VALUE_BYTES
    remaining = MAX_METADATA_BYTES
    ordered = sorted(sizes.values())
    for i, size in enumerate(ordered):
        share = remaining // (len(ordered) - i)
        if size > min(share, cap):
            cap = min(cap, share)
            break
        remaining -= size
    return {shorten(key, _MAX_KEY_BYTES): shorten(value, cap) for key, value in metadata.items()}


def to_status(error: ContextEngineError) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=DOMAIN, metadata=bounded_metadata(error.metadata)
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(
        code=_RPC_CODES[error.code],
        message=shorten(error.message, MAX_MESSAGE_BYTES),
        details=[detail],
    )
    result: grpc.Status = rpc_status.to_status(status)
    return result


def internal_error(exc: BaseException) -> ContextEngineError:
    _LOG.exception("unexpected error", exc_info=exc)
    return ContextEngineError("INTERNAL", f"internal error: {type(exc).__name__}")
