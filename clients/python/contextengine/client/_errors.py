"""Client-side errors: a failed call as a gRPC code plus the server's ``ErrorInfo``."""

from __future__ import annotations

import re
from collections.abc import Mapping

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

#: grpc core's own words when a message is longer than the receiving side's bound (the server's
#: transport bound, twice ``--max-request-bytes``, or this client's receive limit) or than this
#: client's send limit; it then answers RESOURCE_EXHAUSTED with no ErrorInfo
_TRANSPORT_TOO_LARGE = re.compile(r"(Received|Sent) message larger than max \((\d+) vs\. (\d+)\)")


class ContextEngineError(Exception):
    """A failed call: the gRPC ``code``, the ``ErrorInfo`` ``reason`` ('' when the failure came
    from the transport) and its ``metadata``."""

    def __init__(
        self, code: grpc.StatusCode, message: str, reason: str, metadata: Mapping[str, str]
    ) -> None:
        super().__init__(f"{code.name}: {message}" + (f" [{reason}]" if reason else ""))
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = dict(metadata)

    def is_invalid_id(self, field: str) -> bool:
        """Whether the server refused the id in ``field`` (``"session_id"``, ...) before looking
        anything up: missing (MISSING_FIELD) or malformed (INVALID_ID: too long, control
        characters, surrounding whitespace). Such an id names nothing, so the ADK drop-ins answer
        a get of it as ADK does a get of a missing session."""
        return (
            self.reason in ("MISSING_FIELD", "INVALID_ID") and self.metadata.get("field") == field
        )


def transport_too_large(
    code: grpc.StatusCode, message: str, receive_limit: int | None
) -> dict[str, str] | None:
    """The ``REQUEST_TOO_LARGE`` metadata for a status that grpc core itself sent about an
    oversized request (the server's transport refused it unread, or this client would not send
    it), or None. A "received" refusal whose bound is this client's own ``receive_limit`` was about
    a response, not the request, and stays a bare RESOURCE_EXHAUSTED; so does every "received"
    refusal when ``receive_limit`` is None (a stream's frames, where only responses are large)."""
    if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    match = _TRANSPORT_TOO_LARGE.search(message)
    if match is None:
        return None
    direction, size, bound = match.group(1), int(match.group(2)), int(match.group(3))
    if direction == "Received" and receive_limit in (None, bound):
        return None
    side = "server_transport" if direction == "Received" else "client"
    return {"request_bytes": str(size), "transport_limit_bytes": str(bound), "refused_by": side}


async def to_client_error(
    err: grpc.aio.AioRpcError, receive_limit: int | None = None
) -> ContextEngineError:
    """``err`` with the server's ErrorInfo; grpc's own refusal of an oversized request becomes
    ``REQUEST_TOO_LARGE`` too (see errors.proto), given the client's ``receive_limit``."""
    reason = ""
    metadata: dict[str, str] = {}
    try:
        status = rpc_status.from_call(err)
    except ValueError:
        status = None
    if status is not None:
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason = info.reason
                metadata = dict(info.metadata)
                break
    message = err.details() or ""
    if not reason:
        too_large = transport_too_large(err.code(), message, receive_limit)
        if too_large is not None:
            reason, metadata = "REQUEST_TOO_LARGE", too_large
    return ContextEngineError(err.code(), message, reason, metadata)
