"""The two sides of the end-to-end differential: one scripted conversation through a real
google-adk ``Runner``.

* the reference (:func:`run_reference`): plain ADK, a session service of ADK's own
  (``InMemorySessionService`` or ``SqliteSessionService``), ADK's own compaction
  (``App.events_compaction_config``) with ``LlmEventSummarizer`` over :class:`GeminiLikeSummaryLlm`
  answering :func:`default_summary_text` of the prompt (what the fake Gemini server answers the
  engine's Gemini summarizer);
* the drop-ins (:func:`run_dropins`): the same agents with ``ContextEngineSessionService``,
  ``ContextEnginePlugin`` and ``ContextEngineMemoryService`` on one backend, no compaction in ADK;
  the app's compaction is configured in the engine (:func:`engine_app_config`), with a Gemini
  summarizer on ADK's default prompt template.

ADK's clock and ids are counters (:func:`~tests.adk.scripted.deterministic_adk`) from the first
turn on (the session is created before: the services read the clock differently); what ADK's own
compaction code reads from them (the summary event, and the scratch events it builds to weigh a
range) and what its contents builder reads (scratch events, never stored; with the plugin it
runs before the engine's in-flow summary exists) come from a second, separate sequence, so that
the stored events read the same values on both sides: the engine writes its summary with its own
clock and ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from google.adk.apps import compaction as adk_compaction
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context import (
    _compaction as adk_flow_compaction,
    _contents as adk_contents,
)
from google.adk.flows.llm_flows.context._fencing import OTHER_AGENT_CONTEXT_PREAMBLE
from google.adk.memory.in_memory_memory_service import InMemoryMemoryService
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.platform import time as adk_time, uuid as adk_uuid
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.session import Session
from google.genai import types

from contextengine.v1 import compaction_service_pb2 as kpb, config_pb2
from tests.fakes.gemini_server import default_summary_text

from .scripted import ScriptedLlm, Turn, build_agents, deterministic_adk, run_conversation

__all__ = [
    "APP",
    "Engine",
    "Outcome",
    "SummaryClock",
    "engine_app_config",
    "normalized",
    "run_dropins",
    "run_reference",
]

APP = "differential"
USER = "user"
SESSION = "session"
#: the Gemini model name the engine's summarizer asks the fake Gemini server for
SUMMARY_MODEL = "gemini-fake"
#: what the memory services are searched for after a conversation (the user's "hello <n>" turns)
MEMORY_QUERY = "hello"
#: how long a background compaction may take
SETTLE_SECONDS = 30.0


@dataclass
class Outcome:
    """What one side produced: every model request's contents and the session's events."""

    requests: list[list[dict[str, Any]]]
    events: list[Event]
    #: what the memory service finds for :data:`MEMORY_QUERY` once the session is added to it:
    #: (author, content as JSON), sorted (ADK returns them in insertion order, the engine best
    #: first)
    memories: list[tuple[str, str]]


class SummaryClock:
    """While ADK's compaction code runs, ADK's clock and ids come from their own sequence: the
    clock reads a little after the last time the run read (as "now" would), without moving the
    run's clock."""

    def __init__(self) -> None:
        self._depth = 0
        self._last = 0.0
        self._ticks = itertools.count(1)
        self._numbers = itertools.count(1)

    def time(self, main: Callable[[], float]) -> Callable[[], float]:
        def now() -> float:
            if self.active:
                return self._last + next(self._ticks) * 1e-3
            self._last = main()
            return self._last

        return now

    def uuid(self, main: Callable[[], str]) -> Callable[[], str]:
        return lambda: f"summary-{next(self._numbers)}" if self.active else main()

    @property
    def active(self) -> bool:
        return self._depth > 0

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1


