"""The reference side of the compaction parity tests: google-adk 2.13's own compaction code, run
for real on ADK events.

* :func:`run_post_invocation` is what ``Runner`` does after an invocation:
  ``google.adk.apps.compaction._run_compaction_for_sliding_window(app, session, session_service)``
  (token threshold first, then the sliding window), the yielded event appended through the
  session service as the runner does;
* :func:`run_token_threshold` is the in-flow check before an agent's model call (ADK's
  ``CompactionRequestProcessor``):
  ``_run_compaction_for_token_threshold_config(...)`` with the agent's name, branch and isolation
  scope; ADK appends its summary itself.

The summarizer is ADK's ``LlmEventSummarizer`` with its default prompt template, over
:class:`FakeSummaryLlm`, which records every prompt and answers ``reply(prompt)``. What the two
sides cannot agree on by themselves is made deterministic with a :class:`Stamp`: the summary
event's timestamp (ADK: "now"), id and invocation id are overwritten just before it is appended.
Nothing here is copied from ADK; it only calls ADK.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.compaction import (
    _run_compaction_for_sliding_window,
    _run_compaction_for_token_threshold_config,
)
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.genai import types
from pydantic import PrivateAttr

__all__ = [
    "AdkCompaction",
    "FakeSummaryLlm",
    "Reply",
    "Stamp",
    "adk_config",
    "run_post_invocation",
    "run_token_threshold",
]

#: What the fake summarizer model answers for a prompt.
Reply = Callable[[str], str]

_APP_NAME = "compaction_parity"


@contextlib.contextmanager
def _experimental_warnings_ignored() -> Iterator[None]:
    """ADK warns (once per process) that compaction is experimental."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
        yield


def adk_config(
    *,
    compaction_interval: int | None = None,
    overlap_size: int | None = None,
    token_threshold: int | None = None,
    event_retention_size: int | None = None,
) -> EventsCompactionConfig:
    """ADK's ``EventsCompactionConfig`` (validated by ADK; no summarizer yet)."""
    with _experimental_warnings_ignored():
        return EventsCompactionConfig(
            compaction_interval=compaction_interval,
            overlap_size=overlap_size,
            token_threshold=token_threshold,
            event_retention_size=event_retention_size,
        )


@dataclass(frozen=True)
class Stamp:
    """What a summary event gets instead of ADK's clock and fresh uuids."""

    timestamp: float
    event_id: str
    invocation_id: str

    def apply(self, event: Event) -> None:
        event.timestamp = self.timestamp
        event.id = self.event_id
        event.invocation_id = self.invocation_id


class FakeSummaryLlm(BaseLlm):
    """A model that answers every request with ``reply(prompt)`` (the text of the request's
    only part) and records the prompts."""

    model: str = "fake-summarizer"
    reply: Reply
    _prompts: list[str] = PrivateAttr(default_factory=list)

    @property
    def prompts(self) -> list[str]:
        return self._prompts

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = llm_request.contents
        assert len(contents) == 1, contents
        parts = contents[0].parts or []
        assert len(parts) == 1, parts
        prompt = parts[0].text or ""
        self._prompts.append(prompt)
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=self.reply(prompt))])
        )


class AppendOnlySessionService(BaseSessionService):
    """Appends to the session object given (the base class's behaviour); nothing else is used by
    compaction, so the other methods are never called."""

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        raise NotImplementedError

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        raise NotImplementedError

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        raise NotImplementedError

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        raise NotImplementedError


class _StampingSessionService(AppendOnlySessionService):
    """Appends to the given session object only (as the base class does), stamping the event
    first. The other methods are never called by compaction."""

    def __init__(self, stamp: Stamp) -> None:
        self._stamp = stamp

    async def append_event(self, session: Session, event: Event) -> Event:
        self._stamp.apply(event)
        return await super().append_event(session=session, event=event)


@dataclass(frozen=True)
class AdkCompaction:
    """What one ADK compaction call did."""

    #: the prompts the summarizer model received (none, or one)
    prompts: tuple[str, ...]
    #: the summary event appended to the session (stamped), if any
    event: Event | None


def _setup(
    events: Sequence[Event], config: EventsCompactionConfig, reply: Reply, agent_name: str
) -> tuple[FakeSummaryLlm, EventsCompactionConfig, LlmAgent, Session]:
    llm = FakeSummaryLlm(reply=reply)
    with _experimental_warnings_ignored():
        summarizer = LlmEventSummarizer(llm=llm, prompt_template=None)
    # a copy: ADK would otherwise keep the summarizer on the caller's config
    configured = config.model_copy(update={"summarizer": summarizer})
    agent = LlmAgent(name=agent_name, model=llm)
    session = Session(id="session", app_name=_APP_NAME, user_id="user", events=list(events))
    return llm, configured, agent, session


def _outcome(llm: FakeSummaryLlm, session: Session, before: int) -> AdkCompaction:
    appended = session.events[before:]
    assert len(appended) <= 1, appended
    return AdkCompaction(tuple(llm.prompts), appended[0] if appended else None)


async def run_post_invocation(
    events: Sequence[Event], config: EventsCompactionConfig, *, reply: Reply, stamp: Stamp
) -> AdkCompaction:
    """ADK's post-invocation compaction of a session holding ``events`` (not modified; the
    summary, if any, is returned, not added to ``events``)."""
    llm, configured, agent, session = _setup(events, config, reply, "root")
    with _experimental_warnings_ignored():
        app = App(name=_APP_NAME, root_agent=agent, events_compaction_config=configured)
    service = _StampingSessionService(stamp)
    before = len(session.events)
    async for event in _run_compaction_for_sliding_window(app, session, service):
        # what the runner does with the yielded event
        await service.append_event(session=session, event=event)
    return _outcome(llm, session, before)


async def run_token_threshold(
    events: Sequence[Event],
    config: EventsCompactionConfig,
    *,
    agent_name: str,
    branch: str | None,
    isolation_scope: str | None,
    reply: Reply,
    stamp: Stamp,
) -> AdkCompaction:
    """ADK's in-flow token-threshold compaction before a model call of ``agent_name`` (an
    identifier) running on ``branch`` in ``isolation_scope``."""
    llm, configured, agent, session = _setup(events, config, reply, agent_name)
    service = _StampingSessionService(stamp)
    before = len(session.events)
    await _run_compaction_for_token_threshold_config(
        config=configured,
        session=session,
        session_service=service,
        agent=agent,
        agent_name=agent_name,
        current_branch=branch,
        isolation_scope=isolation_scope,
    )
    return _outcome(llm, session, before)
