"""A local fake of the Gemini REST API, for driving the real google-genai client offline.

``start_fake_gemini()`` serves HTTP on ``127.0.0.1:<free port>`` from a thread and yields a
:class:`FakeGemini`. Point google-genai at it with ``HttpOptions(base_url=fake.base_url,
api_version="v1beta")`` and any API key.

* Every request is recorded (:class:`RecordedRequest`: method, path, query, lower-cased headers,
  parsed JSON body, the route that served it) in ``fake.requests``, in arrival order.
* Requests are dispatched through a route table (``fake.add_route(name, method, regex, handler)``):
  ``generateContent`` (``POST /v1beta/models/{model}:generateContent``) and the explicit cache
  API: ``POST /v1beta/cachedContents`` (route ``CACHE_CREATE``), ``GET /v1beta/cachedContents``
  (``CACHE_LIST``), ``GET|PATCH|DELETE /v1beta/cachedContents/{id}`` (``CACHE_GET``,
  ``CACHE_UPDATE``, ``CACHE_DELETE``). The cache routes keep the caches in ``fake.caches`` (name
  -> the stored JSON resource): a create stores the request's resource under a new
  ``cachedContents/fake-<n>`` name with ``expireTime`` = ``fake.now()`` + its ``ttl``; get, list,
  patch (a new ``ttl`` / ``expireTime``) and delete act on them (404 for unknown names).
* Each route answers from its script first (``fake.script(*replies, route=...)``: a queue of
  :class:`Reply` objects or callables ``RecordedRequest -> Reply``, consumed one per request), then
  from its default handler. The default ``generateContent`` answer is :func:`default_summary_text`
  of the prompt, with token counts derived from the prompt's length.
* Reply builders: :func:`summary_reply`, :func:`error_reply` (Gemini's error JSON),
  :func:`delayed` (answer late, to trip a client timeout), :func:`invalid_json`,
  :func:`no_candidates`, :func:`empty_parts`.

An unknown path answers 404 with a Gemini-style error body. Closing the fake wakes delayed
handlers, so a test never waits for a delay it no longer cares about.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "CACHE_CREATE",
    "CACHE_DELETE",
    "CACHE_GET",
    "CACHE_LIST",
    "CACHE_UPDATE",
    "FakeGemini",
    "RecordedRequest",
    "Reply",
    "default_summary_text",
    "delayed",
    "empty_parts",
    "error_reply",
    "invalid_json",
    "no_candidates",
    "start_fake_gemini",
    "summary_reply",
]

GENERATE_CONTENT = "generateContent"
CACHE_CREATE = "cachedContents.create"
CACHE_LIST = "cachedContents.list"
CACHE_GET = "cachedContents.get"
CACHE_UPDATE = "cachedContents.update"
CACHE_DELETE = "cachedContents.delete"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the fake received it."""

    method: str
    #: the path without the query string, e.g. "/v1beta/models/gemini-x:generateContent"
    path: str
    query: dict[str, list[str]]
    #: header names lower-cased
    headers: dict[str, str]
    #: the parsed JSON body (None when there was none or it was not JSON)
    body: Any
    raw_body: bytes
    #: name of the route that served it ("" when none matched)
    route: str
    #: the route pattern's named groups, e.g. {"model": "gemini-x"}
    params: dict[str, str] = field(default_factory=dict)

    def prompt_text(self) -> str:
        """The text parts of the request's last content, joined (a generateContent request)."""
        contents = (self.body or {}).get("contents") or [{}]
        parts = contents[-1].get("parts") or []
        return "".join(part.get("text", "") for part in parts)


