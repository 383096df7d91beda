"""``contextengine.v1.ContextToolsService``: the context tools' declarations and one call,
answered by the engine (which validates the requests)."""

from __future__ import annotations

from contextengine.engine import Engine
from contextengine.v1 import context_tools_service_pb2 as pb

__all__ = ["ContextToolsServicer"]


class ContextToolsServicer:
    """Implements ``ContextToolsService``: each RPC is the engine method of the same name."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def ListContextTools(
        self, request: pb.ListContextToolsRequest, context: object
    ) -> pb.ListContextToolsResponse:
        return await self._engine.list_context_tools(request)

    async def CallContextTool(
        self, request: pb.CallContextToolRequest, context: object
    ) -> pb.CallContextToolResponse:
        return await self._engine.call_context_tool(request)
