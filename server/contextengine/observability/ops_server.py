"""The operations HTTP server (``ops_listen``), off the API port, in the sidecar's own event loop:

* ``GET /healthz``: 200 while the process serves HTTP at all (liveness);
* ``GET /readyz``: 200 once the engine is open (the store migrated) and while its store can
  write, else 503 with the reason (STORAGE_FULL, STORAGE_UNAVAILABLE, starting, shutting down);
* ``GET /metrics``: the Prometheus text format (0.0.4, which every Prometheus reads; the names
  are all legacy-valid) of the sidecar's registry;
* whatever is :meth:`OpsServer.mount` ed under a path prefix (the read-only inspector of issue
  #21 under ``/inspector/``): a handler gets an :class:`HttpRequest` and answers with an
  :class:`HttpResponse`, or a :class:`StreamedResponse` whose chunks are sent as they come
  (chunked transfer encoding: server-sent events), until the stream ends or the client goes away.

HTTP/1.1 is spoken by ``h11`` (the protocol library under httpx, already in the sidecar's
dependencies) over asyncio streams; one request per connection (``Connection: close``), which is
what probes and scrapers do. Not aiohttp: google-genai switches its own transport to aiohttp
whenever aiohttp is importable. Not ``prometheus_client.start_http_server`` (a thread): the
collector reads engine state on the loop that owns it, and the inspector's pages and server-sent
events are served on the same loop as the engine they read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

import h11
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from contextengine._compat import timeout

__all__ = [
    "Handler",
    "HttpRequest",
    "HttpResponse",
    "OpsServer",
    "StreamedResponse",
    "parse_listen",
]

_TEXT = "text/plain; charset=utf-8"
#: a request's head may not be larger (probes and scrapers send a few hundred bytes)
_MAX_HEAD_BYTES = 16 * 1024
#: seconds a client gets to send its request
_READ_TIMEOUT = 10.0


@dataclass(frozen=True)
class HttpRequest:
    """One request as a mounted handler sees it."""

    method: str
    #: the path as sent (percent-encoded: a handler decodes each segment), without the query
    path: str
    #: the query's parameters (the last value of a repeated name wins)
    query: dict[str, str]
    #: lowercase header names and their values, in order
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> list[str]:
        """Every value of header ``name`` (lowercase)."""
        return [value for key, value in self.headers if key == name]


@dataclass(frozen=True)
class HttpResponse:
    """A whole response."""

    status: int
    content_type: str
    body: bytes
    headers: Sequence[tuple[str, str]] = field(default_factory=tuple)


@dataclass(frozen=True)
class StreamedResponse:
    """A response whose body is sent chunk by chunk as ``chunks`` yields them; the iterator is
    closed (``aclose``) when the client goes away or the server stops."""

    status: int
    content_type: str
    chunks: AsyncIterator[bytes]
    headers: Sequence[tuple[str, str]] = field(default_factory=tuple)


#: what :meth:`OpsServer.mount` takes
Handler = Callable[[HttpRequest], Awaitable[HttpResponse | StreamedResponse]]


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
        self._mounts: list[tuple[str, Handler]] = []
        self.port = 0

    def mount(self, prefix: str, handler: Handler) -> None:
        """Serves every path starting with ``prefix`` (for example ``/inspector/``; the prefix
        without its trailing slash redirects to it) by ``handler``. The built-in endpoints
        cannot be replaced."""
        if not prefix.startswith("/") or prefix in ("/healthz", "/readyz", "/metrics"):
            raise ValueError(f"cannot mount {prefix!r}")
        self._mounts.append((prefix, handler))

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
        async with timeout(_READ_TIMEOUT):
            while event is h11.NEED_DATA:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(4096))
        if not isinstance(event, h11.Request):
            return
        answer = await self._mounted(event)
        if answer is None:
            status, content_type, body = self._answer(event)
            answer = HttpResponse(
                status, content_type, body, [("allow", "GET")] if status == 405 else []
            )
        if isinstance(answer, StreamedResponse):
            await self._stream(conn, reader, writer, answer)
            return
        headers = [
            ("content-type", answer.content_type),
            ("content-length", str(len(answer.body))),
            ("connection", "close"),
            *answer.headers,
        ]
        writer.write(conn.send(h11.Response(status_code=answer.status, headers=headers)) or b"")
        if event.method != b"HEAD":
            writer.write(conn.send(h11.Data(data=answer.body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()

    async def _mounted(self, request: h11.Request) -> HttpResponse | StreamedResponse | None:
        """The answer of the handler mounted where ``request`` goes (None: none is)."""
        target = request.target.decode("latin-1")
        path, _, raw_query = target.partition("?")
        for prefix, handler in self._mounts:
            if path == prefix.rstrip("/") and prefix.endswith("/"):
                return HttpResponse(
                    308, _TEXT, b"moved\n", [("location", prefix)]
                )  # /inspector -> /inspector/
            if path.startswith(prefix):
                headers = tuple(
                    (name.decode("latin-1").lower(), value.decode("latin-1"))
                    for name, value in request.headers
                )
                query = dict(parse_qsl(raw_query, keep_blank_values=True))
                return await handler(
                    HttpRequest(request.method.decode("latin-1"), path, query, headers)
                )
        return None

    async def _stream(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        answer: StreamedResponse,
    ) -> None:
        """Sends ``answer`` chunk by chunk (h11 frames them: chunked transfer encoding) until it
        ends, or until the client closes its side (the chunks' iterator is then closed)."""
        headers = [
            ("content-type", answer.content_type),
            ("connection", "close"),
            *answer.headers,
        ]
        chunks = answer.chunks
        gone = asyncio.create_task(_until_closed(reader))
        try:
            writer.write(conn.send(h11.Response(status_code=answer.status, headers=headers)) or b"")
            await writer.drain()
            while True:
                following = asyncio.ensure_future(anext(chunks))
                await asyncio.wait({following, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not following.done():  # the client went away
                    following.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await following
                    return
                try:
                    chunk = following.result()
                except StopAsyncIteration:
                    break
                writer.write(conn.send(h11.Data(data=chunk)) or b"")
                await writer.drain()
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            await writer.drain()
        finally:
            gone.cancel()
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

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


async def _until_closed(reader: asyncio.StreamReader) -> None:
    """Returns when the client closed its side of the connection (it sends nothing more on a
    streamed response: whatever it sends is dropped)."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(4096):
            pass
