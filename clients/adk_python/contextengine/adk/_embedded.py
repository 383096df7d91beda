"""The embedded backend: the engine in this process (``contextengine.engine``), on a SQLite file
or ``:memory:``. The only module of ``contextengine.adk`` that imports the server distribution,
and only when an embedded backend is first used (``pip install contextengine-adk[embedded]``).

The engine's ``ContextEngineError`` (``contextengine.engine``) is raised as the client's
:class:`contextengine.client.ContextEngineError` with the status code and reason a sidecar would
send, so the drop-ins see one error type in both modes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import grpc

from contextengine.client import ContextEngineError
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    context_service_pb2 as cpb,
    context_tools_service_pb2 as tpb,
    memory_service_pb2 as mpb,
    session_service_pb2 as spb,
)

if TYPE_CHECKING:
    from contextengine.engine import Engine

__all__ = ["EmbeddedBackend", "embedded_backend"]

T = TypeVar("T")


class EmbeddedBackend:
    """A :class:`~contextengine.adk._backend.Backend` over an in-process engine, opened on the
    first call (one engine per backend: one process per SQLite file)."""

    def __init__(self, db: str = ":memory:") -> None:
        if not db:
            raise ValueError("db must be a SQLite file path or ':memory:'")
        self.db = db
        self.description = f"embedded engine on {db}"
        self._engine: Engine | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False

    async def engine(self) -> Engine:
        """The open engine (opened here the first time)."""
        if self._closed:
            raise RuntimeError(f"the {self.description} is closed")
        if self._engine is not None:
            return self._engine
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._engine is None:
                try:
                    from contextengine.engine import EngineSettings, open_engine
                except ImportError as err:  # pragma: no cover - depends on the environment
                    raise ImportError(
                        "embedded mode (db=...) needs the engine: pip install "
                        "'contextengine-adk[embedded]' (the contextengine server distribution)"
                    ) from err
                self._engine = await open_engine(EngineSettings(db=self.db))
            return self._engine

    async def _run(self, call: Callable[[Engine], Awaitable[T]]) -> T:
        from contextengine.engine import ContextEngineError as EngineError

        engine = await self.engine()
        try:
            return await call(engine)
        except EngineError as err:
            code = grpc.StatusCode[err.code.value]
            raise ContextEngineError(code, err.message, err.reason, err.metadata) from None

    async def create_session(self, request: spb.CreateSessionRequest) -> spb.CreateSessionResponse:
        return await self._run(lambda e: e.create_session(request))

    async def get_session(self, request: spb.GetSessionRequest) -> spb.GetSessionResponse:
        return await self._run(lambda e: e.get_session(request))

    async def list_sessions(self, request: spb.ListSessionsRequest) -> spb.ListSessionsResponse:
        return await self._run(lambda e: e.list_sessions(request))

    async def delete_session(self, request: spb.DeleteSessionRequest) -> spb.DeleteSessionResponse:
        return await self._run(lambda e: e.delete_session(request))

    async def append_event(self, request: spb.AppendEventRequest) -> spb.AppendEventResponse:
        return await self._run(lambda e: e.append_event(request))

    async def list_events(self, request: spb.ListEventsRequest) -> spb.ListEventsResponse:
        return await self._run(lambda e: e.list_events(request))

    async def get_user_state(self, request: spb.GetUserStateRequest) -> spb.GetUserStateResponse:
        return await self._run(lambda e: e.get_user_state(request))

    async def get_app_config(self, request: spb.GetAppConfigRequest) -> spb.GetAppConfigResponse:
        return await self._run(lambda e: e.get_app_config(request))

    async def build_context(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        result = await self._run(lambda e: e.build_context(request))
        return result.response()

    async def end_invocation(self, request: kpb.EndInvocationRequest) -> kpb.EndInvocationResponse:
        return await self._run(lambda e: e.end_invocation(request))

    async def list_context_tools(
        self, request: tpb.ListContextToolsRequest
    ) -> tpb.ListContextToolsResponse:
        return await self._run(lambda e: e.list_context_tools(request))

    async def call_context_tool(
        self, request: tpb.CallContextToolRequest
    ) -> tpb.CallContextToolResponse:
        return await self._run(lambda e: e.call_context_tool(request))

    async def add_session_to_memory(
        self, request: mpb.AddSessionToMemoryRequest
    ) -> mpb.AddSessionToMemoryResponse:
        return await self._run(lambda e: e.add_session_to_memory(request))

    async def add_events_to_memory(
        self, request: mpb.AddEventsToMemoryRequest
    ) -> mpb.AddEventsToMemoryResponse:
        return await self._run(lambda e: e.add_events_to_memory(request))

    async def search_memory(self, request: mpb.SearchMemoryRequest) -> mpb.SearchMemoryResponse:
        return await self._run(lambda e: e.search_memory(request))

    async def delete_memory(self, request: mpb.DeleteMemoryRequest) -> mpb.DeleteMemoryResponse:
        return await self._run(lambda e: e.delete_memory(request))

    async def aclose(self) -> None:
        self._closed = True
        engine, self._engine = self._engine, None
        if engine is not None:
            await engine.close()


def embedded_backend(db: str = ":memory:") -> EmbeddedBackend:
    """A backend over an in-process engine on ``db`` (a SQLite file, or ``:memory:``)."""
    return EmbeddedBackend(db)
