"""Validation of subscription requests into what the streams work with. Pure; raises
:class:`contextengine.core.errors.ContextEngineError` with an INVALID_ARGUMENT reason."""

from __future__ import annotations

from dataclasses import dataclass

from contextengine.core.echo import echo
from contextengine.core.errors import invalid
from contextengine.core.validate import check_id, check_session_address
from contextengine.store import SessionKey
from contextengine.subscriptions.broadcaster import Route, app_route, session_route, user_route
from contextengine.subscriptions.cursors import parse_position
from contextengine.subscriptions.filters import EventMatcher, unknown_kinds
from contextengine.v1 import subscription_service_pb2 as pb

#: the longest heartbeat interval a request may ask for
MAX_HEARTBEAT_SECONDS = 3600
#: the most events a request may ask to receive in one frame
MAX_EVENTS_PER_FRAME = 1000

SESSION_SCOPE = pb.SUBSCRIPTION_SCOPE_SESSION
USER_SCOPE = pb.SUBSCRIPTION_SCOPE_USER
APP_SCOPE = pb.SUBSCRIPTION_SCOPE_APP


@dataclass(frozen=True)
class EventsSpec:
    """A validated ``SubscribeEventsRequest``."""

    scope: int
    app_name: str
    user_id: str
    session_id: str
    #: the sequence (session scope) or position (user and app scope) to start after
    after: int
    matcher: EventMatcher
    heartbeat_seconds: float
    #: the most events per frame; 1 = one ``event`` frame per event, more = ``events`` frames
    max_events_per_frame: int = 1

    @property
    def by_sequence(self) -> bool:
        """Session scope: cursors are sequences; otherwise global positions."""
        return self.scope == SESSION_SCOPE

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.app_name, self.user_id, self.session_id)

    @property
    def route(self) -> Route:
        if self.scope == SESSION_SCOPE:
            return session_route(self.key)
        if self.scope == USER_SCOPE:
            return user_route(self.app_name, self.user_id)
        return app_route(self.app_name)

    @property
    def cursor_field(self) -> str:
        return "after_sequence" if self.by_sequence else "after_cursor"


@dataclass(frozen=True)
class WatchSpec:
    """A validated ``WatchSessionStateRequest``."""

    key: SessionKey
    heartbeat_seconds: float


def heartbeat_seconds(requested: int, default: float) -> float:
    if requested < 0:
        raise invalid(
            "INVALID_ARGUMENT", "heartbeat_seconds", "heartbeat_seconds must not be negative"
        )
    if requested > MAX_HEARTBEAT_SECONDS:
        raise invalid(
            "INVALID_ARGUMENT",
            "heartbeat_seconds",
            f"heartbeat_seconds must be at most {MAX_HEARTBEAT_SECONDS}",
        )
    return float(requested) if requested else default


def _must_be_empty(value: str, field: str, scope: str) -> None:
    if value:
        raise invalid("INVALID_ARGUMENT", field, f"{field} must be empty for {scope} scope")


def _scope(request: pb.SubscribeEventsRequest) -> int:
    scope = request.scope or SESSION_SCOPE
    if scope not in (SESSION_SCOPE, USER_SCOPE, APP_SCOPE):
        raise invalid("INVALID_ARGUMENT", "scope", f"unknown subscription scope {scope}")
    if scope == SESSION_SCOPE:
        check_session_address(request.app_name, request.user_id, request.session_id)
        _must_be_empty(request.after_cursor, "after_cursor", "session")
    elif scope == USER_SCOPE:
        check_id(request.app_name, "app_name")
        check_id(request.user_id, "user_id")
        _must_be_empty(request.session_id, "session_id", "user")
    else:
        check_id(request.app_name, "app_name")
        _must_be_empty(request.user_id, "user_id", "app")
        _must_be_empty(request.session_id, "session_id", "app")
    if scope != SESSION_SCOPE and request.after_sequence:
        raise invalid(
            "INVALID_ARGUMENT",
            "after_sequence",
            "after_sequence is for session scope; use after_cursor",
        )
    return scope


def _matcher(request: pb.SubscribeEventsRequest) -> EventMatcher:
    for i, author in enumerate(request.authors):
        check_id(author, f"authors[{i}]")
    for i, branch in enumerate(request.branches):
        check_id(branch, f"branches[{i}]", required=False)
    unknown = unknown_kinds(request.kinds)
    if unknown:
        raise invalid(
            "INVALID_ARGUMENT",
            "kinds",
            f"unknown event kinds {echo(unknown)}: use the EventKind values other than 0",
        )
    return EventMatcher.of(request.authors, request.branches, request.kinds)


def events_spec(request: pb.SubscribeEventsRequest, default_heartbeat: float) -> EventsSpec:
    scope = _scope(request)
    if scope == SESSION_SCOPE:
        if request.after_sequence < 0:
            raise invalid("INVALID_CURSOR", "after_sequence", "after_sequence must not be negative")
        after = request.after_sequence
    else:
        after = parse_position(request.after_cursor, "after_cursor")
    return EventsSpec(
        scope=scope,
        app_name=request.app_name,
        user_id=request.user_id,
        session_id=request.session_id,
        after=after,
        matcher=_matcher(request),
        heartbeat_seconds=heartbeat_seconds(request.heartbeat_seconds, default_heartbeat),
        max_events_per_frame=max_events_per_frame(request.max_events_per_frame),
    )


def max_events_per_frame(requested: int) -> int:
    if requested < 0:
        raise invalid(
            "INVALID_ARGUMENT", "max_events_per_frame", "max_events_per_frame must not be negative"
        )
    if requested > MAX_EVENTS_PER_FRAME:
        raise invalid(
            "INVALID_ARGUMENT",
            "max_events_per_frame",
            f"max_events_per_frame must be at most {MAX_EVENTS_PER_FRAME}",
        )
    return max(1, requested)


def watch_spec(request: pb.WatchSessionStateRequest, default_heartbeat: float) -> WatchSpec:
    check_session_address(request.app_name, request.user_id, request.session_id)
    return WatchSpec(
        key=SessionKey(request.app_name, request.user_id, request.session_id),
        heartbeat_seconds=heartbeat_seconds(request.heartbeat_seconds, default_heartbeat),
    )
