"""The operations HTTP server (``ops_listen``), off the API port, in the sidecar's own event loop:

* ``GET /healthz``: 200 while the process serves HTTP at all (liveness);
* ``GET /readyz``: 200 once the engine is open (the store migrated) and while its store can
  write, else 503 with the reason (STORAGE_FULL, STORAGE_UNAVAILABLE, starting, shutting down);
* ``GET /metrics``: the Prometheus text format (0.0.4, which every Prometheus reads; the names
  are all legacy-valid) of the sidecar's registry.

HTTP/1.1 is spoken by ``h11`` (the protocol library under httpx, already in the sidecar's
dependencies) over asyncio streams; one request per connection (``Connection: close``), which is
what probes and scrapers do. Not aiohttp: google-genai switches its own transport to aiohttp
whenever aiohttp is importable. Not ``prometheus_client.start_http_server`` (a thread): the
collector reads engine state on the loop that owns it, and the read-only inspector of issue #21
(pages and server-sent events, which h11 streams as well) will be served here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import h11
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

__all__ = ["OpsServer", "parse_listen"]

_TEXT = "text/plain; charset=utf-8"
#: a request's head may not be larger (probes and scrapers send a few hundred bytes)
_MAX_HEAD_BYTES = 16 * 1024
#: seconds a client gets to send its request
_READ_TIMEOUT = 10.0


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
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def address(self) -> str:
        """``host:port`` as bound (``[::1]:port`` for IPv6)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._exchange(reader, writer)
        except (ConnectionError, TimeoutError, h11.ProtocolError):
            pass  # a client that went away or spoke something else: nothing to answer
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD_BYTES)
        event: object = h11.NEED_DATA
        async with asyncio.timeout(_READ_TIMEOUT):
            while event is h11.NEED_DATA:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(4096))
        if not isinstance(event, h11.Request):
            return
        status, content_type, body = self._answer(event)
        headers = [
            ("content-type", content_type),
            ("content-length", str(len(body))),
            ("connection", "close"),
        ]
        if status == 405:
            headers.append(("allow", "GET"))
        writer.write(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
        if event.method != b"HEAD":
            writer.write(conn.send(h11.Data(data=body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()

    def _answer(self, request: h11.Request) -> tuple[int, str, bytes]:
        path = request.target.split(b"?", 1)[0]
        if path not in (b"/healthz", b"/readyz", b"/metrics"):
            return 404, _TEXT, b"not found\n"
        if request.method not in (b"GET", b"HEAD"):
            return 405, _TEXT, b"method not allowed\n"
        if path == b"/healthz":
            return 200, _TEXT, b"ok\n"
        if path == b"/readyz":
            problem = self._not_ready()
            if problem is None:
                return 200, _TEXT, b"ready\n"
            return 503, _TEXT, f"not ready: {problem}\n".encode()
        return 200, CONTENT_TYPE_PLAIN_0_0_4, generate_latest(self._registry)
