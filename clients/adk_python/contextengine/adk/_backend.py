"""The one interface the ADK drop-ins talk to: :class:`Backend`.

A backend answers the engine's RPCs, taking and returning the proto request and response messages
(``contextengine.v1``), with the Engine's method names. There are two, with one behaviour:

- :func:`~contextengine.adk._sidecar.sidecar_backend`: a sidecar at a gRPC address, through
  :class:`contextengine.client.ContextEngineClient` (its deadline, its retries of safe calls, its
  error mapping);
- :func:`~contextengine.adk._embedded.embedded_backend`: the in-process engine
  (``contextengine.engine``, from the server distribution) on a SQLite file or ``:memory:``.

Errors: every failure the engine reports is raised as
:class:`contextengine.client.ContextEngineError`, in both modes, with the gRPC status ``code`` and
the ErrorInfo ``reason`` (``SESSION_NOT_FOUND``, ``SEQUENCE_MISMATCH``, ...) a gRPC caller gets; the
embedded backend converts the engine's ``ContextEngineError`` (``contextengine.engine``'s, a class
of its own) into it. The drop-ins map reasons to ADK's own exceptions.

Both backends connect (or open the engine) lazily, on their first call, so that the drop-ins can
be made outside a running event loop as ADK's services are; ``aclose()`` releases what was opened
and may be called more than once.
"""

from __future__ import annotations

from typing import Any, Protocol

from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    context_service_pb2 as cpb,
    context_tools_service_pb2 as tpb,
    memory_service_pb2 as mpb,
    session_service_pb2 as spb,
)

__all__ = ["Backend", "resolve_backend"]


class Backend(Protocol):
    """The engine's RPCs that the drop-ins need, request message in, response message out."""

    #: what this backend is connected to, for messages ("sidecar 127.0.0.1:50151", "embedded x.db")
    description: str

    async def create_session(
        self, request: spb.CreateSessionRequest
    ) -> spb.CreateSessionResponse: ...

    async def get_session(self, request: spb.GetSessionRequest) -> spb.GetSessionResponse: ...

    async def list_sessions(self, request: spb.ListSessionsRequest) -> spb.ListSessionsResponse: ...

    async def delete_session(
        self, request: spb.DeleteSessionRequest
    ) -> spb.DeleteSessionResponse: ...

    async def append_event(self, request: spb.AppendEventRequest) -> spb.AppendEventResponse: ...

    async def list_events(self, request: spb.ListEventsRequest) -> spb.ListEventsResponse: ...

    async def get_user_state(
        self, request: spb.GetUserStateRequest
    ) -> spb.GetUserStateResponse: ...

    async def get_app_config(
        self, request: spb.GetAppConfigRequest
    ) -> spb.GetAppConfigResponse: ...

    async def build_context(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse: ...

    async def end_invocation(
        self, request: kpb.EndInvocationRequest
    ) -> kpb.EndInvocationResponse: ...

    async def list_context_tools(
        self, request: tpb.ListContextToolsRequest
    ) -> tpb.ListContextToolsResponse: ...

    async def call_context_tool(
        self, request: tpb.CallContextToolRequest
    ) -> tpb.CallContextToolResponse: ...

    async def add_session_to_memory(
        self, request: mpb.AddSessionToMemoryRequest
    ) -> mpb.AddSessionToMemoryResponse: ...

    async def add_events_to_memory(
        self, request: mpb.AddEventsToMemoryRequest
    ) -> mpb.AddEventsToMemoryResponse: ...

    async def search_memory(self, request: mpb.SearchMemoryRequest) -> mpb.SearchMemoryResponse: ...

    async def delete_memory(self, request: mpb.DeleteMemoryRequest) -> mpb.DeleteMemoryResponse: ...

    async def aclose(self) -> None:
        """Releases the channel or the engine (idempotent); the backend is unusable after."""
        ...


def resolve_backend(
    *,
    target: str | None = None,
    db: str | None = None,
    backend: Backend | None = None,
    client_options: dict[str, Any] | None = None,
) -> tuple[Backend, bool]:
    """The backend a drop-in's constructor names (exactly one of ``target=``, ``db=`` and
    ``backend=``) and whether the drop-in owns it (closes it in its ``aclose()``): it owns what it
    made from ``target`` or ``db``, never a ``backend`` it was given to share."""
    given = [
        name
        for name, value in (("target", target), ("db", db), ("backend", backend))
        if value is not None
    ]
    if len(given) != 1:
        raise ValueError(
            "pass exactly one of target= (a sidecar address), db= (a SQLite file or ':memory:') "
            f"and backend= (a shared backend); got {given or 'none'}"
        )
    if client_options and target is None:
        raise ValueError("client options apply to target= (a sidecar) only")
    if backend is not None:
        return backend, False
    if target is not None:
        from contextengine.adk._sidecar import sidecar_backend

        return sidecar_backend(target, **(client_options or {})), True
    from contextengine.adk._embedded import embedded_backend

    assert db is not None
    return embedded_backend(db), True


class UsesBackend:
    """What the three drop-ins share: the backend their constructor names, and closing it when
    they made it."""

    _backend: Backend
    _owns_backend: bool

    def _use_backend(
        self,
        *,
        target: str | None,
        db: str | None,
        backend: Backend | None,
        client_options: dict[str, Any],
    ) -> None:
        self._backend, self._owns_backend = resolve_backend(
            target=target, db=db, backend=backend, client_options=client_options
        )

    @property
    def backend(self) -> Backend:
        """The backend, to share with the other drop-ins (``backend=``)."""
        return self._backend

    async def close(self) -> None:
        """Closes the backend if this drop-in made it (not a ``backend=`` it was given)."""
        if self._owns_backend:
            await self._backend.aclose()
