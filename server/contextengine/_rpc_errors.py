"""Client-side errors: a failed call as a gRPC code plus the server's ``ErrorInfo``."""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


class RpcError(Exception):
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


async def to_rpc_error(err: grpc.aio.AioRpcError) -> RpcError:
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
    return RpcError(err.code(), err.details() or "", reason, metadata)
