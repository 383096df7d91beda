"""``contextengine.v1.ContextService``: BuildContext, answered by the engine."""

from __future__ import annotations

from contextengine.engine import Engine
from contextengine.v1 import context_service_pb2 as pb

__all__ = ["ContextServicer"]


class ContextServicer:
    """Implements ``ContextService``; the response is the engine's encoded bytes, sent as they
    are (the handler's serializer passes bytes through)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def BuildContext(self, request: pb.BuildContextRequest, context: object) -> bytes:
        return (await self._engine.build_context(request)).encoded()