@dataclass(frozen=True)
class Reply:
    """What the fake answers: a JSON ``body`` (or ``raw`` bytes sent as they are) with ``status``,
    after sleeping ``delay`` seconds."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    delay: float = 0.0

    def payload(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return json.dumps(self.body if self.body is not None else {}).encode()


#: A scripted answer: a fixed reply, or a function of the request.
Scripted = Reply | Callable[[RecordedRequest], Reply]
#: A route's default handler.
Handler = Callable[[RecordedRequest], Reply]


@dataclass
class _Route:
    name: str
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    script: deque[Scripted] = field(default_factory=deque)


def default_summary_text(prompt: str) -> str:
    """The default answer for ``prompt``: ``SUMMARY(<first 8 hex digits of its SHA-1>)``."""
    return f"SUMMARY({hashlib.sha1(prompt.encode()).hexdigest()[:8]})"


def _usage(prompt_tokens: int, candidates_tokens: int) -> dict[str, Any]:
    return {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": candidates_tokens,
        "totalTokenCount": prompt_tokens + candidates_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}],
    }


def summary_reply(
    text: str,
    *,
    usage: dict[str, Any] | None = None,
    thought: str | None = None,
    model_version: str = "fake-model-001",
) -> Reply:
    """A successful generateContent answer: one candidate with ``text`` (after a thought part
    when ``thought`` is given) and ``usage`` as ``usageMetadata`` (REST spelling)."""
    parts: list[dict[str, Any]] = []
    if thought is not None:
        parts.append({"text": thought, "thought": True, "thoughtSignature": "c2lnLTE="})
    parts.append({"text": text})
    body: dict[str, Any] = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage if usage is not None else _usage(10, 2),
        "modelVersion": model_version,
        "responseId": "fake-response",
    }
    return Reply(body=body)


def error_reply(status: int, message: str = "") -> Reply:
    """An HTTP error with Gemini's error JSON (``{"error": {"code", "message", "status"}}``)."""
    phrase = HTTPStatus(status).phrase.upper().replace(" ", "_")
    body = {"error": {"code": status, "message": message or phrase, "status": phrase}}
    return Reply(status=status, body=body)


def delayed(seconds: float, then: Reply | None = None) -> Reply:
    """``then`` (default: a summary of "late"), answered after ``seconds``."""
    base = then if then is not None else summary_reply("late")
    return Reply(status=base.status, body=base.body, raw=base.raw, delay=seconds)


def invalid_json() -> Reply:
    """A 200 answer whose body is not JSON."""
    return Reply(raw=b"{this is not json")


def no_candidates(block_reason: str | None = None) -> Reply:
    """A 200 answer without candidates (with ``promptFeedback.blockReason`` when given)."""
    body: dict[str, Any] = {"usageMetadata": _usage(10, 0), "modelVersion": "fake-model-001"}
    if block_reason is not None:
        body["promptFeedback"] = {"blockReason": block_reason}
    return Reply(body=body)


def empty_parts(finish_reason: str = "STOP") -> Reply:
    """A 200 answer with one candidate whose content has no parts."""
    body = {
        "candidates": [{"content": {"role": "model"}, "finishReason": finish_reason}],
        "usageMetadata": _usage(10, 0),
    }
    return Reply(body=body)


