"""``ContextEngineSessionService``: google-adk's ``BaseSessionService`` over the engine.

Behaviour is ADK's (its ``SqliteSessionService`` where ADK's services differ):

- ``create_session``: the state is split by scope by the engine (``app:`` / ``user:`` keys update
  the app and user state, ``temp:`` keys are dropped); an id is stripped of surrounding whitespace,
  and made with ADK's ``platform.uuid`` when none is given; an id in use raises
  ``AlreadyExistsError``. Ids follow the engine's rule (at most 256 characters, no control
  characters): a create with another id is refused (``ContextEngineError``, ``INVALID_ID``) where
  ADK's services would accept it.
- ``get_session``: ``None`` for a missing session; ``GetSessionConfig.num_recent_events`` and
  ``after_timestamp`` (``timestamp >= after_timestamp``) filter the events, combined. Events are
  in append order, as ADK's in-memory service keeps them and the Runner saw them (the one point
  where the SQLite service is not followed: it sorts by timestamp, and ADK stamps a tool
  confirmation request later than the function response appended after it).
  An unfiltered read of a session read before (one of the last 16) fetches and converts only
  the events appended since (``contextengine.adk._event_cache``); the session returned shares
  nothing with the kept events or with earlier returns.
- ``list_sessions``: merged states, no events, ordered by ``(last_update_time, user_id, id)``
  oldest first (the engine's ``SESSION_ORDER_LAST_UPDATE_ASC``).
- ``delete_session``: no error for a missing session. A session id the engine cannot hold
  (empty, over 256 characters, control characters) is a missing session for both.
- ``append_event``: a partial event is returned untouched and not stored; ``temp:`` keys of the
  delta are applied to the caller's session, then trimmed from the event (which is what is
  stored); the event keeps ADK's id and timestamp; ``session.last_update_time`` becomes the
  event's timestamp. A missing session raises ``SessionNotFoundError``. A stale session object
  (another writer appended since it was read) raises ``StaleSessionError``: the session carries
  the engine's last sequence (in ADK's ``_storage_update_marker``) and the append is conditional
  on it (``expected_last_sequence``, answered ``SEQUENCE_MISMATCH``). Summary events the engine
  appended itself meanwhile (its compaction, which ADK's own compaction would have appended
  through this object) do not make the object stale: they are added to ``session.events`` before
  the new event and the append is retried. Appending the same event again is an idempotent
  replay (nothing changes).
- ``get_user_state``: the user's state without the ``user:`` prefix (empty for an unknown user).

Numbers: the engine stores JSON numbers as doubles; integral ones come back as ``int``
(``contextengine.adk._convert``), so a float state value ``2.0`` reads back as ``2``.
"""

from __future__ import annotations

from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session

from contextengine.adk._backend import Backend, UsesBackend
from contextengine.adk._convert import (
    event_from_proto,
    event_to_proto,
    state_from_struct,
    state_to_struct,
)
from contextengine.adk._event_cache import EventCache
from contextengine.client import ContextEngineError
from contextengine.v1 import session_pb2, session_service_pb2 as spb

try:  # google-adk exports it from google.adk.errors
    from google.adk.errors import StaleSessionError
except ImportError:  # pragma: no cover - older google-adk
    from google.adk.errors._stale_session_error import StaleSessionError

__all__ = ["ContextEngineSessionService"]

#: how the engine's last sequence is written into ``Session._storage_update_marker``
_MARKER_PREFIX = "contextengine:"
_LIST_PAGE = 1000


def _marker(last_sequence: int) -> str:
    return f"{_MARKER_PREFIX}{last_sequence}"


def _expected_sequence(session: Session) -> int | None:
    """The last sequence the caller's session object has seen (None: not read from the engine)."""
    marker = session._storage_update_marker
    if marker is None or not marker.startswith(_MARKER_PREFIX):
        return None
    return int(marker[len(_MARKER_PREFIX) :])


def _session(message: session_pb2.Session, events: list[Event] | None = None) -> Session:
    """The ADK session of ``message``, with ``events`` (already converted) or its own."""
    session = Session(
        id=message.id,
        app_name=message.app_name,
        user_id=message.user_id,
        state=state_from_struct(message.state),
        events=events if events is not None else [event_from_proto(e) for e in message.events],
        last_update_time=message.last_update_time,
    )
    session._storage_update_marker = _marker(message.last_sequence)
    return session


