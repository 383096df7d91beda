"""``SidecarTelemetry``: the engine's ``Telemetry`` hook, recorded as Prometheus metrics and
OpenTelemetry spans (each optional)."""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry import trace

from contextengine.core.telemetry import Attributes, Telemetry
from contextengine.observability.metrics import Metrics

__all__ = ["SidecarTelemetry"]


class SidecarTelemetry(Telemetry):
    """Counts into ``metrics`` (None: no metrics) and makes spans with ``tracer`` (None: no
    spans); a span is made only inside a sampled parent (an RPC's span), so background work
    outside any RPC adds no root traces."""

    def __init__(self, metrics: Metrics | None, tracer: trace.Tracer | None) -> None:
        self._metrics = metrics
        self._tracer = tracer

    def span(self, name: str, attributes: Attributes | None = None) -> AbstractContextManager[None]:
        tracer = self._tracer
        if tracer is None or not trace.get_current_span().is_recording():
            return super().span(name, attributes)
        return tracer.start_as_current_span(name, attributes=attributes)  # type: ignore[return-value]

    def store_commit(self, seconds: float, ok: bool) -> None:
        metrics = self._metrics
        if metrics is not None:
            (metrics.commit_ok if ok else metrics.commit_failed).observe(seconds)

    def store_busy(self, cause: str) -> None:
        if self._metrics is not None:
            self._metrics.store_busy.labels(cause).inc()

    def store_delivery_held(self, seconds: float) -> None:
        if self._metrics is not None:
            self._metrics.delivery_held.set(seconds)

    def compaction(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.compactions.labels(outcome).inc()

    def summarizer_call(self, summarizer: str, seconds: float, ok: bool) -> None:
        if self._metrics is not None:
            self._metrics.summarizer_seconds.labels(summarizer, "ok" if ok else "failed").observe(
                seconds
            )

    def context_built(self, tokens: int, cache_action: str) -> None:
        if self._metrics is not None:
            self._metrics.context_tokens.observe(tokens)
            if cache_action:
                self._metrics.cache_decisions.labels(cache_action).inc()

    def memory_ingested(self, added: int, removed: int) -> None:
        if self._metrics is not None:
            self._metrics.memory_ingestions.inc()
            self._metrics.memory_entries.labels("added").inc(added)
            self._metrics.memory_entries.labels("removed").inc(removed)