def _generate_content(request: RecordedRequest) -> Reply:
    prompt = request.prompt_text()
    prompt_tokens = max(1, len(prompt) // 4)
    return summary_reply(default_summary_text(prompt), usage=_usage(prompt_tokens, 5))


class FakeGemini:
    """The fake's state: routes, scripts and recorded requests (thread-safe)."""

    def __init__(self) -> None:
        self.base_url = ""
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._routes: list[_Route] = []
        #: set on close: wakes handlers sleeping through a delay
        self.closing = threading.Event()
        self.add_route(
            GENERATE_CONTENT,
            "POST",
            r"/v1beta/models/(?P<model>[^/:]+):generateContent",
            _generate_content,
        )
        #: the caches the cachedContents routes hold: name -> stored resource (REST JSON)
        self.caches: dict[str, dict[str, Any]] = {}
        #: the clock of the cache routes (seconds since the epoch)
        self.now: Callable[[], float] = time.time
        self._cache_counter = 0
        cache = r"/v1beta/(?P<name>cachedContents/[^/:]+)"
        self.add_route(CACHE_CREATE, "POST", r"/v1beta/cachedContents", self._create_cache)
        self.add_route(CACHE_LIST, "GET", r"/v1beta/cachedContents", self._list_caches)
        self.add_route(CACHE_GET, "GET", cache, self._get_cache)
        self.add_route(CACHE_UPDATE, "PATCH", cache, self._update_cache)
        self.add_route(CACHE_DELETE, "DELETE", cache, self._delete_cache)

    # -- the cachedContents routes' default handlers --------------------------------------------

    def _expire_time(self, body: dict[str, Any], fallback: str | None) -> str | None:
        if body.get("expireTime"):
            return str(body["expireTime"])
        ttl = body.get("ttl")
        if isinstance(ttl, str) and ttl.endswith("s"):
            moment = datetime.datetime.fromtimestamp(self.now() + float(ttl[:-1]), datetime.UTC)
            return moment.isoformat().replace("+00:00", "Z")
        return fallback

    def _create_cache(self, request: RecordedRequest) -> Reply:
        body = dict(request.body or {})
        with self._lock:
            self._cache_counter += 1
            name = f"cachedContents/fake-{self._cache_counter}"
        now = datetime.datetime.fromtimestamp(self.now(), datetime.UTC)
        stamp = now.isoformat().replace("+00:00", "Z")
        chars = len(json.dumps(body.get("contents", []))) + len(
            json.dumps(body.get("systemInstruction", {}))
        )
        resource = {key: value for key, value in body.items() if key not in ("ttl", "expireTime")}
        resource.update(
            name=name,
            createTime=stamp,
            updateTime=stamp,
            expireTime=self._expire_time(body, stamp),
            usageMetadata={"totalTokenCount": max(1, chars // 4)},
        )
        with self._lock:
            self.caches[name] = resource
        return Reply(body=resource)

    def _list_caches(self, request: RecordedRequest) -> Reply:
        with self._lock:
            listed = list(self.caches.values())
        return Reply(body={"cachedContents": listed})

    def _get_cache(self, request: RecordedRequest) -> Reply:
        with self._lock:
            resource = self.caches.get(request.params["name"])
        if resource is None:
            return error_reply(404, f"{request.params['name']} not found")
        return Reply(body=resource)

    def _update_cache(self, request: RecordedRequest) -> Reply:
        with self._lock:
            resource = self.caches.get(request.params["name"])
            if resource is not None:
                resource["expireTime"] = self._expire_time(
                    dict(request.body or {}), resource.get("expireTime")
                )
        if resource is None:
            return error_reply(404, f"{request.params['name']} not found")
        return Reply(body=resource)

    def _delete_cache(self, request: RecordedRequest) -> Reply:
        with self._lock:
            resource = self.caches.pop(request.params["name"], None)
        if resource is None:
            return error_reply(404, f"{request.params['name']} not found")
        return Reply(body={})

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, route: str) -> list[RecordedRequest]:
        return [request for request in self.requests if request.route == route]

    def add_route(self, name: str, method: str, pattern: str, handler: Handler) -> None:
        """Serves ``method`` requests whose path fully matches ``pattern`` (named groups become
        ``RecordedRequest.params``) with ``handler`` once the route's script is exhausted."""
        with self._lock:
            self._routes.append(_Route(name, method.upper(), re.compile(pattern), handler))

    def script(self, *replies: Scripted, route: str = GENERATE_CONTENT) -> None:
        """Queues ``replies`` for ``route``: each request takes the next one."""
        with self._lock:
            self._route(route).script.extend(replies)

    def _route(self, name: str) -> _Route:
        for route in self._routes:
            if route.name == name:
                return route
        raise KeyError(f"no route named {name!r}")

    def _dispatch(
        self, method: str, path: str, query: str, headers: dict[str, str], raw: bytes
    ) -> Reply:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            for route in self._routes:
                match = route.pattern.fullmatch(path)
                if route.method == method and match is not None:
                    break
            else:
                route, match = None, None
            request = RecordedRequest(
                method=method,
                path=path,
                query=parse_qs(query),
                headers=headers,
                body=body,
                raw_body=raw,
                route=route.name if route is not None else "",
                params=match.groupdict() if match is not None else {},
            )
            self._requests.append(request)
            scripted = route.script.popleft() if route is not None and route.script else None
        if route is None:
            return error_reply(404, f"no fake route for {method} {path}")
        if scripted is None:
            return route.handler(request)
        return scripted if isinstance(scripted, Reply) else scripted(request)


def _handler_class(fake: FakeGemini) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so nothing lingers after a test.
        protocol_version = "HTTP/1.0"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            url = urlsplit(self.path)
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = fake._dispatch(self.command, url.path, url.query, headers, raw)
            if reply.delay > 0 and fake.closing.wait(reply.delay):
                return
            payload = reply.payload()
            with contextlib.suppress(OSError):  # the client may have given up (timeout)
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PATCH(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: the requests are recorded instead."""

    return _Handler


@contextlib.contextmanager
def start_fake_gemini() -> Iterator[FakeGemini]:
    """Runs a :class:`FakeGemini` on 127.0.0.1 (a free port) for the duration of the block."""
    fake = FakeGemini()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(fake))
    fake.base_url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, name="fake-gemini", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
