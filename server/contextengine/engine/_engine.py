"""``Engine``: the whole context engine in one object, for the sidecar and for Python programs.

It owns the store, the runtime state (session event cache, app and session configurations and
their resolver), the compactor, the prompt cache, long-term memory and the subscription
broadcaster; opens them in order (:func:`contextengine.engine.open_engine`) and closes them in
reverse. Every RPC of the sidecar is one typed async method here, taking its request message and
returning its response message (``build_context`` returns a :class:`ContextResult`; the
subscription RPCs return async iterators); requests are validated here, so an in-process caller
gets the same errors as a gRPC caller, as :class:`ContextEngineError` (reason, code, details).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType

from contextengine.compaction.compactor import Compactor
from contextengine.core.errors import ContextEngineError
from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.core.tokens import TokenCounter
from contextengine.engine._compaction import CompactionOps
from contextengine.engine._context import ContextBuilder, ContextResult
from contextengine.engine._context_tools import ContextToolOps
from contextengine.engine._memory import MemoryOps
from contextengine.engine._sessions import SessionOps
from contextengine.engine._subscriptions import Stream, SubscriptionOps
from contextengine.memory.service import MemoryService
from contextengine.prompt_cache.service import PromptCache
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.runtime.resolver import ConfigResolver
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import EventStore
from contextengine.subscriptions.broadcaster import Broadcaster
from contextengine.subscriptions.event_stream import StreamSettings
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    context_service_pb2 as cpb,
    context_tools_service_pb2 as tpb,
    event_pb2,
    memory_service_pb2 as mpb,
    session_service_pb2 as spb,
    subscription_service_pb2 as subpb,
)


class Engine:
    """One engine. Made by ``open_engine`` (which opens it); an async context manager whose exit
    is :meth:`close`. The components are read-only attributes, for diagnostics and tests."""

    def __init__(
        self,
        *,
        store: EventStore,
        events: SessionEventCache,
        app_configs: AppConfigs,
        session_configs: SessionConfigs,
        resolver: ConfigResolver,
        compactor: Compactor,
        prompt_cache: PromptCache,
        memory: MemoryService,
        broadcaster: Broadcaster,
        streams: StreamSettings,
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        """Takes the components as built by ``open_engine``; opens nothing."""
        self._store = store
        self._telemetry = telemetry
        self._events = events
        self._app_configs = app_configs
        self._session_configs = session_configs
        self._resolver = resolver
        self._compactor = compactor
        self._prompt_cache = prompt_cache
        self._memory = memory
        self._broadcaster = broadcaster
        self._memory_ops = MemoryOps(memory)
        self._subscriptions = SubscriptionOps(store, broadcaster, streams)
        self._context = ContextBuilder(
            resolver=resolver,
            events=events,
            compactor=compactor,
            memory=memory,
            prompt_cache=prompt_cache,
        )
        self._context_tools = ContextToolOps(
            resolver=resolver,
            events=events,
            compactor=compactor,
            context=self._context,
            clock=clock,
        )
        self._sessions = SessionOps(
            store,
            app_configs,
            session_configs,
            resolver,
            clock,
            record_edits=self._context_tools.record,
        )
        self._compaction = CompactionOps(compactor=compactor, events=events, memory=memory)
        self._opened = False
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Opens the components in order (``open_engine`` calls it). On failure, :meth:`close`
        releases what was opened (each close is safe on a component never opened). Once only."""
        if self._opened or self._closed:
            raise RuntimeError("an engine is opened once")
        self._opened = True
        await self._store.open()
        self._session_configs.start()
        self._broadcaster.start()
        await self._memory.open()

    async def end_streams(self, seconds: float) -> None:
        """Refuses new subscriptions and ends the open ones (their iterators raise
        SHUTTING_DOWN / UNAVAILABLE), waiting up to ``seconds`` for their readers to let go:
        what a graceful shutdown does before the transport stops."""
        await self._broadcaster.shutdown(seconds)

    async def close(self) -> None:
        """Ends open streams, then closes the components in reverse order of opening: the
        compactor (its background summaries), memory, the prompt cache, the session
        configurations, the store (flushing it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self.end_streams(0.0)
        await self._compactor.close()
        await self._memory.close()
        await self._prompt_cache.aclose()
        self._session_configs.close()
        await self._events.close()  # writes the token measures not written yet
        await self._store.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- components ----------------------------------------------------------------------------

    @property
    def store(self) -> EventStore:
        return self._store

    @property
    def events(self) -> SessionEventCache:
        return self._events

    @property
    def app_configs(self) -> AppConfigs:
        return self._app_configs

    @property
    def session_configs(self) -> SessionConfigs:
        return self._session_configs

    @property
    def resolver(self) -> ConfigResolver:
        return self._resolver

    @property
    def compactor(self) -> Compactor:
        return self._compactor

    @property
    def prompt_cache(self) -> PromptCache:
        return self._prompt_cache

    @property
    def memory(self) -> MemoryService:
        return self._memory

    @property
    def broadcaster(self) -> Broadcaster:
        return self._broadcaster

    @property
    def telemetry(self) -> Telemetry:
        """What the components tell of their work (``open_engine(telemetry=...)``)."""
        return self._telemetry

    # -- storage health ------------------------------------------------------------------------

    @property
    def storage_problem(self) -> ContextEngineError | None:
        """Why the store cannot write (STORAGE_FULL / STORAGE_UNAVAILABLE), or None."""
        return self._store.storage_problem

    def add_storage_listener(
        self, listener: Callable[[ContextEngineError | None], None]
    ) -> Callable[[], None]:
        """Tells ``listener`` every change of ``storage_problem``; returns its remover."""
        return self._store.add_storage_listener(listener)

    # -- sessions, events, configurations ------------------------------------------------------

    async def create_session(self, request: spb.CreateSessionRequest) -> spb.CreateSessionResponse:
        return await self._sessions.create_session(request)

    async def get_session(self, request: spb.GetSessionRequest) -> spb.GetSessionResponse:
        return await self._sessions.get_session(request)

    async def list_sessions(self, request: spb.ListSessionsRequest) -> spb.ListSessionsResponse:
        return await self._sessions.list_sessions(request)

    async def delete_session(self, request: spb.DeleteSessionRequest) -> spb.DeleteSessionResponse:
        return await self._sessions.delete_session(request)

    async def append_event(self, request: spb.AppendEventRequest) -> spb.AppendEventResponse:
        return await self._sessions.append_event(request)

    async def append_events(self, request: spb.AppendEventsRequest) -> spb.AppendEventsResponse:
        return await self._sessions.append_events(request)

    async def list_events(self, request: spb.ListEventsRequest) -> spb.ListEventsResponse:
        return await self._sessions.list_events(request)

    async def rewind_session(self, request: spb.RewindSessionRequest) -> spb.RewindSessionResponse:
        return await self._sessions.rewind_session(request)

    async def get_user_state(self, request: spb.GetUserStateRequest) -> spb.GetUserStateResponse:
        return await self._sessions.get_user_state(request)

    async def get_app_config(self, request: spb.GetAppConfigRequest) -> spb.GetAppConfigResponse:
        return await self._sessions.get_app_config(request)

    async def update_app_config(
        self, request: spb.UpdateAppConfigRequest
    ) -> spb.UpdateAppConfigResponse:
        return await self._sessions.update_app_config(request)

    async def get_session_config(
        self, request: spb.GetSessionConfigRequest
    ) -> spb.GetSessionConfigResponse:
        return await self._sessions.get_session_config(request)

    async def update_session_config(
        self, request: spb.UpdateSessionConfigRequest
    ) -> spb.UpdateSessionConfigResponse:
        return await self._sessions.update_session_config(request)

    # -- contexts ------------------------------------------------------------------------------

    async def build_context(self, request: cpb.BuildContextRequest) -> ContextResult:
        """The model context (``result.response()``, or its wire bytes ``result.encoded()``)."""
        result = await self._context.build(request)
        if self._telemetry is not NO_TELEMETRY:
            decision = result.cache_decision
            action = "" if decision is None else cpb.CacheAction.Name(decision.action)
            self._telemetry.context_built(result.token_estimate, action)
        return result

    @property
    def token_counter(self) -> TokenCounter:
        """The counter of BuildContext's token estimates (the inspector counts with it too)."""
        return self._context.counter

    async def context_token_series(
        self,
        request: cpb.BuildContextRequest,
        choose: Callable[[Sequence[event_pb2.Event]], Sequence[int]],
    ) -> tuple[list[event_pb2.Event], list[tuple[int, int]]]:
        """How ``request``'s context grew: the session's events, and the context's total tokens
        right after each event ``choose`` picks, built with BuildContext's own options and
        counter, appending nothing (the inspector's token chart)."""
        return await self._context.token_series(request, choose)

    # -- context tools -------------------------------------------------------------------------

    async def list_context_tools(
        self, request: tpb.ListContextToolsRequest
    ) -> tpb.ListContextToolsResponse:
        return await self._context_tools.list_context_tools(request)

    async def call_context_tool(
        self, request: tpb.CallContextToolRequest
    ) -> tpb.CallContextToolResponse:
        return await self._context_tools.call_context_tool(request)

    # -- compaction ----------------------------------------------------------------------------

    async def end_invocation(self, request: kpb.EndInvocationRequest) -> kpb.EndInvocationResponse:
        return await self._compaction.end_invocation(request)

    async def compact(self, request: kpb.CompactRequest) -> kpb.CompactResponse:
        return await self._compaction.compact(request)

    async def plan_compaction(
        self, request: kpb.PlanCompactionRequest
    ) -> kpb.PlanCompactionResponse:
        return await self._compaction.plan_compaction(request)

    async def commit_compaction(
        self, request: kpb.CommitCompactionRequest
    ) -> kpb.CommitCompactionResponse:
        return await self._compaction.commit_compaction(request)

    async def expand_summary(self, request: kpb.ExpandSummaryRequest) -> kpb.ExpandSummaryResponse:
        return await self._compaction.expand_summary(request)

    async def get_compaction_status(
        self, request: kpb.GetCompactionStatusRequest
    ) -> kpb.GetCompactionStatusResponse:
        return await self._compaction.get_compaction_status(request)

    # -- long-term memory ----------------------------------------------------------------------

    async def add_session_to_memory(
        self, request: mpb.AddSessionToMemoryRequest
    ) -> mpb.AddSessionToMemoryResponse:
        return await self._memory_ops.add_session_to_memory(request)

    async def add_events_to_memory(
        self, request: mpb.AddEventsToMemoryRequest
    ) -> mpb.AddEventsToMemoryResponse:
        return await self._memory_ops.add_events_to_memory(request)

    async def search_memory(self, request: mpb.SearchMemoryRequest) -> mpb.SearchMemoryResponse:
        return await self._memory_ops.search_memory(request)

    async def delete_memory(self, request: mpb.DeleteMemoryRequest) -> mpb.DeleteMemoryResponse:
        return await self._memory_ops.delete_memory(request)

    # -- subscriptions -------------------------------------------------------------------------

    def subscribe_events(
        self, request: subpb.SubscribeEventsRequest
    ) -> Stream[subpb.SubscribeEventsResponse]:
        """The session's (or scope's) events from the request's cursor, then live: ``async for``
        it; ``close()`` it if you stop early. A bad request raises here."""
        return self._subscriptions.subscribe_events(request)

    def watch_session_state(
        self, request: subpb.WatchSessionStateRequest
    ) -> Stream[subpb.WatchSessionStateResponse]:
        """The session's state (or chosen keys), then its changes; as ``subscribe_events``."""
        return self._subscriptions.watch_session_state(request)
