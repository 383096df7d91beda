"""Sessions, their events and configurations: validation, page tokens, rewind, configs.

What ``SessionService`` does, as typed async methods over its request messages; errors are
raised as ContextEngineError (the servicer maps them to statuses).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from contextengine.compaction.summarizers.factory import check_summarizer_config
from contextengine.core import page_tokens
from contextengine.core.errors import ContextEngineError, invalid, session_not_found
from contextengine.core.events import normalize_for_append
from contextengine.core.rewind_state import (
    first_index_of_invocation,
    rewind_state_delta,
    session_state_before,
)
from contextengine.core.state import validate_state
from contextengine.core.structs import dict_to_struct, struct_to_dict
from contextengine.core.validate import (
    check_app_config,
    check_compaction_config,
    check_context_tools_config,
    check_event,
    check_id,
    check_page_size,
    check_session_address,
)
from contextengine.memory.preload import check_memory_config
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.resolver import ConfigResolver
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import EventFilter, EventStore, SessionKey, StoredSession
from contextengine.v1 import config_pb2, event_pb2, session_pb2, session_service_pb2 as pb

Clock = Callable[[], float]
SessionConfigResponse = TypeVar(
    "SessionConfigResponse", pb.GetSessionConfigResponse, pb.UpdateSessionConfigResponse
)

#: reads-and-appends a rewind tries before it gives up with SEQUENCE_MISMATCH
REWIND_ATTEMPTS = 5

#: the orders ListSessions knows
_ORDERS = frozenset(pb.SessionOrder.values())
#: the page token kind of ListSessions in SESSION_ORDER_LAST_UPDATE_ASC
_BY_UPDATE = "sessions_by_update"


def _time_cursor(text: str) -> float:
    """The ``last_update_time`` of a by-update cursor; INVALID_PAGE_TOKEN if it is not one."""
    try:
        value = float.fromhex(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise invalid(
            "INVALID_PAGE_TOKEN", "page_token", "page_token is not a cursor of this listing"
        )
    return value


def _new_id() -> str:
    """The id of an event appended without one."""
    return str(uuid.uuid4())


class _Addressed(Protocol):
    @property
    def app_name(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...


def session_to_proto(stored: StoredSession) -> session_pb2.Session:
    out = session_pb2.Session(
        id=stored.key.session_id,
        app_name=stored.key.app_name,
        user_id=stored.key.user_id,
        state=dict_to_struct(stored.state),
        last_update_time=stored.last_update_time,
        create_time=stored.create_time,
        last_sequence=stored.last_sequence,
    )
    out.events.extend(stored.events)
    return out


def session_key(request: _Addressed) -> SessionKey:
    """The checked address of the session a request names."""
    check_session_address(request.app_name, request.user_id, request.session_id)
    return SessionKey(request.app_name, request.user_id, request.session_id)


def _check_session_config(config: config_pb2.SessionConfig) -> None:
    if config.HasField("events_compaction_config"):
        check_compaction_config(config.events_compaction_config, "config.events_compaction_config")
    if config.HasField("context_tools"):
        check_context_tools_config(config.context_tools, "config.context_tools")


def _session_config_response(
    response: SessionConfigResponse, effective: config_pb2.EventsCompactionConfig | None
) -> SessionConfigResponse:
    if effective is not None:
        response.effective_compaction_config.CopyFrom(effective)
    return response


#: sets the context edits each event of an append records (in place; events in order)
RecordEdits = Callable[[SessionKey, Sequence[event_pb2.Event]], Awaitable[None]]


class SessionOps:
    """Every operation of ``SessionService``."""

    def __init__(
        self,
        store: EventStore,
        configs: AppConfigs,
        session_configs: SessionConfigs,
        resolver: ConfigResolver,
        clock: Clock = time.time,
        record_edits: RecordEdits | None = None,
    ) -> None:
        """``record_edits`` sets the context edits the events of an append record (the
        context tools' hook; without it, events record none)."""
        self._record_edits = record_edits
        self._store = store
        self._configs = configs
        self._session_configs = session_configs
        self._resolver = resolver
        self._clock = clock
        self._tokens: page_tokens.PageTokens | None = None

    async def _recorded(self, key: SessionKey, events: list[event_pb2.Event]) -> None:
        """The edits of context tools ``events`` record (clients set none themselves)."""
        if self._record_edits is not None:
            await self._record_edits(key, events)
        else:
            for event in events:
                del event.context_edits[:]

    async def _page_tokens(self) -> page_tokens.PageTokens:
        """The store's page tokens (its key is read once)."""
        if self._tokens is None:
            self._tokens = page_tokens.PageTokens(await self._store.page_token_key())
        return self._tokens

    async def create_session(self, request: pb.CreateSessionRequest) -> pb.CreateSessionResponse:
        check_id(request.app_name, "app_name")
        check_id(request.user_id, "user_id")
        check_id(request.session_id, "session_id", required=False)
        state = struct_to_dict(request.state, "state")
        validate_state(state, "state")
        config = request.config if request.HasField("config") else None
        if config is not None:
            _check_session_config(config)
        key = SessionKey(request.app_name, request.user_id, request.session_id or str(uuid.uuid4()))
        stored = await self._store.create_session(key, state, self._clock(), config=config)
        return pb.CreateSessionResponse(session=session_to_proto(stored))

    async def get_session(self, request: pb.GetSessionRequest) -> pb.GetSessionResponse:
        key = session_key(request)
        flt = EventFilter(
            num_recent_events=(
                request.num_recent_events if request.HasField("num_recent_events") else None
            ),
            after_timestamp=request.after_timestamp
            if request.HasField("after_timestamp")
            else None,
            after_sequence=request.after_sequence if request.HasField("after_sequence") else None,
        )
        if flt.num_recent_events is not None and flt.num_recent_events < 0:
            raise invalid(
                "INVALID_ARGUMENT", "num_recent_events", "num_recent_events must not be negative"
            )
        if flt.after_sequence is not None and flt.after_sequence < 0:
            raise invalid(
                "INVALID_ARGUMENT", "after_sequence", "after_sequence must not be negative"
            )
        stored = await self._store.get_session(key, flt)
        return pb.GetSessionResponse(session=session_to_proto(stored))

    async def list_sessions(self, request: pb.ListSessionsRequest) -> pb.ListSessionsResponse:
        check_id(request.app_name, "app_name")
        check_id(request.user_id, "user_id", required=False)
        limit = check_page_size(request.page_size)
        if request.order not in _ORDERS:
            raise invalid(
                "INVALID_ARGUMENT", "order", f"order {request.order} is not a known SessionOrder"
            )
        if request.order == pb.SESSION_ORDER_LAST_UPDATE_ASC:
            return await self._list_sessions_by_update(request, limit)
        scope = [request.app_name, request.user_id]
        after: tuple[str, str] | None = None
        tokens = await self._page_tokens()
        if request.page_token:
            user_id, session_id = page_tokens.str_cursor(
                tokens.decode(request.page_token, "sessions", scope), 2
            )
            after = (user_id, session_id)
        rows = await self._store.list_sessions(
            request.app_name, request.user_id or None, limit + 1, after
        )
        response = pb.ListSessionsResponse()
        response.sessions.extend(session_to_proto(s) for s in rows[:limit])
        if len(rows) > limit:
            last = rows[limit - 1].key
            response.next_page_token = tokens.encode(
                "sessions", scope, [last.user_id, last.session_id]
            )
        return response

    async def _list_sessions_by_update(
        self, request: pb.ListSessionsRequest, limit: int
    ) -> pb.ListSessionsResponse:
        """SESSION_ORDER_LAST_UPDATE_ASC. Its tokens are of another kind than the default
        order's, so a token of one order presented with the other is INVALID_PAGE_TOKEN; the
        cursor's time is ``float.hex`` (exact)."""
        scope = [request.app_name, request.user_id]
        after: tuple[float, str, str] | None = None
        tokens = await self._page_tokens()
        if request.page_token:
            stamp, user_id, session_id = page_tokens.str_cursor(
                tokens.decode(request.page_token, _BY_UPDATE, scope), 3
            )
            after = (_time_cursor(stamp), user_id, session_id)
        rows = await self._store.list_sessions_by_update(
            request.app_name, request.user_id or None, limit + 1, after
        )
        response = pb.ListSessionsResponse()
        response.sessions.extend(session_to_proto(s) for s in rows[:limit])
        if len(rows) > limit:
            last = rows[limit - 1]
            response.next_page_token = tokens.encode(
                _BY_UPDATE,
                scope,
                [last.last_update_time.hex(), last.key.user_id, last.key.session_id],
            )
        return response

    async def get_user_state(self, request: pb.GetUserStateRequest) -> pb.GetUserStateResponse:
        check_id(request.app_name, "app_name")
        check_id(request.user_id, "user_id")
        state = await self._store.get_user_state(request.app_name, request.user_id)
        return pb.GetUserStateResponse(state=dict_to_struct(state))

    async def delete_session(self, request: pb.DeleteSessionRequest) -> pb.DeleteSessionResponse:
        key = session_key(request)
        deleted = await self._store.delete_session(key)
        if not deleted and not request.allow_missing:
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        return pb.DeleteSessionResponse(deleted=deleted)

    async def append_event(self, request: pb.AppendEventRequest) -> pb.AppendEventResponse:
        key = session_key(request)
        if not request.HasField("event"):
            raise invalid("MISSING_FIELD", "event", "event is required")
        check_event(request.event)
        expected = (
            request.expected_last_sequence if request.HasField("expected_last_sequence") else None
        )
        if request.event.partial:
            # ADK never stores partial events; we still check the session exists.
            stored = await self._store.get_session(key, EventFilter(num_recent_events=0))
            event = event_pb2.Event()
            event.CopyFrom(request.event)
            event.sequence = 0
            return pb.AppendEventResponse(
                event=event, stored=False, last_sequence=stored.last_sequence
            )
        normalized = normalize_for_append(request.event, request.event.id or _new_id())
        await self._recorded(key, [normalized])
        outcome = await self._store.append_events(key, [normalized], expected)
        return pb.AppendEventResponse(
            event=outcome.events[0],
            stored=True,
            duplicate=outcome.duplicates[0],
            last_sequence=outcome.last_sequence,
        )

    async def append_events(self, request: pb.AppendEventsRequest) -> pb.AppendEventsResponse:
        key = session_key(request)
        expected = (
            request.expected_last_sequence if request.HasField("expected_last_sequence") else None
        )
        seen: set[str] = set()
        events: list[event_pb2.Event] = []
        for i, event in enumerate(request.events):
            check_event(event, f"events[{i}]")
            if event.partial:
                continue
            if event.id:
                if event.id in seen:
                    raise invalid(
                        "INVALID_EVENT", f"events[{i}].id", f"event id {event.id!r} is repeated"
                    )
                seen.add(event.id)
            events.append(normalize_for_append(event, event.id or _new_id()))
        if not events:
            stored = await self._store.get_session(key, EventFilter(num_recent_events=0))
            return pb.AppendEventsResponse(last_sequence=stored.last_sequence)
        await self._recorded(key, events)
        outcome = await self._store.append_events(key, events, expected)
        response = pb.AppendEventsResponse(last_sequence=outcome.last_sequence)
        response.events.extend(outcome.events)
        return response

    async def list_events(self, request: pb.ListEventsRequest) -> pb.ListEventsResponse:
        key = session_key(request)
        limit = check_page_size(request.page_size)
        if request.after_sequence < 0:
            raise invalid(
                "INVALID_ARGUMENT", "after_sequence", "after_sequence must not be negative"
            )
        scope = [key.app_name, key.user_id, key.session_id, str(request.after_sequence)]
        after = request.after_sequence
        tokens = await self._page_tokens()
        if request.page_token:
            after = page_tokens.int_cursor(tokens.decode(request.page_token, "events", scope))
        events, last_sequence = await self._store.list_events(key, after, limit)
        response = pb.ListEventsResponse(last_sequence=last_sequence)
        response.events.extend(events)
        if events and events[-1].sequence < last_sequence:
            response.next_page_token = tokens.encode("events", scope, [events[-1].sequence])
        return response

    async def rewind_session(self, request: pb.RewindSessionRequest) -> pb.RewindSessionResponse:
        key = session_key(request)
        target = request.rewind_before_invocation_id
        check_id(target, "rewind_before_invocation_id")
        # Read, compute, append with the sequence read as precondition; retry if the log moved.
        for _ in range(REWIND_ATTEMPTS):
            stored = await self._store.get_session(key, EventFilter())
            index = first_index_of_invocation(stored.events, target)
            if index is None:
                raise ContextEngineError(
                    "INVOCATION_NOT_FOUND",
                    f"no event of session {key.session_id!r} has invocation id {target!r}",
                    invocation_id=target,
                )
            delta = rewind_state_delta(stored.state, session_state_before(stored.events, index))
            event = event_pb2.Event(
                id=str(uuid.uuid4()),
                invocation_id="e-" + str(uuid.uuid4()),
                author="user",
                timestamp=self._clock(),
            )
            event.actions.rewind_before_invocation_id = target
            event.actions.state_delta.CopyFrom(dict_to_struct(delta))
            try:
                outcome = await self._store.append_events(key, [event], stored.last_sequence)
            except ContextEngineError as err:
                if err.reason == "SEQUENCE_MISMATCH":
                    continue
                raise
            return pb.RewindSessionResponse(event=outcome.events[0])
        raise ContextEngineError(
            "SEQUENCE_MISMATCH",
            "the session kept changing while the rewind was computed; retry",
            expected_last_sequence=-1,
            current_last_sequence=-1,
        )

    async def get_app_config(self, request: pb.GetAppConfigRequest) -> pb.GetAppConfigResponse:
        check_id(request.app_name, "app_name")
        config = await self._configs.get(request.app_name)
        if config is None:
            config = config_pb2.AppConfig(app_name=request.app_name)
        return pb.GetAppConfigResponse(config=config)

    async def update_app_config(
        self, request: pb.UpdateAppConfigRequest
    ) -> pb.UpdateAppConfigResponse:
        if not request.HasField("config"):
            raise invalid("MISSING_FIELD", "config", "config is required")
        check_app_config(request.config)
        if request.config.HasField("summarizer"):
            check_summarizer_config(request.config.summarizer, "config.summarizer")
        if request.config.HasField("memory"):
            check_memory_config(request.config.memory, "config.memory")
        config = config_pb2.AppConfig()
        config.CopyFrom(request.config)
        config.update_time = self._clock()
        stored = await self._configs.put(config)
        return pb.UpdateAppConfigResponse(config=stored)

    async def get_session_config(
        self, request: pb.GetSessionConfigRequest
    ) -> pb.GetSessionConfigResponse:
        key = session_key(request)
        config = await self._session_configs.get(key)
        return _session_config_response(
            pb.GetSessionConfigResponse(config=config),
            await self._resolver.compaction(key),
        )

    async def update_session_config(
        self, request: pb.UpdateSessionConfigRequest
    ) -> pb.UpdateSessionConfigResponse:
        key = session_key(request)
        if not request.HasField("config"):
            raise invalid("MISSING_FIELD", "config", "config is required (it may be empty)")
        _check_session_config(request.config)
        stored = await self._session_configs.put(key, request.config)
        return _session_config_response(
            pb.UpdateSessionConfigResponse(config=stored),
            await self._resolver.compaction(key),
        )
