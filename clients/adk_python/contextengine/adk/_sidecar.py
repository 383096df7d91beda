"""The sidecar backend: a contextengine sidecar at a gRPC address, through the Python client
(:class:`contextengine.client.ContextEngineClient`: one deadline per call, safe calls retried after
UNAVAILABLE, failures raised as :class:`contextengine.client.ContextEngineError` with the ErrorInfo
reason).

The client (and its channel) is made on the first call, inside the running event loop. A sidecar
that cannot be reached is reported as a ``ContextEngineError`` with code UNAVAILABLE, no reason, and
a message naming the address.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format, struct_pb2

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    context_service_pb2 as cpb,
    context_tools_service_pb2 as tpb,
    memory_service_pb2 as mpb,
    session_service_pb2 as spb,
)

__all__ = ["SidecarBackend", "sidecar_backend"]

T = TypeVar("T")


def _dict(value: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(value)


class SidecarBackend:
    """A :class:`~contextengine.adk._backend.Backend` over one sidecar; ``client_options`` are
    :class:`ContextEngineClient`'s keyword arguments (``timeout``, ``attempts``, ...)."""

    def __init__(self, target: str, **client_options: Any) -> None:
        if not target:
            raise ValueError("target must be a sidecar address such as 127.0.0.1:50151")
        self.target = target
        self.description = f"contextengine sidecar at {target}"
        self._options = client_options
        self._client: ContextEngineClient | None = None
        self._closed = False

    def client(self) -> ContextEngineClient:
        """The client (made here the first time, in the running loop)."""
        if self._closed:
            raise RuntimeError(f"the backend of the {self.description} is closed")
        if self._client is None:
            asyncio.get_running_loop()  # a channel belongs to a loop: refuse to make one outside
            self._client = ContextEngineClient(self.target, **self._options)
        return self._client

    async def _run(self, call: Callable[[ContextEngineClient], Awaitable[T]]) -> T:
        try:
            return await call(self.client())
        except ContextEngineError as err:
            if err.code == grpc.StatusCode.UNAVAILABLE and not err.reason:
                raise ContextEngineError(
                    err.code,
                    f"the {self.description} is not reachable ({err.message})",
                    err.reason,
                    err.metadata,
                ) from None
            raise

    async def create_session(self, request: spb.CreateSessionRequest) -> spb.CreateSessionResponse:
        config = request.config if request.HasField("config") else None
        session = await self._run(
            lambda c: c.create_session(
                request.app_name,
                request.user_id,
                request.session_id,
                _dict(request.state),
                config=config,
            )
        )
        return spb.CreateSessionResponse(session=session)

    async def get_session(self, request: spb.GetSessionRequest) -> spb.GetSessionResponse:
        session = await self._run(
            lambda c: c.get_session(
                request.app_name,
                request.user_id,
                request.session_id,
                num_recent_events=(
                    request.num_recent_events if request.HasField("num_recent_events") else None
                ),
                after_timestamp=(
                    request.after_timestamp if request.HasField("after_timestamp") else None
                ),
                after_sequence=(
                    request.after_sequence if request.HasField("after_sequence") else None
                ),
            )
        )
        return spb.GetSessionResponse(session=session)

    async def list_sessions(self, request: spb.ListSessionsRequest) -> spb.ListSessionsResponse:
        return await self._run(
            lambda c: c.list_sessions_page(
                request.app_name,
                request.user_id,
                page_size=request.page_size,
                page_token=request.page_token,
                order=request.order,
            )
        )

    async def delete_session(self, request: spb.DeleteSessionRequest) -> spb.DeleteSessionResponse:
        deleted = await self._run(
            lambda c: c.delete_session(
                request.app_name,
                request.user_id,
                request.session_id,
                allow_missing=request.allow_missing,
            )
        )
        return spb.DeleteSessionResponse(deleted=deleted)

    async def append_event(self, request: spb.AppendEventRequest) -> spb.AppendEventResponse:
        expected = (
            request.expected_last_sequence if request.HasField("expected_last_sequence") else None
        )
        return await self._run(
            lambda c: c.append_event(
                request.app_name,
                request.user_id,
                request.session_id,
                request.event,
                expected_last_sequence=expected,
            )
        )

    async def list_events(self, request: spb.ListEventsRequest) -> spb.ListEventsResponse:
        return await self._run(
            lambda c: c.list_events_page(
                request.app_name,
                request.user_id,
                request.session_id,
                after_sequence=request.after_sequence,
                page_size=request.page_size,
                page_token=request.page_token,
            )
        )

    async def get_user_state(self, request: spb.GetUserStateRequest) -> spb.GetUserStateResponse:
        state = await self._run(lambda c: c.get_user_state(request.app_name, request.user_id))
        response = spb.GetUserStateResponse()
        response.state.update(state)
        return response

    async def get_app_config(self, request: spb.GetAppConfigRequest) -> spb.GetAppConfigResponse:
        config = await self._run(lambda c: c.get_app_config(request.app_name))
        return spb.GetAppConfigResponse(config=config)

    async def build_context(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        def call(c: ContextEngineClient) -> Awaitable[cpb.BuildContextResponse]:
            return c.build_context(
                request.app_name,
                request.user_id,
                request.session_id,
                agent_name=request.agent_name,
                branch=request.branch if request.HasField("branch") else None,
                isolation_scope=(
                    request.isolation_scope if request.HasField("isolation_scope") else None
                ),
                include_contents=request.include_contents,
                model=request.model if request.HasField("model") else None,
                include_thoughts_from_other_agents=request.include_thoughts_from_other_agents,
                user_content=request.user_content if request.HasField("user_content") else None,
                preload_memory=request.preload_memory,
                memory_query=request.memory_query if request.HasField("memory_query") else None,
                system_instruction=(
                    request.system_instruction if request.HasField("system_instruction") else None
                ),
                tools=[_dict(tool) for tool in request.tools],
                tool_config=(
                    _dict(request.tool_config) if request.HasField("tool_config") else None
                ),
                invocation_id=request.invocation_id,
                skip_compaction=request.skip_compaction,
                since=request.since if request.HasField("since") else None,
            )

        return await self._run(call)

    async def end_invocation(self, request: kpb.EndInvocationRequest) -> kpb.EndInvocationResponse:
        scheduled = await self._run(
            lambda c: c.end_invocation(
                request.app_name, request.user_id, request.session_id, request.invocation_id
            )
        )
        return kpb.EndInvocationResponse(scheduled=scheduled)

    async def list_context_tools(
        self, request: tpb.ListContextToolsRequest
    ) -> tpb.ListContextToolsResponse:
        return await self._run(lambda c: c.list_context_tools(request.app_name, request.user_id))

    async def call_context_tool(
        self, request: tpb.CallContextToolRequest
    ) -> tpb.CallContextToolResponse:
        return await self._run(
            lambda c: c.call_context_tool(
                request.app_name,
                request.user_id,
                request.session_id,
                request.call,
                agent_name=request.agent_name,
                branch=request.branch if request.HasField("branch") else None,
                isolation_scope=(
                    request.isolation_scope if request.HasField("isolation_scope") else None
                ),
                invocation_id=request.invocation_id,
            )
        )

    async def add_session_to_memory(
        self, request: mpb.AddSessionToMemoryRequest
    ) -> mpb.AddSessionToMemoryResponse:
        return await self._run(
            lambda c: c.add_session_to_memory(request.app_name, request.user_id, request.session_id)
        )

    async def add_events_to_memory(
        self, request: mpb.AddEventsToMemoryRequest
    ) -> mpb.AddEventsToMemoryResponse:
        return await self._run(
            lambda c: c.add_events_to_memory(
                request.app_name, request.user_id, request.session_id, list(request.sequences)
            )
        )

    async def search_memory(self, request: mpb.SearchMemoryRequest) -> mpb.SearchMemoryResponse:
        return await self._run(
            lambda c: c.search_memory(
                request.app_name, request.user_id, request.query, limit=request.limit
            )
        )

    async def delete_memory(self, request: mpb.DeleteMemoryRequest) -> mpb.DeleteMemoryResponse:
        deleted = await self._run(
            lambda c: c.delete_memory(request.app_name, request.user_id, request.session_id)
        )
        return mpb.DeleteMemoryResponse(deleted_count=deleted)

    async def aclose(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def sidecar_backend(target: str, **client_options: Any) -> SidecarBackend:
    """A backend over the sidecar at ``target`` (``host:port``); ``client_options`` go to
    :class:`contextengine.client.ContextEngineClient` (``timeout``, ``attempts``, ...)."""
    return SidecarBackend(target, **client_options)
