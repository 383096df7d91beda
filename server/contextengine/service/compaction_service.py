"""``contextengine.v1.CompactionService``: triggers, plans, client summaries, expansion, status,
answered by the engine (which validates the requests)."""

from __future__ import annotations

from contextengine.engine import Engine
from contextengine.v1 import compaction_service_pb2 as pb

__all__ = ["CompactionServicer"]


class CompactionServicer:
    """Implements ``CompactionService``: each RPC is the engine method of the same name."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def EndInvocation(
        self, request: pb.EndInvocationRequest, context: object
    ) -> pb.EndInvocationResponse:
        return await self._engine.end_invocation(request)

    async def Compact(self, request: pb.CompactRequest, context: object) -> pb.CompactResponse:
        return await self._engine.compact(request)

    async def PlanCompaction(
        self, request: pb.PlanCompactionRequest, context: object
    ) -> pb.PlanCompactionResponse:
        return await self._engine.plan_compaction(request)

    async def CommitCompaction(
        self, request: pb.CommitCompactionRequest, context: object
    ) -> pb.CommitCompactionResponse:
        return await self._engine.commit_compaction(request)

    async def ExpandSummary(
        self, request: pb.ExpandSummaryRequest, context: object
    ) -> pb.ExpandSummaryResponse:
        return await self._engine.expand_summary(request)

    async def GetCompactionStatus(
        self, request: pb.GetCompactionStatusRequest, context: object
    ) -> pb.GetCompactionStatusResponse:
        return await self._engine.get_compaction_status(request)
