"""A small async Python client over the generated stubs.

    async with ContextEngineClient("127.0.0.1:50151") as ce:
        session = await ce.create_session("my-app", "user-1")
        await ce.append_event("my-app", "user-1", session.id, event)

Every call has one deadline (``timeout``) that covers the whole call, retries and backoff included.
Calls that are safe to repeat are retried with backoff after UNAVAILABLE, and only then: every read,
idempotent writes (configurations, memory deletes, a session delete with ``allow_missing``), and
appends, which are idempotent because the client gives each event an id (and a timestamp) before the
first attempt; the TypeScript and Java clients follow the same rule. Which calls those are is
declared once, in the protos (each method's ``idempotency_level``), and read from the generated
descriptors (``_retries``). Errors are raised as :class:`ContextEngineError` with the gRPC code and
the server's ``ErrorInfo`` reason.

Streams (``subscribe_events``, ``watch_session_state``) have no deadline. They resubscribe by
themselves, from the last cursor received, when the server shuts down, the connection is lost or
the subscriber lagged; close them with ``contextlib.aclosing`` (or ``aclose()``) when done.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf import struct_pb2

from contextengine.client._context_tools import ContextTools
from contextengine.client._context_view import ContextView
from contextengine.client._errors import ContextEngineError, to_client_error
from contextengine.client._json import json_number
from contextengine.client._rendered import request_part
from contextengine.client._rendered_view import RenderedView
from contextengine.client._resumable import FollowPolicy, follow
from contextengine.client._retries import is_retryable
from contextengine.client._security import open_channel
from contextengine.client._timeouts import within
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    compaction_service_pb2_grpc,
    config_pb2,
    content_pb2,
    context_service_pb2 as cpb,
    context_service_pb2_grpc,
    context_tools_service_pb2 as tpb,
    context_tools_service_pb2_grpc,
    event_pb2,
    memory_service_pb2 as mpb,
    memory_service_pb2_grpc,
    session_pb2,
    session_service_pb2 as pb,
    session_service_pb2_grpc,
    subscription_service_pb2 as spb,
    subscription_service_pb2_grpc,
)

__all__ = ["ContextEngineClient", "ContextEngineError", "context_request"]

#: the server's heartbeat interval when a request leaves it to the server
_SERVER_HEARTBEAT_SECONDS = 15.0

#: ``subscribe_events`` by default: the most events the server may send in one message (the
#: client then yields them one ``event`` frame each)
_SUBSCRIBE_WIRE_BATCH = 256

T = TypeVar("T")

#: the one status after which a safe call is tried again (the deadline covers every attempt, so a
#: DEADLINE_EXCEEDED leaves no time for another); the same rule as the TypeScript and Java clients.
#: Which calls are safe is the proto's ``idempotency_level`` of each method (``_retries``).
_RETRY_ON = frozenset({grpc.StatusCode.UNAVAILABLE})


class ContextEngineClient:
    """An async client for one sidecar. Use as an async context manager or call ``close``."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 10.0,
        attempts: int = 4,
        max_message_bytes: int = 64 * 1024 * 1024,
        channel_options: Sequence[tuple[str, Any]] = (),
        token: str | None = None,
        tls: bool = False,
        root_certificates: bytes | None = None,
        certificate_chain: bytes | None = None,
        private_key: bytes | None = None,
        server_name: str | None = None,
    ) -> None:
        """``channel_options`` are extra gRPC channel arguments, added to the defaults.

        Security (``docs/security.md``): ``token`` is sent as ``authorization: Bearer <token>``
        on every call. ``tls=True`` connects with TLS, verifying the server against the
        system's roots, or against ``root_certificates`` (PEM; giving them implies TLS);
        ``certificate_chain`` and ``private_key`` (PEM) are the client's certificate for mTLS;
        ``server_name`` is the name the server's certificate must carry when it is not the
        target's host (with a unix socket, whose target is its path)."""
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.target = target
        self.timeout = timeout
        self.attempts = attempts
        self._max_message_bytes = max_message_bytes
        self._channel = open_channel(
            target,
            [
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes),
                ("grpc.keepalive_time_ms", 30_000),
                ("grpc.keepalive_permit_without_calls", 1),
                *channel_options,
            ],
            token=token,
            tls=tls,
            root_certificates=root_certificates,
            certificate_chain=certificate_chain,
            private_key=private_key,
            server_name=server_name,
        )
        self._sessions = session_service_pb2_grpc.SessionServiceStub(self._channel)
        self._contexts = context_service_pb2_grpc.ContextServiceStub(self._channel)
        self._subscriptions = subscription_service_pb2_grpc.SubscriptionServiceStub(self._channel)
        self._compaction = compaction_service_pb2_grpc.CompactionServiceStub(self._channel)
        self._memory = memory_service_pb2_grpc.MemoryServiceStub(self._channel)
        self._tools = context_tools_service_pb2_grpc.ContextToolsServiceStub(self._channel)

    @property
    def channel(self) -> grpc.aio.Channel:
        return self._channel

    async def __aenter__(self) -> ContextEngineClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def wait_ready(self, seconds: float = 10.0) -> None:
        """Waits until the channel is connected (raises TimeoutError)."""
        await within(self._channel.channel_ready(), seconds)

    async def _call(
        self,
        fn: Callable[[float], Awaitable[T]],
        method: str,
        deadline_seconds: float | None = None,
        *,
        retry: bool = True,
    ) -> T:
        """Calls ``fn(time left)``, the RPC ``method`` ("Service/Method"), until it succeeds,
        fails with a status after which it may not be repeated or the attempts run out. It may be
        repeated after UNAVAILABLE when its proto declares an ``idempotency_level`` (and ``retry``,
        a request's own condition, holds); never otherwise. One deadline (``deadline_seconds``, else the client's timeout) covers
        the whole call, retries and backoff included: no retry starts that could not end in time,
        and a call never takes longer than its deadline."""
        retry_on = _RETRY_ON if retry and is_retryable(method) else frozenset()
        budget = self.timeout if deadline_seconds is None else deadline_seconds
        deadline = time.monotonic() + budget
        delay = 0.05
        for attempt in range(1, self.attempts + 1):
            try:
                return await fn(max(deadline - time.monotonic(), 0.001))
            except grpc.aio.AioRpcError as err:
                pause = delay * (0.5 + random.random())
                last = attempt == self.attempts or time.monotonic() + pause >= deadline
                if err.code() not in retry_on or last:
                    raise await to_client_error(err, self._max_message_bytes) from None
            await asyncio.sleep(pause)
            delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    # Sessions ------------------------------------------------------------------------------

    async def create_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str = "",
        state: Mapping[str, Any] | None = None,
        *,
        config: config_pb2.SessionConfig | None = None,
    ) -> session_pb2.Session:
        """Creates a session (not retried: a retry could hit ALREADY_EXISTS), with its own
        ``config`` from the start when given (see ``update_session_config``)."""
        request = pb.CreateSessionRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            state=_struct(state or {}),
        )
        if config is not None:
            request.config.CopyFrom(config)
        response = await self._call(
            lambda t: self._sessions.CreateSession(request, timeout=t),
            "SessionService/CreateSession",
        )
        return response.session

    async def get_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        num_recent_events: int | None = None,
        after_timestamp: float | None = None,
        after_sequence: int | None = None,
    ) -> session_pb2.Session:
        request = pb.GetSessionRequest(app_name=app_name, user_id=user_id, session_id=session_id)
        if num_recent_events is not None:
            request.num_recent_events = num_recent_events
        if after_timestamp is not None:
            request.after_timestamp = after_timestamp
        if after_sequence is not None:
            request.after_sequence = after_sequence
        response = await self._call(
            lambda t: self._sessions.GetSession(request, timeout=t), "SessionService/GetSession"
        )
        return response.session

    async def list_sessions(
        self,
        app_name: str,
        user_id: str = "",
        *,
        page_size: int = 0,
        order: pb.SessionOrder.ValueType = pb.SESSION_ORDER_UNSPECIFIED,
    ) -> AsyncIterator[session_pb2.Session]:
        """All sessions of the app (or of one user), page by page, in ``order``: by (user_id,
        session id) by default, ``SESSION_ORDER_LAST_UPDATE_ASC`` for google-adk's order."""
        token = ""
        while True:
            response = await self.list_sessions_page(
                app_name, user_id, page_size=page_size, page_token=token, order=order
            )
            for session in response.sessions:
                yield session
            token = response.next_page_token
            if not token:
                return

    async def list_sessions_page(
        self,
        app_name: str,
        user_id: str = "",
        *,
        page_size: int = 0,
        page_token: str = "",
        order: pb.SessionOrder.ValueType = pb.SESSION_ORDER_UNSPECIFIED,
    ) -> pb.ListSessionsResponse:
        """One page of ``list_sessions`` (``next_page_token`` asks for the next one, with the
        same ``order``)."""
        request = pb.ListSessionsRequest(
            app_name=app_name,
            user_id=user_id,
            page_size=page_size,
            page_token=page_token,
            order=order,
        )
        return await self._call(
            lambda t: self._sessions.ListSessions(request, timeout=t), "SessionService/ListSessions"
        )

    async def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state, keys without the ``user:`` prefix (empty for a user without one)."""
        request = pb.GetUserStateRequest(app_name=app_name, user_id=user_id)
        response = await self._call(
            lambda t: self._sessions.GetUserState(request, timeout=t), "SessionService/GetUserState"
        )
        return _plain(response.state)

    async def delete_session(
        self, app_name: str, user_id: str, session_id: str, *, allow_missing: bool = False
    ) -> bool:
        request = pb.DeleteSessionRequest(
            app_name=app_name, user_id=user_id, session_id=session_id, allow_missing=allow_missing
        )
        response = await self._call(
            lambda t: self._sessions.DeleteSession(request, timeout=t),
            "SessionService/DeleteSession",
            # The proto declares it IDEMPOTENT, but a repeat after a lost answer would meet
            # NOT_FOUND unless a missing session is allowed (then it answers deleted=false).
            retry=allow_missing,
        )
        return response.deleted

    # Events --------------------------------------------------------------------------------

    @staticmethod
    def _prepare(event: event_pb2.Event) -> event_pb2.Event:
        """A copy with an id and a timestamp, so that retries are exact replays."""
        out = event_pb2.Event()
        out.CopyFrom(event)
        if not out.id:
            out.id = str(uuid.uuid4())
        if out.timestamp == 0.0:
            out.timestamp = time.time()
        return out

    async def append_event(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event: event_pb2.Event,
        *,
        expected_last_sequence: int | None = None,
    ) -> pb.AppendEventResponse:
        """Appends one event; retried safely (idempotent by the event id)."""
        request = pb.AppendEventRequest(app_name=app_name, user_id=user_id, session_id=session_id)
        # None (untyped callers) sends no event: the server answers MISSING_FIELD, as it does to
        # every client (the client does not validate requests itself).
        if event is not None:
            request.event.CopyFrom(self._prepare(event))
        if expected_last_sequence is not None:
            request.expected_last_sequence = expected_last_sequence
        return await self._call(
            lambda t: self._sessions.AppendEvent(request, timeout=t), "SessionService/AppendEvent"
        )

    async def append_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        events: Sequence[event_pb2.Event],
        *,
        expected_last_sequence: int | None = None,
    ) -> pb.AppendEventsResponse:
        """Appends events atomically; retried safely (idempotent by event ids)."""
        request = pb.AppendEventsRequest(app_name=app_name, user_id=user_id, session_id=session_id)
        request.events.extend(self._prepare(e) for e in events)
        if expected_last_sequence is not None:
            request.expected_last_sequence = expected_last_sequence
        return await self._call(
            lambda t: self._sessions.AppendEvents(request, timeout=t), "SessionService/AppendEvents"
        )

    async def list_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        after_sequence: int = 0,
        page_size: int = 0,
    ) -> AsyncIterator[event_pb2.Event]:
        """Events after ``after_sequence`` in log order, page by page."""
        token = ""
        while True:
            response = await self.list_events_page(
                app_name,
                user_id,
                session_id,
                after_sequence=after_sequence,
                page_size=page_size,
                page_token=token,
            )
            for event in response.events:
                yield event
            token = response.next_page_token
            if not token:
                return

    async def list_events_page(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        after_sequence: int = 0,
        page_size: int = 0,
        page_token: str = "",
    ) -> pb.ListEventsResponse:
        """One page of ``list_events``, with the session's ``last_sequence`` at the time of the
        call (``next_page_token`` asks for the next page)."""
        request = pb.ListEventsRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            after_sequence=after_sequence,
            page_size=page_size,
            page_token=page_token,
        )
        return await self._call(
            lambda t: self._sessions.ListEvents(request, timeout=t), "SessionService/ListEvents"
        )

    async def rewind_session(
        self, app_name: str, user_id: str, session_id: str, rewind_before_invocation_id: str
    ) -> event_pb2.Event:
        """Rewinds to just before an invocation; returns the recorded rewind event. Not retried
        (a retry would append a second rewind event)."""
        request = pb.RewindSessionRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            rewind_before_invocation_id=rewind_before_invocation_id,
        )
        response = await self._call(
            lambda t: self._sessions.RewindSession(request, timeout=t),
            "SessionService/RewindSession",
        )
        return response.event

    # Contexts ------------------------------------------------------------------------------

    async def build_context(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        agent_name: str = "",
        branch: str | None = None,
        isolation_scope: str | None = None,
        include_contents: cpb.IncludeContents.ValueType = cpb.INCLUDE_CONTENTS_DEFAULT,
        model: cpb.ModelIdentity | None = None,
        include_thoughts_from_other_agents: bool = False,
        user_content: content_pb2.Content | None = None,
        preload_memory: bool = False,
        memory_query: str | None = None,
        system_instruction: content_pb2.Content | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_config: Mapping[str, Any] | None = None,
        invocation_id: str = "",
        skip_compaction: bool = False,
        since: cpb.ContextSince | None = None,
        render: cpb.RenderRequest | None = None,
    ) -> cpb.BuildContextResponse:
        """The model contents for ``agent_name``'s next model call. ``preload_memory`` also
        recalls the user's memories for the current message (or ``memory_query``) into
        ``memory_preload``. For apps with prompt caching, ``system_instruction``, ``tools``
        (google-genai ``Tool`` JSON objects) and ``tool_config`` are what the fingerprint covers
        besides the contents, and ``invocation_id`` is the current invocation (the response's
        ``cache_decision`` says what to do about the cache). ``skip_compaction`` builds without
        running the token-threshold compaction first. ``since`` (the count and digest of
        contents held from an earlier answer) asks for only the contents after them when they
        are still the first ones: the raw answer is returned, ``base_contents_count`` says how
        many held ones come first (0: all are in ``contents``); :meth:`context_view` holds
        and reassembles them. ``render`` asks for the context as another provider's request
        part instead of ``contents`` (``rendered``; :meth:`render_context` gives it as the
        provider's own request part; :meth:`rendered_view` keeps the items and sends
        ``render.since``)."""
        request = context_request(
            app_name,
            user_id,
            session_id,
            agent_name=agent_name,
            branch=branch,
            isolation_scope=isolation_scope,
            include_contents=include_contents,
            model=model,
            include_thoughts_from_other_agents=include_thoughts_from_other_agents,
            user_content=user_content,
            preload_memory=preload_memory,
            memory_query=memory_query,
            system_instruction=system_instruction,
            tools=tools,
            tool_config=tool_config,
            invocation_id=invocation_id,
            skip_compaction=skip_compaction,
            since=since,
            render=render,
        )
        return await self.send_build_context(request)

    async def render_context(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        format: cpb.RenderFormat.ValueType,
        **options: Any,
    ) -> dict[str, Any]:
        """The context for the next model call as the provider's own request part (see
        :func:`contextengine.client.request_part`): ``{"messages": [...]}`` for OpenAI Chat
        Completions, ``{"input": [...], "instructions": ...}`` for the Responses API,
        ``{"messages": [...], "system": ...}`` for Anthropic Messages; pass it to the provider's
        SDK as keyword arguments. ``options`` are :meth:`build_context`'s."""
        answer = await self.build_context(
            app_name, user_id, session_id, render=cpb.RenderRequest(format=format), **options
        )
        return request_part(answer.rendered)

    async def send_build_context(
        self, request: cpb.BuildContextRequest
    ) -> cpb.BuildContextResponse:
        """BuildContext with ``request`` as it is (retried after UNAVAILABLE like
        :meth:`build_context`); the raw answer."""
        return await self._call(
            lambda t: self._contexts.BuildContext(request, timeout=t), "ContextService/BuildContext"
        )

    def context_view(
        self, app_name: str, user_id: str, session_id: str, **options: Any
    ) -> ContextView:
        """A :class:`ContextView` of the session, the agent and the view options
        (:meth:`build_context`'s ``options``): its ``build()`` sends ``since`` with the contents
        of its last answer and returns the whole contents, while only the new ones cross the
        wire."""
        return ContextView(self.send_build_context, app_name, user_id, session_id, **options)

    def rendered_view(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        format: cpb.RenderFormat.ValueType,
        **options: Any,
    ) -> RenderedView:
        """A :class:`RenderedView` of the session, the agent and the view options
        (:meth:`build_context`'s ``options``, without ``render``) rendered as ``format``: its
        ``build()`` sends ``render.since`` with the items of its last rendering and returns the
        whole rendering (``request_part(answer.rendered)`` is the provider's request part),
        while only the new items cross the wire."""
        return RenderedView(
            self.send_build_context, app_name, user_id, session_id, format=format, **options
        )

    # Memory --------------------------------------------------------------------------------

    async def add_session_to_memory(
        self, app_name: str, user_id: str, session_id: str
    ) -> mpb.AddSessionToMemoryResponse:
        """Makes the session's memories its surviving events with text (idempotent: retried)."""
        request = mpb.AddSessionToMemoryRequest(
            app_name=app_name, user_id=user_id, session_id=session_id
        )
        return await self._call(
            lambda t: self._memory.AddSessionToMemory(request, timeout=t),
            "MemoryService/AddSessionToMemory",
        )

    async def add_events_to_memory(
        self, app_name: str, user_id: str, session_id: str, sequences: Sequence[int]
    ) -> mpb.AddEventsToMemoryResponse:
        """Remembers chosen events of a session, by sequence (idempotent: retried)."""
        request = mpb.AddEventsToMemoryRequest(
            app_name=app_name, user_id=user_id, session_id=session_id, sequences=list(sequences)
        )
        return await self._call(
            lambda t: self._memory.AddEventsToMemory(request, timeout=t),
            "MemoryService/AddEventsToMemory",
        )

    async def search_memory(
        self, app_name: str, user_id: str, query: str, *, limit: int = 0
    ) -> mpb.SearchMemoryResponse:
        """The user's memories that share words with ``query``, best first (``limit`` 0: the
        app's ``MemoryConfig.max_results``)."""
        request = mpb.SearchMemoryRequest(
            app_name=app_name, user_id=user_id, query=query, limit=limit
        )
        return await self._call(
            lambda t: self._memory.SearchMemory(request, timeout=t), "MemoryService/SearchMemory"
        )

    async def delete_memory(self, app_name: str, user_id: str, session_id: str = "") -> int:
        """Deletes one session's memories (or all of the user's when ``session_id`` is empty);
        returns how many were deleted."""
        request = mpb.DeleteMemoryRequest(app_name=app_name, user_id=user_id, session_id=session_id)
        response = await self._call(
            lambda t: self._memory.DeleteMemory(request, timeout=t), "MemoryService/DeleteMemory"
        )
        return response.deleted_count

    # Compaction ----------------------------------------------------------------------------

    async def end_invocation(
        self, app_name: str, user_id: str, session_id: str, invocation_id: str = ""
    ) -> bool:
        """Tells the engine an invocation is over; it may compact in the background. True when
        a compaction was scheduled."""
        request = kpb.EndInvocationRequest(
            app_name=app_name, user_id=user_id, session_id=session_id, invocation_id=invocation_id
        )
        response = await self._call(
            lambda t: self._compaction.EndInvocation(request, timeout=t),
            "CompactionService/EndInvocation",
        )
        return response.scheduled

    async def compact(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        trigger: kpb.CompactionTrigger.ValueType = kpb.COMPACTION_TRIGGER_AFTER_INVOCATION,
        agent_name: str = "",
        branch: str | None = None,
        isolation_scope: str | None = None,
        deadline_seconds: float | None = None,
    ) -> kpb.CompactResponse:
        """Compacts now and waits for the summarizer (``deadline_seconds`` overrides the
        client's deadline: summarizers can be slow)."""
        request = kpb.CompactRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            trigger=trigger,
            agent_name=agent_name,
        )
        if branch is not None:
            request.branch = branch
        if isolation_scope is not None:
            request.isolation_scope = isolation_scope
        deadline = self.timeout if deadline_seconds is None else deadline_seconds
        return await self._call(
            lambda t: self._compaction.Compact(request, timeout=t),
            "CompactionService/Compact",
            deadline,
        )

    async def plan_compaction(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        trigger: kpb.CompactionTrigger.ValueType = kpb.COMPACTION_TRIGGER_AFTER_INVOCATION,
        agent_name: str = "",
        branch: str | None = None,
        isolation_scope: str | None = None,
        ignore_trigger: bool = False,
    ) -> kpb.PlanCompactionResponse:
        """The range the engine would compact now, rendered for a summarizer (appends nothing)."""
        request = kpb.PlanCompactionRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            trigger=trigger,
            agent_name=agent_name,
            ignore_trigger=ignore_trigger,
        )
        if branch is not None:
            request.branch = branch
        if isolation_scope is not None:
            request.isolation_scope = isolation_scope
        return await self._call(
            lambda t: self._compaction.PlanCompaction(request, timeout=t),
            "CompactionService/PlanCompaction",
        )

    async def commit_compaction(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        plan: kpb.CompactionPlan,
        summary: content_pb2.Content | str,
        *,
        usage_metadata: event_pb2.UsageMetadata | None = None,
    ) -> event_pb2.Event:
        """Appends a summary written by the client's own model for ``plan``'s range."""
        if isinstance(summary, str):
            summary = content_pb2.Content(role="model", parts=[content_pb2.Part(text=summary)])
        request = kpb.CommitCompactionRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            based_on_sequence=plan.based_on_sequence,
            first_sequence=plan.first_sequence,
            last_sequence=plan.last_sequence,
            rolls_up_sequence=plan.rolls_up_sequence,
            summary=summary,
        )
        if plan.HasField("isolation_scope"):
            request.isolation_scope = plan.isolation_scope
        if usage_metadata is not None:
            request.usage_metadata.CopyFrom(usage_metadata)
        response = await self._call(
            lambda t: self._compaction.CommitCompaction(request, timeout=t),
            "CompactionService/CommitCompaction",
        )
        return response.summary

    async def expand_summary(
        self, app_name: str, user_id: str, session_id: str, summary_sequence: int
    ) -> kpb.ExpandSummaryResponse:
        """The raw events and earlier summaries a summary replaced."""
        request = kpb.ExpandSummaryRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            summary_sequence=summary_sequence,
        )
        return await self._call(
            lambda t: self._compaction.ExpandSummary(request, timeout=t),
            "CompactionService/ExpandSummary",
        )

    async def compaction_status(
        self, app_name: str, user_id: str, session_id: str
    ) -> kpb.GetCompactionStatusResponse:
        request = kpb.GetCompactionStatusRequest(
            app_name=app_name, user_id=user_id, session_id=session_id
        )
        return await self._call(
            lambda t: self._compaction.GetCompactionStatus(request, timeout=t),
            "CompactionService/GetCompactionStatus",
        )

    # Context tools -------------------------------------------------------------------------

    async def list_context_tools(
        self, app_name: str, user_id: str = ""
    ) -> tpb.ListContextToolsResponse:
        """The context tools' declarations, for google-genai, OpenAI and Anthropic (``user_id``:
        needed by a token restricted to one user)."""
        request = tpb.ListContextToolsRequest(app_name=app_name, user_id=user_id)
        return await self._call(
            lambda t: self._tools.ListContextTools(request, timeout=t),
            "ContextToolsService/ListContextTools",
        )

    async def call_context_tool(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        call: content_pb2.FunctionCall,
        *,
        agent_name: str = "",
        branch: str | None = None,
        isolation_scope: str | None = None,
        invocation_id: str = "",
    ) -> tpb.CallContextToolResponse:
        """Runs one call of a context tool; append ``response.response`` as the call's answer.
        Not retried (a summary is appended by the call)."""
        request = tpb.CallContextToolRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            agent_name=agent_name,
            call=call,
            invocation_id=invocation_id,
        )
        if branch is not None:
            request.branch = branch
        if isolation_scope is not None:
            request.isolation_scope = isolation_scope
        return await self._call(
            lambda t: self._tools.CallContextTool(request, timeout=t),
            "ContextToolsService/CallContextTool",
        )

    def context_tools(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        agent_name: str = "",
        branch: str | None = None,
        isolation_scope: str | None = None,
    ) -> ContextTools:
        """The context tools of one agent in one session (:class:`ContextTools`)."""
        return ContextTools(
            self,
            app_name,
            user_id,
            session_id,
            agent_name=agent_name,
            branch=branch,
            isolation_scope=isolation_scope,
        )

    # App configuration ---------------------------------------------------------------------

    async def get_app_config(self, app_name: str) -> config_pb2.AppConfig:
        request = pb.GetAppConfigRequest(app_name=app_name)
        response = await self._call(
            lambda t: self._sessions.GetAppConfig(request, timeout=t), "SessionService/GetAppConfig"
        )
        return response.config

    async def update_app_config(self, config: config_pb2.AppConfig) -> config_pb2.AppConfig:
        request = pb.UpdateAppConfigRequest(config=config)
        response = await self._call(
            lambda t: self._sessions.UpdateAppConfig(request, timeout=t),
            "SessionService/UpdateAppConfig",
        )
        return response.config

    async def get_session_config(
        self, app_name: str, user_id: str, session_id: str
    ) -> pb.GetSessionConfigResponse:
        """The session's own configuration and the compaction configuration in effect for it
        (its own, else its app's)."""
        request = pb.GetSessionConfigRequest(
            app_name=app_name, user_id=user_id, session_id=session_id
        )
        return await self._call(
            lambda t: self._sessions.GetSessionConfig(request, timeout=t),
            "SessionService/GetSessionConfig",
        )

    async def update_session_config(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        config: config_pb2.SessionConfig,
    ) -> pb.UpdateSessionConfigResponse:
        """Replaces the session's own configuration (an empty one removes the override); retried
        safely (a replacement)."""
        request = pb.UpdateSessionConfigRequest(
            app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )
        return await self._call(
            lambda t: self._sessions.UpdateSessionConfig(request, timeout=t),
            "SessionService/UpdateSessionConfig",
        )

    # Subscriptions -------------------------------------------------------------------------

    async def subscribe_events(
        self,
        app_name: str,
        user_id: str = "",
        session_id: str = "",
        *,
        cursor: str = "",
        authors: Sequence[str] = (),
        branches: Sequence[str] = (),
        kinds: Sequence[spb.EventKind.ValueType] = (),
        heartbeat_seconds: int = 0,
        max_events_per_frame: int = 0,
        max_failures: int = 5,
        idle_seconds: float | None = None,
    ) -> AsyncGenerator[spb.SubscribeEventsResponse, None]:
        """Follows one session (``session_id`` given), every session of a user (``user_id``
        given) or of the app: the frames of ``SubscribeEvents`` (events, ``caught_up``,
        heartbeats), starting after ``cursor`` (a frame's cursor; "" = from the start).

        When the stream breaks (server shutdown, connection lost, SUBSCRIBER_LAGGED, or nothing
        received for ``idle_seconds``, by default three heartbeat intervals), it resubscribes
        from the last cursor received: no event is missed or repeated, and a new ``caught_up``
        frame follows the replay. After ``max_failures`` failures in a row the error is raised.

        By default (``max_events_per_frame`` 0) every event is yielded as its own ``event``
        frame, but on the wire the client asks for batches of up to 256 events per message and
        splits them: far fewer messages when events come fast or many are replayed, and a busy
        server may then space this subscriber's live messages out (at most 50 ms apart) so that
        each carries more events. A resubscription resumes after the last event yielded.

        ``max_events_per_frame`` 1: one event per message, sent as soon as it is recorded, never
        paced (costly for the server when events come fast). Above 1: the frames are yielded as
        the server sends them, ``events`` frames (``frame.events.events``, in order; up to that
        many) included, not split; a resubscription resumes after the last event of the last
        batch received.
        """
        scope = (
            spb.SUBSCRIPTION_SCOPE_SESSION
            if session_id
            else spb.SUBSCRIPTION_SCOPE_USER
            if user_id
            else spb.SUBSCRIPTION_SCOPE_APP
        )
        if scope == spb.SUBSCRIPTION_SCOPE_SESSION and not (cursor == "" or cursor.isdigit()):
            raise ValueError(f"a session cursor is a sequence number, not {cursor!r}")
        request = spb.SubscribeEventsRequest(
            scope=scope,
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            authors=authors,
            branches=branches,
            kinds=kinds,
            heartbeat_seconds=heartbeat_seconds,
            max_events_per_frame=max_events_per_frame,
        )
        if scope == spb.SUBSCRIPTION_SCOPE_SESSION:
            request.after_sequence = int(cursor or 0)
        else:
            request.after_cursor = cursor
        frames = self.follow_events(request, max_failures=max_failures, idle_seconds=idle_seconds)
        async with contextlib.aclosing(frames):
            async for frame in frames:
                yield frame

    async def follow_events(
        self,
        request: spb.SubscribeEventsRequest,
        *,
        max_failures: int = 5,
        idle_seconds: float | None = None,
    ) -> AsyncGenerator[spb.SubscribeEventsResponse, None]:
        """``subscribe_events`` for a request written out in full (the scope and the cursor
        field chosen by the caller, sent as they are): followed the same way, resubscribing
        after the last event yielded (``after_sequence`` for the session scope, or no scope;
        ``after_cursor`` otherwise), and with ``max_events_per_frame`` 0 split into one
        ``event`` frame per event from batches of up to 256 on the wire."""
        by_sequence = request.scope in (
            spb.SUBSCRIPTION_SCOPE_UNSPECIFIED,
            spb.SUBSCRIPTION_SCOPE_SESSION,
        )
        last = "" if by_sequence else request.after_cursor
        split = request.max_events_per_frame == 0
        response = spb.SubscribeEventsResponse

        def open_call() -> grpc.aio.UnaryStreamCall[
            spb.SubscribeEventsRequest, spb.SubscribeEventsResponse
        ]:
            wire = spb.SubscribeEventsRequest()
            wire.CopyFrom(request)
            if split:
                wire.max_events_per_frame = _SUBSCRIBE_WIRE_BATCH
            if last and by_sequence:
                wire.after_sequence = int(last)
            elif last:
                wire.after_cursor = last
            return self._subscriptions.SubscribeEvents(wire)

        policy = self._follow_policy(max_failures, idle_seconds, request.heartbeat_seconds)
        async with contextlib.aclosing(follow(open_call, policy)) as frames:
            async for frame in frames:
                if split and frame.WhichOneof("frame") == "events":
                    batch = frame.events.events
                    # Resuming happens only once the whole batch was yielded (or never).
                    last = batch[-1].cursor if batch else last
                    for subscribed in batch:
                        single = response()
                        single.event.CopyFrom(subscribed)
                        yield single
                    continue
                last = _frame_cursor(frame) or last
                yield frame

    async def watch_session_state(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        heartbeat_seconds: int = 0,
        max_failures: int = 5,
        idle_seconds: float | None = None,
    ) -> AsyncGenerator[spb.WatchSessionStateResponse, None]:
        """The frames of ``WatchSessionState``: a snapshot of the merged state, then deltas.

        When the stream breaks it is opened again (as ``subscribe_events`` does), and a new
        snapshot follows: replace the state you hold with it."""

        def open_call() -> grpc.aio.UnaryStreamCall[
            spb.WatchSessionStateRequest, spb.WatchSessionStateResponse
        ]:
            return self._subscriptions.WatchSessionState(
                spb.WatchSessionStateRequest(
                    app_name=app_name,
                    user_id=user_id,
                    session_id=session_id,
                    heartbeat_seconds=heartbeat_seconds,
                )
            )

        policy = self._follow_policy(max_failures, idle_seconds, heartbeat_seconds)
        async with contextlib.aclosing(follow(open_call, policy)) as frames:
            async for frame in frames:
                yield frame

    @staticmethod
    def _follow_policy(
        max_failures: int, idle_seconds: float | None, heartbeat_seconds: int
    ) -> FollowPolicy:
        if idle_seconds is None:
            idle_seconds = 3 * (heartbeat_seconds or _SERVER_HEARTBEAT_SECONDS) + 5.0
        return FollowPolicy(max_failures=max_failures, idle_seconds=idle_seconds)


