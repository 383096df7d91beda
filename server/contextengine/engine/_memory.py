"""Long-term memory: the checks of ``MemoryService``'s requests and the translation of hits.

``MemoryOps`` is what the ``MemoryService`` RPCs do; ``preload_proto`` is the memory part of a
BuildContext response. Errors are raised as ContextEngineError.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextengine.core.errors import invalid
from contextengine.core.validate import check_id, check_session_address
from contextengine.memory.documents import current_user_text
from contextengine.memory.index import Hit
from contextengine.memory.preload import MAX_RESULTS_LIMIT
from contextengine.memory.service import MemoryService
from contextengine.memory.text import MAX_QUERY_CHARS
from contextengine.store import SessionKey
from contextengine.v1 import context_service_pb2, event_pb2, memory_pb2, memory_service_pb2 as pb

#: most sequences one AddEventsToMemory call may name
MAX_SEQUENCES = 1000


def entry_to_proto(hit: Hit) -> memory_pb2.MemoryEntry:
    entry = hit.entry
    out = memory_pb2.MemoryEntry(
        session_id=hit.session_id,
        sequence=entry.sequence,
        event_id=entry.event_id,
        invocation_id=entry.invocation_id,
        author=entry.author,
        timestamp=entry.timestamp,
        score=hit.score,
    )
    out.content.CopyFrom(entry.content)
    return out


async def preload_proto(
    memory: MemoryService,
    key: SessionKey,
    request: context_service_pb2.BuildContextRequest,
    events: Sequence[event_pb2.Event],
) -> memory_pb2.MemoryPreload:
    """``BuildContextResponse.memory_preload`` for a request with ``preload_memory``."""
    query = request.memory_query if request.HasField("memory_query") else current_user_text(events)
    preload = await memory.preload(key, query)
    return memory_pb2.MemoryPreload(
        query=preload.query,
        memories=[entry_to_proto(hit) for hit in preload.hits],
        text=preload.text,
    )


class MemoryOps:
    """Every operation of ``MemoryService``."""

    def __init__(self, memory: MemoryService) -> None:
        self._memory = memory

    async def add_session_to_memory(
        self, request: pb.AddSessionToMemoryRequest
    ) -> pb.AddSessionToMemoryResponse:
        check_session_address(request.app_name, request.user_id, request.session_id)
        key = SessionKey(request.app_name, request.user_id, request.session_id)
        outcome = await self._memory.add_session(key)
        return pb.AddSessionToMemoryResponse(
            entry_count=outcome.entry_count,
            added_count=outcome.added,
            removed_count=outcome.removed,
            last_sequence=outcome.last_sequence,
        )

    async def add_events_to_memory(
        self, request: pb.AddEventsToMemoryRequest
    ) -> pb.AddEventsToMemoryResponse:
        check_session_address(request.app_name, request.user_id, request.session_id)
        if not request.sequences:
            raise invalid("MISSING_FIELD", "sequences", "sequences is required")
        if len(request.sequences) > MAX_SEQUENCES:
            raise invalid(
                "INVALID_ARGUMENT",
                "sequences",
                f"at most {MAX_SEQUENCES} sequences per call, not {len(request.sequences)}",
            )
        if min(request.sequences) < 1:
            raise invalid("INVALID_ARGUMENT", "sequences", "sequences must be >= 1")
        key = SessionKey(request.app_name, request.user_id, request.session_id)
        outcome = await self._memory.add_events(key, list(request.sequences))
        return pb.AddEventsToMemoryResponse(
            remembered_sequences=outcome.remembered, skipped_sequences=outcome.skipped
        )

    async def search_memory(self, request: pb.SearchMemoryRequest) -> pb.SearchMemoryResponse:
        check_id(request.app_name, "app_name")
        check_id(request.user_id, "user_id")
        if not request.query.strip():
            raise invalid("MISSING_FIELD", "query", "query is required (and not blank)")
        if len(request.query) > MAX_QUERY_CHARS:
            raise invalid(
                "INVALID_ARGUMENT",
                "query",
                f"query is {len(request.query)} characters long (max {MAX_QUERY_CHARS})",
            )
        if not 0 <= request.limit <= MAX_RESULTS_LIMIT:
            raise invalid(
                "INVALID_ARGUMENT", "limit", f"limit must be between 0 and {MAX_RESULTS_LIMIT}"
            )
        result = await self._memory.search(
            request.app_name, request.user_id, request.query, request.limit
        )
        return pb.SearchMemoryResponse(
            memories=[entry_to_proto(hit) for hit in result.hits], ranking=result.ranking
        )

    async def delete_memory(self, request: pb.DeleteMemoryRequest) -> pb.DeleteMemoryResponse:
        check_id(request.app_name, "app_name")
        check_id(request.user_id, "user_id")
        check_id(request.session_id, "session_id", required=False)
        deleted = await self._memory.delete(request.app_name, request.user_id, request.session_id)
        return pb.DeleteMemoryResponse(deleted_count=deleted)