class ContextEngineSessionService(UsesBackend, BaseSessionService):
    """ADK's session service over a contextengine sidecar (``target="host:port"``) or the engine
    embedded in this process (``db="agent.db"`` or ``":memory:"``), or over a ``backend`` shared
    with the other drop-ins. ``client_options`` (with ``target``) go to the Python client
    (``timeout``, ``attempts``...)."""

    def __init__(
        self,
        *,
        target: str | None = None,
        db: str | None = None,
        backend: Backend | None = None,
        **client_options: Any,
    ) -> None:
        self._use_backend(target=target, db=db, backend=backend, client_options=client_options)
        self._events = EventCache()

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id.strip() if session_id else "") or platform_uuid.new_uuid()
        request = spb.CreateSessionRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            state=state_to_struct(state or {}),
        )
        try:
            response = await self._backend.create_session(request)
        except ContextEngineError as err:
            if err.reason == "SESSION_ALREADY_EXISTS":
                raise AlreadyExistsError(f"Session with id {session_id} already exists.") from err
            raise
        return _session(response.session)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        session_id = session_id.strip()
        request = spb.GetSessionRequest(app_name=app_name, user_id=user_id, session_id=session_id)
        filtered = False
        if config is not None:
            if config.num_recent_events is not None:
                request.num_recent_events = config.num_recent_events
                filtered = True
            if config.after_timestamp:  # ADK's sqlite service: 0 (or None) is no filter
                request.after_timestamp = config.after_timestamp
                filtered = True
        key = (app_name, user_id, session_id)
        kept = None if filtered else self._events.get(key)
        if kept is not None:
            request.after_sequence = kept.last_sequence
        try:
            response = await self._backend.get_session(request)
        except ContextEngineError as err:
            # An id the engine refuses (empty, too long, control characters) names no session.
            if err.reason == "SESSION_NOT_FOUND" or err.is_invalid_id("session_id"):
                self._events.delete(key)
                return None
            raise
        if filtered:
            return _session(response.session)
        events = self._events.update(key, response.session, kept)
        if events is None:  # deleted and made again since it was kept: read it whole
            self._events.delete(key)
            return await self.get_session(app_name=app_name, user_id=user_id, session_id=session_id)
        return _session(response.session, events)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        sessions: list[Session] = []
        token = ""
        while True:
            response = await self._backend.list_sessions(
                spb.ListSessionsRequest(
                    app_name=app_name,
                    user_id=user_id or "",
                    page_size=_LIST_PAGE,
                    page_token=token,
                    order=spb.SESSION_ORDER_LAST_UPDATE_ASC,
                )
            )
            sessions.extend(_session(session) for session in response.sessions)
            token = response.next_page_token
            if not token:
                return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        session_id = session_id.strip()
        self._events.delete((app_name, user_id, session_id))
        request = spb.DeleteSessionRequest(
            app_name=app_name, user_id=user_id, session_id=session_id, allow_missing=True
        )
        try:
            await self._backend.delete_session(request)
        except ContextEngineError as err:
            if not err.is_invalid_id("session_id"):
                raise

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        response = await self._backend.get_user_state(
            spb.GetUserStateRequest(app_name=app_name, user_id=user_id)
        )
        return state_from_struct(response.state)

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        request = spb.AppendEventRequest(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            event=event_to_proto(event),
        )
        expected = _expected_sequence(session)
        summaries: list[Event] = []
        while True:
            if expected is not None:
                request.expected_last_sequence = expected
            try:
                response = await self._backend.append_event(request)
                break
            except ContextEngineError as err:
                if err.reason == "SESSION_NOT_FOUND":
                    raise SessionNotFoundError(f"Session {session.id} not found.") from err
                if err.reason != "SEQUENCE_MISMATCH" or expected is None:
                    raise
                more, expected = await self._engine_summaries(session, expected)
                if more is None:
                    raise StaleSessionError(
                        f"Session {session.id} changed since this session object was read "
                        f"(another writer appended after sequence {expected}); get the session "
                        "again before appending to it."
                    ) from err
                summaries.extend(more)
        if response.duplicate:
            return event  # the same event again: already recorded and applied
        session.events.extend(summaries)
        session.last_update_time = event.timestamp
        session._storage_update_marker = _marker(response.last_sequence)
        return self._commit_event_to_session(session, event)

    async def _engine_summaries(
        self, session: Session, after: int
    ) -> tuple[list[Event] | None, int]:
        """The events appended after sequence ``after`` if they are all the engine's own
        compaction summaries (written by its compaction, not by another writer: the session
        object is then not stale), with the new last sequence; ``None`` otherwise."""
        page = await self._backend.list_events(
            spb.ListEventsRequest(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                after_sequence=after,
                page_size=_LIST_PAGE,
            )
        )
        if page.next_page_token or not page.events:
            return None, after
        if not all(event.actions.HasField("compaction") for event in page.events):
            return None, after
        return [event_from_proto(event) for event in page.events], page.events[-1].sequence
