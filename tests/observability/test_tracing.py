"""Traces into an in-memory exporter: the span tree of real RPCs.

* An RPC made inside an agent's span: the Python client sends ``traceparent``, the sidecar's
  SERVER span is that span's child (same trace, remote parent) with the app/user/session
  attributes and the status code, and the store commit is a child of the RPC's span.
* Compact: the summarizer call and the summary's commit are children of the Compact span.
* An error: the span carries the code (NOT_FOUND is the client's error, not the server's).
* The gRPC health service is not traced and its Watch stream works (the pitfall of the
  OpenTelemetry interceptor, which this sidecar does not use).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.v1 import compaction_service_pb2 as kpb, config_pb2
from tests.observability.helpers import ScriptedSummarizer, sidecar
from tests.service.helpers import text_event

pytestmark = pytest.mark.unit

APP, USER = "traced-app", "u1"
APPEND = "contextengine.v1.SessionService/AppendEvent"
COMPACT = "contextengine.v1.CompactionService/Compact"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _children(spans: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


async def test_an_rpc_span_is_the_child_of_the_clients_span(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with (
        sidecar(tmp_path / "ce.db", tracer_provider=provider) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        await client.create_session(APP, USER, "s1")
        exporter.clear()
        agent = provider.get_tracer("the agent")
        with agent.start_as_current_span("agent turn") as turn:
            await client.append_event(APP, USER, "s1", text_event("hello"))
    spans = exporter.get_finished_spans()
    rpc = _one(spans, APPEND)
    assert rpc.kind == SpanKind.SERVER
    assert rpc.parent is not None
    assert rpc.parent.is_remote
    assert rpc.parent.span_id == turn.get_span_context().span_id
    assert rpc.context is not None
    assert rpc.context.trace_id == turn.get_span_context().trace_id
    assert dict(rpc.attributes or {}) == {
        "rpc.system": "grpc",
        "rpc.service": "contextengine.v1.SessionService",
        "rpc.method": "AppendEvent",
        "contextengine.app": APP,
        "contextengine.user": USER,
        "contextengine.session": "s1",
        "rpc.grpc.status_code": 0,
    }
    assert [s.name for s in _children(spans, rpc)] == ["store.commit"]


async def test_compaction_spans_nest_in_the_compact_rpc(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with (
        sidecar(
            tmp_path / "ce.db", tracer_provider=provider, summarizer=ScriptedSummarizer()
        ) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        app = config_pb2.AppConfig(app_name=APP)
        app.events_compaction_config.CopyFrom(
            config_pb2.EventsCompactionConfig(compaction_interval=2, overlap_size=1)
        )
        await client.update_app_config(app)
        await client.create_session(APP, USER, "s1")
        for n in range(2):
            await client.append_event(APP, USER, "s1", text_event(f"q{n}", invocation_id=f"i{n}"))
        exporter.clear()
        response = await client.compact(
            APP, USER, "s1", trigger=kpb.COMPACTION_TRIGGER_AFTER_INVOCATION
        )
        assert response.HasField("summary")
    spans = exporter.get_finished_spans()
    compact = _one(spans, COMPACT)
    assert compact.parent is None  # no traceparent: a root span
    children = _children(spans, compact)
    assert [s.name for s in children] == ["summarizer.summarize", "store.commit"]
    summarize = children[0]
    assert dict(summarize.attributes or {}) == {"summarizer": "scripted", "events": 2}


async def test_an_error_is_recorded_on_the_span(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with (
        sidecar(tmp_path / "ce.db", tracer_provider=provider) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        with pytest.raises(ContextEngineError):
            await client.append_event(APP, USER, "missing", text_event("x"))
    rpc = _one(exporter.get_finished_spans(), APPEND)
    assert (rpc.attributes or {})["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert rpc.status.status_code == StatusCode.UNSET  # a client error, not the server's


async def test_health_is_not_traced_and_watch_works(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with (
        sidecar(tmp_path / "ce.db", tracer_provider=provider) as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=5)
        first = await asyncio.wait_for(watch.read(), 5)
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
    assert exporter.get_finished_spans() == ()