def context_request(
    app_name: str,
    user_id: str,
    session_id: str,
    *,
    agent_name: str = "",
    branch: str | None = None,
    isolation_scope: str | None = None,
    include_contents: cpb.IncludeContents.ValueType = cpb.INCLUDE_CONTENTS_DEFAULT,
    model: cpb.ModelIdentity | None = None,
    include_thoughts_from_other_agents: bool = False,
    user_content: content_pb2.Content | None = None,
    preload_memory: bool = False,
    memory_query: str | None = None,
    system_instruction: content_pb2.Content | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    tool_config: Mapping[str, Any] | None = None,
    invocation_id: str = "",
    skip_compaction: bool = False,
    since: cpb.ContextSince | None = None,
    render: cpb.RenderRequest | None = None,
) -> cpb.BuildContextRequest:
    """The BuildContextRequest of :meth:`ContextEngineClient.build_context`'s arguments."""
    request = cpb.BuildContextRequest(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        agent_name=agent_name,
        include_contents=include_contents,
        include_thoughts_from_other_agents=include_thoughts_from_other_agents,
    )
    if branch is not None:
        request.branch = branch
    if isolation_scope is not None:
        request.isolation_scope = isolation_scope
    if model is not None:
        request.model.CopyFrom(model)
    if user_content is not None:
        request.user_content.CopyFrom(user_content)
    request.preload_memory = preload_memory
    if memory_query is not None:
        request.memory_query = memory_query
    if system_instruction is not None:
        request.system_instruction.CopyFrom(system_instruction)
    for tool in tools:
        request.tools.append(_struct(tool))
    if tool_config is not None:
        request.tool_config.CopyFrom(_struct(tool_config))
    request.invocation_id = invocation_id
    request.skip_compaction = skip_compaction
    if since is not None:
        request.since.CopyFrom(since)
    if render is not None:
        request.render.CopyFrom(render)
    return request


def _struct(data: Mapping[str, Any]) -> struct_pb2.Struct:
    """``data`` (JSON values: dicts, lists, strings, numbers, booleans, None) as a ``Struct``,
    converted by protobuf itself (ValueError on anything else)."""
    out = struct_pb2.Struct()
    out.update(data)
    return out


def _plain(struct: struct_pb2.Struct) -> dict[str, Any]:
    """``struct`` as JSON values, numbers as :func:`json_number` makes them, as the server's own
    conversion does."""
    return {key: _plain_value(value) for key, value in struct.fields.items()}


def _plain_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return json_number(value.number_value)
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return _plain(value.struct_value)
    if kind == "list_value":
        return [_plain_value(item) for item in value.list_value.values]
    return None


def _frame_cursor(frame: spb.SubscribeEventsResponse) -> str:
    """The cursor a frame carries ("" for none)."""
    kind = frame.WhichOneof("frame")
    if kind == "event":
        return frame.event.cursor
    if kind == "events":
        # A batch is resumed past as a whole: after its last event.
        events = frame.events.events
        return events[-1].cursor if events else ""
    if kind == "caught_up":
        return frame.caught_up.cursor
    if kind == "heartbeat":
        return frame.heartbeat.cursor
    return ""
