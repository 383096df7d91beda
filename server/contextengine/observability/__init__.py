"""The sidecar's observability, at the transport level: the operations HTTP port (``/healthz``,
``/readyz``, ``/metrics``), Prometheus metrics, OpenTelemetry traces and JSON logs.

:class:`Observability` is what ``ContextEngineServer`` builds from its settings: the engine's
``Telemetry`` hook (``open_engine(telemetry=...)``) and the handler wrapper's ``RpcObserver``,
both no-ops (``NO_TELEMETRY``, None) when neither metrics nor traces are on, so an engine
without them pays nothing but a method call. The layers below never import this package
(``tests/test_layers.py``); ``docs/design/observability.md`` describes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from opentelemetry import trace

from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.engine import Engine
from contextengine.observability.logs import JsonFormatter, use_log_format
from contextengine.observability.metrics import EngineCollector, GcCollector, GcSource, Metrics
from contextengine.observability.ops_server import Handler, OpsServer, parse_listen
from contextengine.observability.rpc import SidecarRpcObserver
from contextengine.observability.telemetry import SidecarTelemetry
from contextengine.observability.tracing import otlp_provider
from contextengine.version import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

_LOG = logging.getLogger("contextengine.observability")

__all__ = [
    "EngineCollector",
    "GcSource",
    "JsonFormatter",
    "Metrics",
    "Observability",
    "OpsServer",
    "SidecarRpcObserver",
    "SidecarTelemetry",
    "parse_listen",
    "use_log_format",
]


class Observability:
    """One sidecar's metrics (when ``ops_listen`` serves them), traces (with
    ``tracer_provider``, or one exporting to ``otlp_endpoint``) and operations server."""

    def __init__(
        self,
        *,
        ops_listen: str | None,
        otlp_endpoint: str | None = None,
        sample_ratio: float = 1.0,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        if ops_listen:
            parse_listen(ops_listen)  # ValueError before anything starts
        if not 0.0 <= sample_ratio <= 1.0:
            raise ValueError("tracing_sample_ratio must be in [0, 1]")
        self._ops_listen = ops_listen or None
        self.metrics = Metrics() if self._ops_listen else None
        #: the provider this object made (and shuts down), not one it was given
        self._own_provider: TracerProvider | None = None
        if tracer_provider is None and otlp_endpoint:
            tracer_provider = self._own_provider = otlp_provider(otlp_endpoint, sample_ratio)
        tracer = (
            tracer_provider.get_tracer("contextengine", __version__)
            if tracer_provider is not None
            else None
        )
        on = self.metrics is not None or tracer is not None
        #: the engine's hook (``open_engine(telemetry=...)``)
        self.telemetry: Telemetry = SidecarTelemetry(self.metrics, tracer) if on else NO_TELEMETRY
        #: the handler wrapper's observer (``generic_handler(observer=...)``); None when off
        self.rpc_observer = SidecarRpcObserver(self.metrics, tracer) if on else None
        self._ops: OpsServer | None = None
        self._collector: EngineCollector | None = None
        self._gc_collector: GcCollector | None = None

    @property
    def ops_port(self) -> int:
        """The operations server's bound port (0 when it is off or not started)."""
        return 0 if self._ops is None else self._ops.port

    async def start_ops(self, not_ready: Callable[[], str | None]) -> None:
        """Starts the operations server (if ``ops_listen``) before the engine opens, so that
        liveness answers during a long migration (and readiness says it is not done)."""
        if self._ops_listen is None or self.metrics is None:
            return
        ops = OpsServer(self._ops_listen, self.metrics.registry, not_ready)
        await ops.start()
        self._ops = ops
        _LOG.info("operations on http://%s (/healthz /readyz /metrics)", ops.address)

    def mount(self, prefix: str, handler: Handler) -> None:
        """Serves the paths under ``prefix`` on the operations server by ``handler`` (the
        inspector); RuntimeError when the operations server is off."""
        if self._ops is None:
            raise RuntimeError("the operations server is off (ops_listen)")
        self._ops.mount(prefix, handler)

    def watch(self, engine: Engine) -> None:
        """Counts the engine's commits and exposes its subscription gauges (once it is open)."""
        if self.metrics is not None and self._collector is None:
            self._collector = EngineCollector(engine)
            self.metrics.registry.register(self._collector)

    def watch_gc(self, policy: GcSource) -> None:
        """Exposes the garbage collector's collections, pauses and frozen objects."""
        if self.metrics is not None and self._gc_collector is None:
            self._gc_collector = GcCollector(policy)
            self.metrics.registry.register(self._gc_collector)

    async def stop(self) -> None:
        """Stops the operations server, then flushes and shuts down an own tracer provider."""
        ops, self._ops = self._ops, None
        if ops is not None:
            await ops.stop()
        collector, self._collector = self._collector, None
        if collector is not None:
            collector.close()
        provider, self._own_provider = self._own_provider, None
        if provider is not None:
            await asyncio.to_thread(provider.shutdown)  # flushes the batch: blocking
