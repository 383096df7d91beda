"""The two sides of the end-to-end differential: one scripted conversation through a real
google-adk ``Runner``.

* the reference (:func:`run_reference`): plain ADK, a session service of ADK's own
  (``InMemorySessionService`` or ``SqliteSessionService``), ADK's own compaction
  (``App.events_compaction_config``) with ``LlmEventSummarizer`` over :class:`FakeSummaryLlm`
  answering :func:`default_summary_text` of the prompt (what the fake Gemini server answers the
  engine's Gemini summarizer);
* the drop-ins (:func:`run_dropins`): the same agents with ``ContextEngineSessionService``,
  ``ContextEnginePlugin`` and ``ContextEngineMemoryService`` on one backend, no compaction in ADK;
  the app's compaction is configured in the engine (:func:`engine_app_config`), with a Gemini
  summarizer on ADK's default prompt template.

ADK's clock and ids are counters (:func:`~tests.adk.scripted.deterministic_adk`); what ADK's own
compaction code reads from them (the summary event, and the scratch events it builds to weigh a
range) comes from a second, separate sequence, so that the rest of the run reads the same values
on both sides: the engine writes its summary with its own clock and ids.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from google.adk.apps import compaction as adk_compaction
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context import _compaction as adk_flow_compaction
from google.adk.flows.llm_flows.context._fencing import OTHER_AGENT_CONTEXT_PREAMBLE
from google.adk.memory.in_memory_memory_service import InMemoryMemoryService
from google.adk.platform import time as adk_time, uuid as adk_uuid
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService

from contextengine.v1 import config_pb2
from tests.fakes.gemini_server import default_summary_text
from tests.parity.compaction_adk import FakeSummaryLlm

from .scripted import ScriptedLlm, Turn, build_agents, run_conversation

__all__ = [
    "APP",
    "Outcome",
    "SummaryClock",
    "engine_app_config",
    "normalized",
    "run_reference",
]

APP = "differential"
USER = "user"
SESSION = "session"
#: the Gemini model name the engine's summarizer asks the fake Gemini server for
SUMMARY_MODEL = "gemini-fake"


@dataclass
class Outcome:
    """What one side produced: every model request's contents and the session's events."""

    requests: list[list[dict[str, Any]]]
    events: list[Event]


class SummaryClock:
    """While ADK's compaction code runs, ADK's clock and ids come from their own sequence: the
    clock reads a little after the last time the run read (as "now" would), without moving the
    run's clock."""

    def __init__(self) -> None:
        self.active = False
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

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        self.active = True
        try:
            yield
        finally:
            self.active = False


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


def _adk_config(config: EventsCompactionConfig | None) -> EventsCompactionConfig | None:
    if config is None:
        return None
    llm = FakeSummaryLlm(reply=default_summary_text)
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
    with quiet_adk(), _compaction_on_its_own_sequence(monkeypatch):
        app = App(
            name=APP,
            root_agent=build_agents(model),
            events_compaction_config=_adk_config(compaction),
        )
        runner = Runner(app=app, session_service=service, memory_service=InMemoryMemoryService())
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        run = await run_conversation(runner, model, conversation, user_id=USER, session_id=SESSION)
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    return Outcome(run.requests, list(session.events))


def engine_app_config(compaction: EventsCompactionConfig | None) -> config_pb2.AppConfig:
    """The app's configuration in the engine: ADK's compaction settings, a Gemini summarizer
    on ADK's default prompt, and ADK's preamble for other agents' turns."""
    config = config_pb2.AppConfig(
        app_name=APP,
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


#: what a summary event gets from whoever writes it (ADK's clock and ids, or the engine's)
_STAMPED = ("id", "invocation_id", "timestamp")


def normalized(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Each event as JSON; a summary event without its id, invocation id and timestamp."""
    out = []
    for event in events:
        data = event.model_dump(mode="json", exclude_none=True)
        if event.actions.compaction is not None:
            for key in _STAMPED:
                data.pop(key, None)
        out.append(data)
    return out
