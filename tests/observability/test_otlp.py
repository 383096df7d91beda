"""``tracing_otlp_endpoint``: the sidecar exports its spans over OTLP/gRPC to a collector (here a
real gRPC server speaking the OTLP trace service, kept by the test), flushed when it stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from contextengine.client import ContextEngineClient
from contextengine.settings import ServerSettings
from contextengine.transport import ContextEngineServer
from tests.service.helpers import text_event

pytestmark = pytest.mark.service


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def Export(self, request: Any, context: Any) -> Any:
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


async def test_spans_reach_an_otlp_collector(tmp_path: Path) -> None:
    collector = Collector()
    otlp = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        collector, otlp
    )
    port = otlp.add_insecure_port("127.0.0.1:0")
    await otlp.start()
    try:
        settings = ServerSettings(
            db=str(tmp_path / "ce.db"),
            listen="127.0.0.1:0",
            tracing_otlp_endpoint=f"http://127.0.0.1:{port}",
        )
        server = ContextEngineServer(settings)
        await server.start()
        try:
            async with ContextEngineClient(server.target, attempts=1) as client:
                await client.create_session("otlp-app", "u1", "s1")
                await client.append_event("otlp-app", "u1", "s1", text_event("hi"))
        finally:
            await server.stop(grace=1.0)  # flushes the batch
    finally:
        await otlp.stop(0)
    names: list[str] = []
    services: set[str] = set()
    for request in collector.requests:
        for resource in request.resource_spans:
            for attribute in resource.resource.attributes:
                if attribute.key == "service.name":
                    services.add(attribute.value.string_value)
            for scope in resource.scope_spans:
                names.extend(span.name for span in scope.spans)
    assert services == {"contextengine"}
    assert sorted(names) == sorted(
        [
            "contextengine.v1.SessionService/CreateSession",
            "contextengine.v1.SessionService/AppendEvent",
            "store.commit",
            "store.commit",
        ]
    )
