"""``ContextEngineMemoryService``: google-adk's ``BaseMemoryService`` over the engine's memory RPCs.

Long-term memory lives in the engine, next to the sessions: a session (or chosen events of it) is
added to memory, and memory is searched per (app, user) with the engine's keyword search
(google-adk's tokenization, BM25 ranking; see ``proto/contextengine/v1/memory_service.proto``).
The sessions must be the engine's: use it with ``ContextEngineSessionService`` on the same
backend (``backend=``, or the same ``target=`` / ``db=``).

What differs from ADK's own memory services, on purpose:

- ``add_session_to_memory`` adds the session *as the engine stores it* (the events the session
  service appended, rewound turns left out), not the ``Session`` object's copy of its events; a
  session the engine does not have raises :class:`contextengine.client.ContextEngineError`
  (NOT_FOUND / ``SESSION_NOT_FOUND``).
- ``add_events_to_memory`` needs ``session_id`` (the engine's memories belong to a session);
  events the engine's session does not hold (by id) are skipped, as are events without text.
  ``custom_metadata`` is accepted and ignored, as ADK's in-memory and SQLite services do.
- ``search_memory`` returns at most the app's ``MemoryConfig.max_results`` (default 10, ADK's
  number) memories, best first. A blank query finds nothing (ADK's services also return none);
  only the first 10,000 characters of a query are searched.

A ``MemoryEntry`` is as ADK's SQLite memory service makes it: ``id`` the event id, ``content``
the event's content, ``author``, ``timestamp`` as ADK formats it (``datetime.fromtimestamp(ts)
.isoformat()``, local time), and ``custom_metadata`` ``{"session_id", "event_id"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry

from contextengine.adk._backend import Backend, UsesBackend
from contextengine.adk._convert import content_to_genai
from contextengine.v1 import memory_pb2, memory_service_pb2 as mpb, session_service_pb2

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session

__all__ = ["ContextEngineMemoryService"]

#: longest query the engine searches (longer ones are cut here, not refused)
MAX_QUERY_CHARS = 10_000
#: most sequences one AddEventsToMemory call may name
_MAX_SEQUENCES = 1000


def format_timestamp(timestamp: float) -> str:
    """A memory's timestamp as google-adk's memory services render it (local ISO 8601)."""
    return datetime.fromtimestamp(timestamp).isoformat()


def entry_to_adk(entry: memory_pb2.MemoryEntry) -> MemoryEntry:
    """An engine memory as ADK's ``MemoryEntry``."""
    return MemoryEntry(
        id=entry.event_id,
        content=content_to_genai(entry.content),
        author=entry.author or None,
        timestamp=format_timestamp(entry.timestamp),
        custom_metadata={"session_id": entry.session_id, "event_id": entry.event_id},
    )


class ContextEngineMemoryService(UsesBackend, BaseMemoryService):
    """google-adk's memory service, backed by the engine.

    Pass exactly one of ``target=`` (a sidecar address), ``db=`` (a SQLite file or
    ``:memory:``, the engine embedded in process) or ``backend=`` (a backend shared with the
    session service and the plugin). ``close()`` closes the backend it made, never a shared one.
    """

    def __init__(
        self,
        *,
        target: str | None = None,
        db: str | None = None,
        backend: Backend | None = None,
        **client_options: Any,
    ) -> None:
        self._use_backend(target=target, db=db, backend=backend, client_options=client_options)

    async def add_session_to_memory(self, session: Session) -> None:
        await self._backend.add_session_to_memory(
            mpb.AddSessionToMemoryRequest(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        del custom_metadata  # no engine-side meaning (ADK's own services ignore it too)
        if not session_id:
            raise ValueError(
                "ContextEngineMemoryService.add_events_to_memory needs session_id: the engine "
                "remembers events of a session it stores"
            )
        wanted = {event.id for event in events if event.id}
        if not wanted:
            return
        response = await self._backend.get_session(
            session_service_pb2.GetSessionRequest(
                app_name=app_name, user_id=user_id, session_id=session_id
            )
        )
        sequences = [e.sequence for e in response.session.events if e.id in wanted]
        for start in range(0, len(sequences), _MAX_SEQUENCES):
            await self._backend.add_events_to_memory(
                mpb.AddEventsToMemoryRequest(
                    app_name=app_name,
                    user_id=user_id,
                    session_id=session_id,
                    sequences=sequences[start : start + _MAX_SEQUENCES],
                )
            )

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        if not query.strip():
            return SearchMemoryResponse()
        response = await self._backend.search_memory(
            mpb.SearchMemoryRequest(
                app_name=app_name, user_id=user_id, query=query[:MAX_QUERY_CHARS]
            )
        )
        return SearchMemoryResponse(memories=[entry_to_adk(m) for m in response.memories])
