"""The inspector's HTTP routes, mounted on the operations port under ``/inspector/``.

* ``GET /inspector/``: the page (``static/index.html``), ``inspector.js``, ``inspector.css``;
* ``GET /inspector/api/apps``: the apps that have sessions (``after``, ``limit``);
* ``GET /inspector/api/apps/{app}/users``: the app's users (``after``, ``limit``);
* ``GET /inspector/api/apps/{app}/users/{user}/sessions``: their sessions (``page_token``,
  ``limit``);
* ``GET .../sessions/{session}``: the session and its annotated log;
* ``GET .../sessions/{session}/context``: the context an agent would get (``agent``, ``branch``,
  ``provider``, ``model``);
* ``GET .../sessions/{session}/tokens``: that context's tokens over the log (same parameters,
  ``points``);
* ``GET .../sessions/{session}/events``: server-sent events of the log (``after``).

Only GET (and HEAD for the page): nothing here writes. With tokens configured every API request
needs ``Authorization: Bearer <token>`` whose grant allows the RPCs the view stands for
(:data:`_RPCS`), checked by the same :class:`~contextengine.auth.Authorizer` as the API; the
static files are public (they hold no data). Errors are JSON ``{"error": {...}}`` with the
status the gRPC code maps to, the ErrorInfo reason and the message. Every response carries
``Content-Security-Policy: default-src 'self'``: the page loads nothing from elsewhere and runs
no inline script, and the data it shows goes into the DOM as text only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any
from urllib.parse import unquote

from google.protobuf.message import Message

from contextengine.auth import Authorizer, Grant
from contextengine.core.errors import Code, ContextEngineError, invalid
from contextengine.core.validate import check_id
from contextengine.engine import Engine
from contextengine.inspector.api import DEFAULT_POINTS, ContextQuery, InspectorApi
from contextengine.inspector.sse import session_events, subscribe_request
from contextengine.observability.ops_server import HttpRequest, HttpResponse, StreamedResponse
from contextengine.store import SessionKey
from contextengine.v1 import (
    context_service_pb2 as cpb,
    session_service_pb2 as spb,
    subscription_service_pb2 as subpb,
)

__all__ = ["PREFIX", "Inspector"]

_LOG = logging.getLogger("contextengine.inspector")

PREFIX = "/inspector/"
_API = PREFIX + "api/"
_JSON = "application/json"
_SECURITY_HEADERS = (
    ("content-security-policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
)
_STATIC = {
    "": ("index.html", "text/html; charset=utf-8"),
    "index.html": ("index.html", "text/html; charset=utf-8"),
    "inspector.js": ("inspector.js", "text/javascript; charset=utf-8"),
    "inspector.css": ("inspector.css", "text/css; charset=utf-8"),
    "favicon.svg": ("favicon.svg", "image/svg+xml"),
}
#: the HTTP status of each gRPC code
_HTTP_STATUS = {
    Code.INVALID_ARGUMENT: 400,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.FAILED_PRECONDITION: 409,
    Code.ABORTED: 409,
    Code.RESOURCE_EXHAUSTED: 429,
    Code.UNAVAILABLE: 503,
    Code.INTERNAL: 500,
    Code.UNAUTHENTICATED: 401,
    Code.PERMISSION_DENIED: 403,
}
_S = "contextengine.v1.SessionService."
#: a session view -> the read RPCs whose rules it is authorized by
_RPCS = {
    "session": (_S + "GetSession", _S + "ListEvents"),
    "context": (_S + "GetSession", "contextengine.v1.ContextService.BuildContext"),
    "tokens": (_S + "GetSession", "contextengine.v1.ContextService.BuildContext"),
    "events": ("contextengine.v1.SubscriptionService.SubscribeEvents",),
}
_DEFAULT_LIMIT = 100
_MAX_LIMIT = 1000

Answer = HttpResponse | StreamedResponse


def _json(status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> HttpResponse:
    data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
    return HttpResponse(status, _JSON, data, (*_SECURITY_HEADERS, *headers))


def _error(error: ContextEngineError) -> HttpResponse:
    status = _HTTP_STATUS.get(error.code, 500)
    headers = [("www-authenticate", 'Bearer realm="contextengine"')] if status == 401 else []
    return _json(
        status,
        {
            "error": {
                "status": status,
                "code": error.code.value,
                "reason": error.reason,
                "message": error.message,
                "metadata": error.metadata,
            }
        },
        headers,
    )


def _int(query: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    text = query.get(name, "")
    if not text:
        return default
    if not text.lstrip("-").isdigit() or not low <= int(text) <= high:
        raise invalid(
            "INVALID_ARGUMENT", name, f"{name} must be an integer in [{low}, {high}], not {text!r}"
        )
    return int(text)


def _segments(path: str) -> list[str]:
    """The API path's segments after ``/inspector/api/``, each percent-decoded."""
    rest = path[len(_API) :]
    return [unquote(segment) for segment in rest.split("/")] if rest else []


