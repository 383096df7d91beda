"""Turns domain errors into gRPC statuses carrying a ``google.rpc.ErrorInfo``."""

from __future__ import annotations

import logging

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from contextengine.errors import DOMAIN, Code, ContextEngineError

_LOG = logging.getLogger("contextengine.rpc")

_RPC_CODES: dict[Code, int] = {
    Code.INVALID_ARGUMENT: code_pb2.INVALID_ARGUMENT,
    Code.NOT_FOUND: code_pb2.NOT_FOUND,
    Code.ALREADY_EXISTS: code_pb2.ALREADY_EXISTS,
    Code.FAILED_PRECONDITION: code_pb2.FAILED_PRECONDITION,
    Code.ABORTED: code_pb2.ABORTED,
    Code.RESOURCE_EXHAUSTED: code_pb2.RESOURCE_EXHAUSTED,
    Code.UNAVAILABLE: code_pb2.UNAVAILABLE,
    Code.INTERNAL: code_pb2.INTERNAL,
}


def to_status(error: ContextEngineError) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata=error.metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=_RPC_CODES[error.code], message=error.message, details=[detail])
    result: grpc.Status = rpc_status.to_status(status)
    return result


def internal_error(exc: BaseException) -> ContextEngineError:
    _LOG.exception("unexpected error", exc_info=exc)
    return ContextEngineError("INTERNAL", f"internal error: {type(exc).__name__}")
