"""``SidecarRpcObserver``: what the sidecar records of every RPC (the handler wrapper's
``RpcObserver``): its count and latency by method and code, a SERVER span (child of the
client's when the request carries a W3C ``traceparent``) made current for the RPC's work, and
the ids its log line carries. Only ids are read from requests, never contents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from opentelemetry import context as otel_context, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from contextengine.observability.metrics import Metrics
from contextengine.observability.tracing import METADATA_GETTER, PROPAGATOR
from contextengine.service import Metadata

__all__ = ["SidecarRpcObserver"]

#: the request fields an RPC's span and log line name it by
_IDS = (("app_name", "app"), ("user_id", "user"), ("session_id", "session"))
_TRACE_KEYS = frozenset({"traceparent", "tracestate"})
#: server-side codes that make a span an error (OpenTelemetry's gRPC conventions)
_SERVER_ERRORS = frozenset(
    {"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"}
)


def _status_number(code: str) -> int:
    member = grpc.StatusCode.__members__.get(code)
    return int(member.value[0]) if member is not None else 2  # UNKNOWN


class _Method:
    """One method's names, and its metric children by code (made once)."""

    __slots__ = ("children", "label", "method", "service")

    def __init__(self, full_name: str) -> None:
        self.service, _, self.method = full_name.rpartition(".")
        #: ``contextengine.v1.SessionService/AppendEvent``: the gRPC path without its slash
        self.label = f"{self.service}/{self.method}"
        self.children: dict[str, tuple[Any, Any]] = {}


class _Call:
    __slots__ = ("_ids", "_method", "_observer", "_span", "_token")

    def __init__(
        self,
        observer: SidecarRpcObserver,
        method: _Method,
        ids: dict[str, str],
        span: Span | None,
        token: object,
    ) -> None:
        self._observer = observer
        self._method = method
        self._ids = ids
        self._span = span
        self._token = token

    def log_fields(self) -> Mapping[str, str]:
        fields = dict(self._ids)
        span = self._span
        if span is not None:
            ctx = span.get_span_context()
            if ctx.is_valid:
                fields["trace_id"] = format(ctx.trace_id, "032x")
                fields["span_id"] = format(ctx.span_id, "016x")
        return fields

    def end(self, code: str, seconds: float) -> None:
        metrics = self._observer.metrics
        if metrics is not None:
            children = self._method.children.get(code)
            if children is None:
                label = self._method.label
                children = self._method.children[code] = (
                    metrics.rpcs.labels(label, code),
                    metrics.rpc_seconds.labels(label, code),
                )
            children[0].inc()
            children[1].observe(seconds)
        span = self._span
        if span is None:
            return
        span.set_attribute("rpc.grpc.status_code", _status_number(code))
        if code in _SERVER_ERRORS:
            span.set_status(Status(StatusCode.ERROR, code))
        span.end()
        # An abandoned stream may end outside the RPC's task (see RpcCall.end): its context
        # is gone with the task, and detaching from another one would fail.
        if code != "CANCELLED" and self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]


class SidecarRpcObserver:
    """Counts into ``metrics`` (None: no metrics) and traces with ``tracer`` (None: no spans)."""

    def __init__(self, metrics: Metrics | None, tracer: trace.Tracer | None) -> None:
        self.metrics = metrics
        self._tracer = tracer
        self._methods: dict[str, _Method] = {}

    def begin(self, method: str, metadata: Metadata, request: object | None) -> _Call:
        info = self._methods.get(method)
        if info is None:
            info = self._methods[method] = _Method(method)
        ids: dict[str, str] = {}
        if request is not None:
            for field, name in _IDS:
                value = getattr(request, field, None)
                if isinstance(value, str) and value:
                    ids[name] = value
        tracer = self._tracer
        if tracer is None:
            return _Call(self, info, ids, None, None)
        carrier = {
            key: value for key, value in metadata if key in _TRACE_KEYS and isinstance(value, str)
        }
        parent = PROPAGATOR.extract(carrier, getter=METADATA_GETTER) if carrier else None
        attributes: dict[str, str] = {
            "rpc.system": "grpc",
            "rpc.service": info.service,
            "rpc.method": info.method,
        }
        for name, value in ids.items():
            attributes[f"contextengine.{name}"] = value
        span = tracer.start_span(
            info.label, context=parent, kind=SpanKind.SERVER, attributes=attributes
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        return _Call(self, info, ids, span, token)