@contextlib.contextmanager
def _compaction_on_its_own_sequence(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    side = SummaryClock()
    main_time = adk_time._time_provider_context_var.get()
    main_uuid = adk_uuid._id_provider_context_var.get()
    adk_time.set_time_provider(side.time(main_time))
    adk_uuid.set_id_provider(side.uuid(main_uuid))

    window = adk_compaction._run_compaction_for_sliding_window
    # imported by name into the flow module, where the model-call check looks it up
    threshold = adk_flow_compaction.__dict__["_run_compaction_for_token_threshold_config"]

    async def sliding_window(*args: Any, **kwargs: Any) -> AsyncGenerator[Event, None]:
        events = window(*args, **kwargs)
        while True:
            with side.running():
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    return
            yield event

    async def token_threshold(*args: Any, **kwargs: Any) -> Any:
        with side.running():
            return await threshold(*args, **kwargs)

    def scratch(build: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with side.running():
                return build(*args, **kwargs)

        return wrapped

    # ADK's contents builder makes scratch events (a summary or another agent's turn recast),
    # never stored; with the plugin it sees the engine's in-flow summary only afterwards
    for name in ("_get_contents", "_get_current_turn_contents"):
        monkeypatch.setattr(adk_contents, name, scratch(adk_contents.__dict__[name]))
    monkeypatch.setattr(adk_compaction, "_run_compaction_for_sliding_window", sliding_window)
    monkeypatch.setattr(
        adk_flow_compaction, "_run_compaction_for_token_threshold_config", token_threshold
    )
    try:
        yield
    finally:
        adk_time.set_time_provider(main_time)
        adk_uuid.set_id_provider(main_uuid)


@contextlib.contextmanager
def quiet_adk() -> Iterator[None]:
    """ADK warns about a multi-agent app without a cache config and about experimental
    compaction; neither is what these tests look at."""
    import warnings

    logger = logging.getLogger("google_adk")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
            yield
    finally:
        logger.setLevel(level)


class GeminiLikeSummaryLlm(BaseLlm):
    """ADK's summarizer model: answers what the fake Gemini server answers the engine's Gemini
    summarizer for the same prompt, text and usage (ADK keeps the usage on its summary)."""

    model: str = SUMMARY_MODEL

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        [content] = llm_request.contents
        [part] = content.parts or []
        prompt = part.text or ""
        tokens = max(1, len(prompt) // 4)  # tests/fakes/gemini_server.py's default answer
        yield LlmResponse(
            content=types.Content(
                role="model", parts=[types.Part(text=default_summary_text(prompt))]
            ),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=tokens,
                candidates_token_count=5,
                total_token_count=tokens + 5,
                prompt_tokens_details=[
                    types.ModalityTokenCount(modality=types.MediaModality.TEXT, token_count=tokens)
                ],
            ),
        )


def _adk_config(config: EventsCompactionConfig | None) -> EventsCompactionConfig | None:
    if config is None:
        return None
    llm = GeminiLikeSummaryLlm()
    summarizer = LlmEventSummarizer(llm=llm, prompt_template=None)
    return config.model_copy(update={"summarizer": summarizer})


async def run_reference(
    conversation: Sequence[Turn],
    compaction: EventsCompactionConfig | None,
    service: BaseSessionService,
    monkeypatch: pytest.MonkeyPatch,
) -> Outcome:
    """Plain ADK: ``service`` (one of ADK's), ADK's compaction with the fake summarizer."""
    model = ScriptedLlm()
    with quiet_adk():
        app = App(
            name=APP,
            root_agent=build_agents(model),
            events_compaction_config=_adk_config(compaction),
        )
        runner = Runner(app=app, session_service=service, memory_service=InMemoryMemoryService())
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        with deterministic_adk(), _compaction_on_its_own_sequence(monkeypatch):
            run = await run_conversation(
                runner, model, conversation, user_id=USER, session_id=SESSION
            )
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        memories = await _remembered(runner, session)
    return Outcome(run.requests, list(session.events), memories)


async def _remembered(runner: Runner, session: Session) -> list[tuple[str, str]]:
    memory = runner.memory_service
    assert memory is not None
    await memory.add_session_to_memory(session)
    found = await memory.search_memory(
        app_name=session.app_name, user_id=session.user_id, query=MEMORY_QUERY
    )
    return sorted(
        (m.author or "", json.dumps(m.content.model_dump(mode="json", exclude_none=True)))
        for m in found.memories
    )


def engine_app_config(
    compaction: EventsCompactionConfig | None, app_name: str = APP
) -> config_pb2.AppConfig:
    """The app's configuration in the engine: ADK's compaction settings, a Gemini summarizer
    on ADK's default prompt, and ADK's preamble for other agents' turns."""
    config = config_pb2.AppConfig(
        app_name=app_name,
        other_agent_preamble=OTHER_AGENT_CONTEXT_PREAMBLE,
        summarizer=config_pb2.SummarizerConfig(
            gemini=config_pb2.GeminiSummarizerConfig(
                model=SUMMARY_MODEL,
                prompt_template=LlmEventSummarizer._DEFAULT_PROMPT_TEMPLATE,
                max_attempts=1,
            )
        ),
    )
    if compaction is not None:
        target = config.events_compaction_config
        for name in (
            "compaction_interval",
            "overlap_size",
            "token_threshold",
            "event_retention_size",
        ):
            value = getattr(compaction, name)
            if value is not None:
                setattr(target, name, value)
    return config


@dataclass
class Engine:
    """The drop-ins' backend and the two engine calls the test needs besides them: the app's
    configuration and the compaction status (compaction runs in the background after
    ``EndInvocation``; the next turn must see its summary, as in ADK where it is synchronous)."""

    backend: Any
    configure: Callable[[config_pb2.AppConfig], Awaitable[object]]
    status: Callable[[str, str, str], Awaitable[kpb.GetCompactionStatusResponse]]

    async def settle(self, app: str, user: str, session: str) -> None:
        """Waits until no compaction runs for the session; fails on a summarizer failure."""
        deadline = asyncio.get_running_loop().time() + SETTLE_SECONDS
        while True:
            status = await self.status(app, user, session)
            assert not status.failures, f"the engine's summarizer failed: {status.last_error}"
            if not status.running:
                return
            assert asyncio.get_running_loop().time() < deadline, "compaction still running"
            await asyncio.sleep(0.01)


async def run_dropins(
    conversation: Sequence[Turn],
    compaction: EventsCompactionConfig | None,
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    *,
    app_name: str = APP,
) -> Outcome:
    """ADK with the three drop-ins on ``engine.backend``; the app's compaction configured in
    the engine (:func:`engine_app_config`), none in ADK."""
    from contextengine.adk import (
        ContextEngineMemoryService,
        ContextEnginePlugin,
        ContextEngineSessionService,
    )

    await engine.configure(engine_app_config(compaction, app_name))
    model = ScriptedLlm()
    service = ContextEngineSessionService(backend=engine.backend)
    with quiet_adk():
        app = App(
            name=app_name,
            root_agent=build_agents(model),
            plugins=[ContextEnginePlugin(backend=engine.backend)],
        )
        runner = Runner(
            app=app,
            session_service=service,
            memory_service=ContextEngineMemoryService(backend=engine.backend),
        )
        await service.create_session(app_name=app_name, user_id=USER, session_id=SESSION)

        async def settle() -> None:
            await engine.settle(app_name, USER, SESSION)

        with deterministic_adk(), _compaction_on_its_own_sequence(monkeypatch):
            run = await run_conversation(
                runner, model, conversation, user_id=USER, session_id=SESSION, after_turn=settle
            )
        session = await service.get_session(app_name=app_name, user_id=USER, session_id=SESSION)
        assert session is not None
        memories = await _remembered(runner, session)
    return Outcome(run.requests, list(session.events), memories)


#: what a summary event gets from whoever writes it (ADK's clock and ids, or the engine's)
_STAMPED = ("id", "invocation_id", "timestamp")


def normalized(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Each event as JSON; a summary event without its id, invocation id and timestamp.

    One representational difference is folded: ``long_running_tool_ids`` empty (ADK sets an
    empty set on every model event with function calls) and unset are one value in the proto
    (a repeated field has no presence), so the drop-in returns ``None`` for ADK's ``set()``.
    ADK itself treats both alike (``if event.long_running_tool_ids``)."""
    out = []
    for event in events:
        data = event.model_dump(mode="json", exclude_none=True)
        if data.get("long_running_tool_ids") == []:
            del data["long_running_tool_ids"]
        if event.actions.compaction is not None:
            for key in _STAMPED:
                data.pop(key, None)
        out.append(data)
    return out
