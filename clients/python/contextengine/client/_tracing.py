"""W3C trace context on outgoing calls: when the agent's process traces with OpenTelemetry and a
span is current, every call carries its ``traceparent`` (and ``tracestate``), so the sidecar's
span of the RPC is a child of the agent's (``docs/design/observability.md``).

OpenTelemetry is optional for the client: without ``opentelemetry-api`` installed nothing is
added (:func:`trace_context_interceptor` returns None)."""

from __future__ import annotations

from collections.abc import Sequence

from contextengine.client._metadata import MetadataInterceptor

__all__ = ["TraceContext", "trace_context_interceptor"]

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - the client without OpenTelemetry
    _trace = None  # type: ignore[assignment]


class TraceContext(MetadataInterceptor):
    """Adds the current span's ``traceparent`` / ``tracestate`` to a call's metadata."""

    def __init__(self) -> None:
        self._propagator = TraceContextTextMapPropagator()

    def pairs(self) -> Sequence[tuple[str, str]]:
        if not _trace.get_current_span().get_span_context().is_valid:
            return ()
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return tuple(carrier.items())


def trace_context_interceptor() -> TraceContext | None:
    """The interceptor, or None when OpenTelemetry is not installed."""
    return None if _trace is None else TraceContext()
