"""OpenTelemetry traces of the sidecar, with the OpenTelemetry API and SDK directly.

The RPC spans come from the handler wrapper's observer (``rpc``), not from
``opentelemetry-instrumentation-grpc``'s interceptor: the wrapper already runs around every RPC
of our services (and only those: the gRPC health service's ``Watch`` streams, which that
interceptor breaks unless filtered, are never wrapped), knows the final status code after error
mapping, and costs nothing when tracing is off.

A sidecar traces when it is given a ``TracerProvider`` (tests give one with an in-memory
exporter) or when ``tracing_otlp_endpoint`` is set: then it makes its own provider, exporting
OTLP over gRPC in batches, with the parent-based ratio sampler of ``tracing_sample_ratio``.
The incoming W3C ``traceparent`` (and ``tracestate``) of a request makes its span a child of the
client's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from contextengine.version import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["METADATA_GETTER", "PROPAGATOR", "otlp_provider"]

#: W3C trace context (``traceparent``, ``tracestate``), the format every client sends
PROPAGATOR = TraceContextTextMapPropagator()


class _MetadataGetter(Getter[Mapping[str, str]]):
    """Reads a carrier made of a call's metadata (keys in lower case)."""

    def get(self, carrier: Mapping[str, str], key: str) -> list[str] | None:
        value = carrier.get(key)
        return None if value is None else [value]

    def keys(self, carrier: Mapping[str, str]) -> list[str]:
        return list(carrier)


METADATA_GETTER = _MetadataGetter()


def otlp_provider(endpoint: str, sample_ratio: float) -> TracerProvider:
    """A provider exporting to the OTLP/gRPC collector at ``endpoint`` (``http://host:4317``:
    plaintext; ``https://``: TLS), sampling ``sample_ratio`` of the traces no client decided."""
    # Imported here: the SDK and the exporter load only when traces are exported.
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    resource = Resource.create({"service.name": "contextengine", "service.version": __version__})
    provider = TracerProvider(
        resource=resource, sampler=ParentBased(TraceIdRatioBased(sample_ratio))
    )
    exporter: Any = OTLPSpanExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
