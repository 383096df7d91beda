"""``contextengine.v1.SessionService`` over the engine: each RPC is one engine call."""

from __future__ import annotations

from contextengine.engine import Engine
from contextengine.v1 import session_service_pb2 as pb


class SessionServicer:
    """Implements every RPC of ``SessionService``; errors are raised as ContextEngineError."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def CreateSession(
        self, request: pb.CreateSessionRequest, context: object
    ) -> pb.CreateSessionResponse:
        return await self._engine.create_session(request)

    async def GetSession(
        self, request: pb.GetSessionRequest, context: object
    ) -> pb.GetSessionResponse:
        return await self._engine.get_session(request)

    async def ListSessions(
        self, request: pb.ListSessionsRequest, context: object
    ) -> pb.ListSessionsResponse:
        return await self._engine.list_sessions(request)

    async def DeleteSession(
        self, request: pb.DeleteSessionRequest, context: object
    ) -> pb.DeleteSessionResponse:
        return await self._engine.delete_session(request)

    async def AppendEvent(
        self, request: pb.AppendEventRequest, context: object
    ) -> pb.AppendEventResponse:
        return await self._engine.append_event(request)

    async def AppendEvents(
        self, request: pb.AppendEventsRequest, context: object
    ) -> pb.AppendEventsResponse:
        return await self._engine.append_events(request)

    async def ListEvents(
        self, request: pb.ListEventsRequest, context: object
    ) -> pb.ListEventsResponse:
        return await self._engine.list_events(request)

    async def RewindSession(
        self, request: pb.RewindSessionRequest, context: object
    ) -> pb.RewindSessionResponse:
        return await self._engine.rewind_session(request)

    async def GetUserState(
        self, request: pb.GetUserStateRequest, context: object
    ) -> pb.GetUserStateResponse:
        return await self._engine.get_user_state(request)

    async def GetAppConfig(
        self, request: pb.GetAppConfigRequest, context: object
    ) -> pb.GetAppConfigResponse:
        return await self._engine.get_app_config(request)

    async def UpdateAppConfig(
        self, request: pb.UpdateAppConfigRequest, context: object
    ) -> pb.UpdateAppConfigResponse:
        return await self._engine.update_app_config(request)

    async def GetSessionConfig(
        self, request: pb.GetSessionConfigRequest, context: object
    ) -> pb.GetSessionConfigResponse:
        return await self._engine.get_session_config(request)

    async def UpdateSessionConfig(
        self, request: pb.UpdateSessionConfigRequest, context: object
    ) -> pb.UpdateSessionConfigResponse:
        return await self._engine.update_session_config(request)