class Inspector:
    """The inspector's request handler (``OpsServer.mount(PREFIX, inspector.handle)``)."""

    def __init__(self, engine: Engine, authorizer: Authorizer | None) -> None:
        self._engine = engine
        self._api = InspectorApi(engine)
        self._authorizer = authorizer
        package = resources.files("contextengine.inspector") / "static"
        self._static = {
            name: (package.joinpath(file).read_bytes(), content_type)
            for name, (file, content_type) in _STATIC.items()
        }

    async def handle(self, request: HttpRequest) -> Answer:
        try:
            if request.method not in ("GET", "HEAD"):
                return _json(
                    405,
                    {"error": {"status": 405, "message": "the inspector is read-only: GET only"}},
                    [("allow", "GET, HEAD")],
                )
            if request.path.startswith(_API) or request.path + "/" == _API:
                if request.method != "GET":  # HEAD is for the page: a stream has no head only
                    return _json(
                        405,
                        {"error": {"status": 405, "message": "the inspector's API is GET only"}},
                        [("allow", "GET")],
                    )
                return await self._api_answer(request)
            name = request.path[len(PREFIX) :]
            if name in _STATIC:
                body, content_type = self._static[name]
                return HttpResponse(200, content_type, body, _SECURITY_HEADERS)
            return _json(404, {"error": {"status": 404, "message": "no such page"}})
        except ContextEngineError as error:
            return _error(error)
        except Exception:
            _LOG.exception("inspector request %s failed", request.path)
            return _json(500, {"error": {"status": 500, "message": "internal error (logged)"}})

    # -- auth -------------------------------------------------------------------------------------

    def _metadata(self, request: HttpRequest) -> list[tuple[str, str]]:
        return [("authorization", value) for value in request.header("authorization")]

    def _grant(self, request: HttpRequest) -> Grant | None:
        """The caller's grant (None: no tokens configured, everything is open)."""
        if self._authorizer is None:
            return None
        return self._authorizer.authenticate(self._metadata(request))

    def _check(self, request: HttpRequest, methods: Sequence[str], message: Message) -> None:
        """The caller may make each of ``methods`` with ``message`` (the authorizer's rules)."""
        if self._authorizer is None:
            return
        metadata = self._metadata(request)
        for method in methods:
            self._authorizer.check(method, message, metadata)

    def _allowed(self, request: HttpRequest, method: str, message: Message) -> bool:
        assert self._authorizer is not None
        try:
            self._authorizer.check(method, message, self._metadata(request))
        except ContextEngineError as error:
            if error.reason == "PERMISSION_DENIED":
                return False
            raise
        return True

    # -- the API ----------------------------------------------------------------------------------

    async def _api_answer(self, request: HttpRequest) -> Answer:
        parts = _segments(request.path)
        query = request.query
        routes: dict[int, Callable[[HttpRequest, list[str]], Awaitable[Answer]]] = {
            1: self._apps,
            3: self._users,
            5: self._sessions,
            6: self._session,
            7: self._session_view,
        }
        shape_ok = (
            len(parts) in routes
            and parts[0] == "apps"
            and (len(parts) < 3 or parts[2] == "users")
            and (len(parts) < 5 or parts[4] == "sessions")
        )
        if not shape_ok:
            # a caller without a valid token learns nothing, not even which routes exist
            self._grant(request)
            return _json(404, {"error": {"status": 404, "message": "no such API route"}})
        for name in ("limit", "after", "points"):
            if name in query and len(query[name]) > 256:
                raise invalid("INVALID_ARGUMENT", name, f"{name} is too long")
        return await routes[len(parts)](request, parts)

    def _limit(self, request: HttpRequest) -> int:
        return _int(request.query, "limit", _DEFAULT_LIMIT, 1, _MAX_LIMIT)

    async def _apps(self, request: HttpRequest, parts: list[str]) -> Answer:
        grant = self._grant(request)
        limit = self._limit(request)
        after = request.query.get("after") or None
        names = await self._api.apps(limit, after)
        visible = names if grant is None else [name for name in names if grant.covers_app(name)]
        return _json(
            200, {"apps": visible, "next_after": names[-1] if len(names) == limit else None}
        )

    async def _users(self, request: HttpRequest, parts: list[str]) -> Answer:
        app = parts[1]
        grant = self._grant(request)
        check_id(app, "app_name")
        limit = self._limit(request)
        after = request.query.get("after") or None
        if grant is not None and not grant.covers_app(app):
            # the authorizer's own refusal (and message) for this app
            self._check(request, (_S + "ListSessions",), spb.ListSessionsRequest(app_name=app))
        found = await self._api.users(app, limit, after)
        users = found
        if grant is not None:
            users = [
                user
                for user in found
                if self._allowed(
                    request,
                    _S + "ListSessions",
                    spb.ListSessionsRequest(app_name=app, user_id=user),
                )
            ]
        return _json(
            200, {"users": users, "next_after": found[-1] if len(found) == limit else None}
        )

    async def _sessions(self, request: HttpRequest, parts: list[str]) -> Answer:
        app, user = parts[1], parts[3]
        listing = spb.ListSessionsRequest(app_name=app, user_id=user)
        self._check(request, (_S + "ListSessions",), listing)
        check_id(user, "user_id")
        page_token = request.query.get("page_token", "")
        return _json(200, await self._api.sessions(app, user, self._limit(request), page_token))

    def _key(self, request: HttpRequest, parts: list[str], view: str) -> SessionKey:
        app, user, session = parts[1], parts[3], parts[5]
        address: dict[str, Any] = {"app_name": app, "user_id": user, "session_id": session}
        for method in _RPCS[view]:
            message: Message
            if method.endswith("BuildContext"):
                message = cpb.BuildContextRequest(**address)
            elif method.endswith("SubscribeEvents"):
                message = subpb.SubscribeEventsRequest(
                    scope=subpb.SUBSCRIPTION_SCOPE_SESSION, **address
                )
            elif method.endswith("ListEvents"):
                message = spb.ListEventsRequest(**address)
            else:
                message = spb.GetSessionRequest(**address)
            self._check(request, (method,), message)
        for value, field in ((app, "app_name"), (user, "user_id"), (session, "session_id")):
            check_id(value, field)
        return SessionKey(app, user, session)

    async def _session(self, request: HttpRequest, parts: list[str]) -> Answer:
        key = self._key(request, parts, "session")
        return _json(200, await self._api.session(key))

    async def _session_view(self, request: HttpRequest, parts: list[str]) -> Answer:
        view = parts[6]
        if view not in ("context", "tokens", "events"):
            self._grant(request)
            return _json(404, {"error": {"status": 404, "message": f"no session view {view!r}"}})
        key = self._key(request, parts, view)
        query = request.query
        if view == "events":
            after = _int(query, "after", 0, 0, 2**62)
            await self._api.exists(key)  # SESSION_NOT_FOUND as a 404, before the stream starts
            stream = self._engine.subscribe_events(
                subscribe_request(key.app_name, key.user_id, key.session_id, after)
            )
            events = await session_events(stream)
            return StreamedResponse(
                200, "text/event-stream; charset=utf-8", events, _SECURITY_HEADERS
            )
        context_query = ContextQuery.parse(query)
        if view == "context":
            return _json(200, await self._api.context(key, context_query))
        points = _int(query, "points", DEFAULT_POINTS, 2, 1000)
        return _json(200, await self._api.tokens(key, context_query, points))
