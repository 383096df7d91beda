"""``contextengine.v1.MemoryService`` over the engine: each RPC is one engine call."""

from __future__ import annotations

from contextengine.engine import Engine
from contextengine.v1 import memory_service_pb2 as pb


class MemoryServicer:
    """Implements every RPC of ``MemoryService``; errors are raised as ContextEngineError."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def AddSessionToMemory(
        self, request: pb.AddSessionToMemoryRequest, context: object
    ) -> pb.AddSessionToMemoryResponse:
        return await self._engine.add_session_to_memory(request)

    async def AddEventsToMemory(
        self, request: pb.AddEventsToMemoryRequest, context: object
    ) -> pb.AddEventsToMemoryResponse:
        return await self._engine.add_events_to_memory(request)

    async def SearchMemory(
        self, request: pb.SearchMemoryRequest, context: object
    ) -> pb.SearchMemoryResponse:
        return await self._engine.search_memory(request)

    async def DeleteMemory(
        self, request: pb.DeleteMemoryRequest, context: object
    ) -> pb.DeleteMemoryResponse:
        return await self._engine.delete_memory(request)
