"""Oversized requests against the real sidecar: the ErrorInfo up to twice the limit, bounded
memory beyond it.

grpc core reads a message's 5-byte length prefix and refuses a message longer than
``grpc.max_receive_message_length`` before reading its body, with its own RESOURCE_EXHAUSTED
("Received message larger than max") and no way for the application to add an ErrorInfo. The
sidecar sets that bound to twice ``--max-request-bytes``: requests up to it are read and answered
with REQUEST_TOO_LARGE and an ErrorInfo, larger ones get gRPC's bare status, and no request makes
the sidecar hold more than about three times the bound (measured: a 256 MiB request with the
bound at -1, unlimited, raised the server's peak RSS by about 790 MB; with a bound, by under 5 MB).
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_status import rpc_status

from contextengine.v1 import content_pb2, event_pb2, session_service_pb2 as pb
from tests.support.sidecar import SERVING, running_sidecar

pytestmark = [pytest.mark.process, pytest.mark.slow]

LIMIT = 1024 * 1024
METHOD = "/contextengine.v1.SessionService/AppendEvent"
#: the most the server's peak RSS may grow from oversized requests, in kB
GROWTH_KB = 64 * 1024


def _request(text_bytes: int) -> bytes:
    event = event_pb2.Event(
        author="user",
        content=content_pb2.Content(role="user", parts=[content_pb2.Part(text="x" * text_bytes)]),
    )
    request = pb.AppendEventRequest(app_name="a", user_id="u", session_id="s", event=event)
    return request.SerializeToString()


async def _call(channel: grpc.aio.Channel, request: bytes) -> grpc.aio.AioRpcError:
    append: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(METHOD)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await append(request, timeout=60.0)
    return raised.value


async def test_oversized_requests(tmp_path: Path) -> None:
    args = ["--max-request-bytes", str(LIMIT)]
    async with running_sidecar(tmp_path, tmp_path / "ce.db", "size", args) as server:
        options = [("grpc.max_send_message_length", -1)]
        async with grpc.aio.insecure_channel(server.target, options=options) as channel:
            # Within twice the limit: read, and answered with the ErrorInfo.
            error = await _call(channel, _request(LIMIT + LIMIT // 2))
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            status = rpc_status.from_call(error)
            assert status is not None, error.details()
            assert "REQUEST_TOO_LARGE" in str(status.details[0].value)
            peak = server.rss_kb("VmHWM")

            # Beyond it: refused by gRPC from the length prefix; memory stays flat.
            for size in (2 * LIMIT + 1024, 32 * LIMIT):
                error = await _call(channel, _request(size))
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "Received message larger than max" in (error.details() or "")
                assert rpc_status.from_call(error) is None
            growth = server.rss_kb("VmHWM") - peak
            assert growth < GROWTH_KB, f"peak RSS grew by {growth} kB"
            server.check_alive("after the oversized requests")
        assert await server.health() == SERVING
