"""The operations HTTP server (``ops_listen``), off the API port, with aiohttp in the sidecar's
own event loop:

* ``GET /healthz``: 200 while the process serves HTTP at all (liveness);
* ``GET /readyz``: 200 once the engine is open (the store migrated) and while its store can
  write, else 503 with the reason (STORAGE_FULL, STORAGE_UNAVAILABLE, starting, shutting down);
* ``GET /metrics``: the Prometheus text format (0.0.4, which every Prometheus reads; the names
  are all legacy-valid) of the sidecar's registry.

aiohttp rather than ``prometheus_client.start_http_server``: it runs on the loop (no thread
reading engine state across threads), and the read-only inspector of issue #21 (pages and
server-sent events) will be served from the same application.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

__all__ = ["OpsServer", "parse_listen"]


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:port`` for IPv6) as (host, port); ValueError otherwise."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"ops_listen must be host:port, not {listen!r}")
    return host.strip("[]"), int(port)


class OpsServer:
    """Serves the three endpoints on ``listen``; ``not_ready()`` says why the sidecar is not
    ready (None: ready)."""

    def __init__(
        self, listen: str, registry: CollectorRegistry, not_ready: Callable[[], str | None]
    ) -> None:
        self._host, self._port = parse_listen(listen)
        self._registry = registry
        self._not_ready = not_ready
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        address = runner.addresses[0]
        self.port = int(address[1])

    @property
    def address(self) -> str:
        """``host:port`` as bound (``[::1]:port`` for IPv6)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{host}:{self.port}"

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        problem = self._not_ready()
        if problem is None:
            return web.Response(text="ready\n")
        return web.Response(status=503, text=f"not ready: {problem}\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
