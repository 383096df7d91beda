"""The differential tests' ``grpc`` engine: the same events through a real sidecar.

One server (in-memory store) is started lazily per test process on an event loop running in a
background thread; every call creates a fresh session, appends the events with one AppendEvents,
configures the app's other-agent preamble and calls BuildContext with the options mapped to the
request. So the parity suite covers the wire format, the service's validation and normalization,
the session event cache and the incremental views, not only the pure pipeline.

:func:`grow_over_grpc` is the same as the log grows: one session, one AppendEvents per event and,
after each, a BuildContext for every view (so the server extends its cached views as in a running
agent, and every intermediate context is judged).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any

from contextengine.client import ContextEngineClient
from contextengine.core.context import ContextOptions, IncludeContents
from contextengine.settings import ServerSettings
from contextengine.transport import ContextEngineServer
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as cpb, event_pb2

from .context_compare import Outcome, outcome_of_call

APP = "parity"


class _Sidecar:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: ContextEngineServer | None = None
        self._client: ContextEngineClient | None = None
        self._preamble: str | None = None
        self._run(self._start()).result(30)
        atexit.register(self.close)

    def _run(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _start(self) -> None:
        self._server = ContextEngineServer(ServerSettings(db=":memory:", listen="127.0.0.1:0"))
        await self._server.start()
        self._client = ContextEngineClient(self._server.target, attempts=1, timeout=60)

    async def _stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._server is not None:
            await self._server.stop(grace=0)

    def close(self) -> None:
        if self._loop.is_running():
            self._run(self._stop()).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def build(
        self, events: Sequence[event_pb2.Event], options: ContextOptions
    ) -> list[content_pb2.Content]:
        return self._run(self._build(list(events), options)).result(120)  # type: ignore[no-any-return]

    def grow(
        self, events: Sequence[event_pb2.Event], options: Sequence[ContextOptions]
    ) -> Iterator[list[list[tuple[str, Outcome]]]]:
        session_id = self._run(self._create()).result(30)
        for event in events:
            self._run(self._append(session_id, [event])).result(60)
            answers = []
            for view_options in options:
                outcome = outcome_of_call(partial(self._build_now, session_id, view_options))
                answers.append([("incremental", outcome)])
            yield answers

    def _build_now(self, session_id: str, options: ContextOptions) -> list[content_pb2.Content]:
        return self._run(self._build_context(session_id, options)).result(120)  # type: ignore[no-any-return]

    async def _create(self) -> str:
        client = self._client
        assert client is not None
        session = await client.create_session(APP, "u", str(uuid.uuid4()))
        return session.id

    async def _append(self, session_id: str, events: list[event_pb2.Event]) -> None:
        client = self._client
        assert client is not None
        await client.append_events(APP, "u", session_id, events)

    async def _build(
        self, events: list[event_pb2.Event], options: ContextOptions
    ) -> list[content_pb2.Content]:
        session_id = await self._create()
        if events:
            await self._append(session_id, events)
        return await self._build_context(session_id, options)

    async def _build_context(
        self, session_id: str, options: ContextOptions
    ) -> list[content_pb2.Content]:
        client = self._client
        assert client is not None
        if options.other_agent_preamble != self._preamble:
            await client.update_app_config(
                config_pb2.AppConfig(
                    app_name=APP, other_agent_preamble=options.other_agent_preamble
                )
            )
            self._preamble = options.other_agent_preamble
        model = cpb.ModelIdentity(
            provider=(
                cpb.MODEL_PROVIDER_ANTHROPIC
                if options.preserve_function_call_ids
                else cpb.MODEL_PROVIDER_GEMINI
            )
        )
        response = await client.build_context(
            APP,
            "u",
            session_id,
            agent_name=options.agent_name,
            branch=options.branch,
            isolation_scope=options.isolation_scope,
            include_contents=(
                cpb.INCLUDE_CONTENTS_NONE
                if options.include_contents is IncludeContents.NONE
                else cpb.INCLUDE_CONTENTS_DEFAULT
            ),
            model=model,
            include_thoughts_from_other_agents=options.include_thoughts_from_other_agents,
            user_content=options.user_content,
        )
        return list(response.contents)


_SIDECAR: _Sidecar | None = None


def build_over_grpc(
    events: Sequence[event_pb2.Event], options: ContextOptions
) -> list[content_pb2.Content]:
    global _SIDECAR  # one lazily started server per test process
    if _SIDECAR is None:
        _SIDECAR = _Sidecar()
    return _SIDECAR.build(events, options)


def grow_over_grpc(
    events: Sequence[event_pb2.Event], options: Sequence[ContextOptions]
) -> Iterator[list[list[tuple[str, Outcome]]]]:
    """After each event appended to one session, BuildContext for every view."""
    global _SIDECAR
    if _SIDECAR is None:
        _SIDECAR = _Sidecar()
    yield from _SIDECAR.grow(events, options)
