"""W3C trace context on outgoing calls: when the agent's process traces with OpenTelemetry and a
span is current, every call carries its ``traceparent`` (and ``tracestate``), so the sidecar's
span of the RPC is a child of the agent's (``docs/design/observability.md``).

OpenTelemetry is optional for the client: without ``opentelemetry-api`` installed nothing is
added (:func:`trace_context_interceptor` returns None)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

__all__ = ["TraceContext", "trace_context_interceptor"]

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - the client without OpenTelemetry
    _trace = None  # type: ignore[assignment]


class TraceContext(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Adds the current span's ``traceparent`` / ``tracestate`` to a call's metadata."""

    def __init__(self) -> None:
        self._propagator = TraceContextTextMapPropagator()

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        if not _trace.get_current_span().get_span_context().is_valid:
            return details
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        for key, value in carrier.items():
            metadata.add(key, value)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(self._details(client_call_details), request)

    async def intercept_unary_stream(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> AsyncIterator[Any] | grpc.aio.UnaryStreamCall[Any, Any]:
        call: AsyncIterator[Any] | grpc.aio.UnaryStreamCall[Any, Any] = await continuation(
            self._details(client_call_details), request
        )
        return call


def trace_context_interceptor() -> TraceContext | None:
    """The interceptor, or None when OpenTelemetry is not installed."""
    return None if _trace is None else TraceContext()
