"""The compactor's value types and the interfaces it is given.

Kept apart from the modules that do the work so that the prompt-cache policy (which implements
:class:`CompactionPolicy`) and the engine can name them without importing the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from contextengine.compaction.summarizers.summarizer import Summarizer
from contextengine.core.compaction import CompactionPlan
from contextengine.core.context import ContextOptions
from contextengine.runtime.event_cache import SessionLog
from contextengine.store import SessionKey
from contextengine.v1 import config_pb2, event_pb2

__all__ = [
    "AFTER_INVOCATION",
    "CLIENT_SUMMARIZER",
    "DEFERRED",
    "NOTHING_TO_COMPACT",
    "NOT_CONFIGURED",
    "PLAN_STALE",
    "SUMMARIZER_FAILED",
    "SUMMARIZER_RETURNED_NOTHING",
    "CompactionPolicy",
    "ContentsChars",
    "ContextCheck",
    "Outcome",
    "SessionStatus",
    "SummarizerFactory",
    "View",
]

#: The trigger of ADK's post-invocation pass (token threshold, then sliding window).
AFTER_INVOCATION = "after_invocation"

#: Why nothing was appended (besides the planners' reasons).
CLIENT_SUMMARIZER = "client_summarizer"
SUMMARIZER_FAILED = "summarizer_failed"
SUMMARIZER_RETURNED_NOTHING = "summarizer_returned_nothing"
PLAN_STALE = "plan_stale"
NOT_CONFIGURED = "not_configured"
NOTHING_TO_COMPACT = "nothing_to_compact"
DEFERRED = "deferred"

#: The characters of the contents the options give over the log (see ``Compactor.before_context``).
ContentsChars = Callable[[SessionLog, ContextOptions], int]

#: Builds the summarizer for an app's summarizer configuration (None: client summaries only).
SummarizerFactory = Callable[[config_pb2.SummarizerConfig | None], Summarizer | None]


@dataclass(frozen=True)
class View:
    """Whose prompt the token threshold is measured for."""

    agent_name: str = ""
    branch: str | None = None
    isolation_scope: str | None = None


@dataclass(frozen=True)
class Outcome:
    #: the appended summary event (with its sequence), or None
    summary: event_pb2.Event | None
    #: why nothing was appended ('' when a summary was)
    skipped: str = ""


@dataclass(frozen=True)
class ContextCheck:
    """What the token check before a context did."""

    #: the summary it appended (None: none)
    summary: event_pb2.Event | None = None
    #: the log it read, when it went no further (no compaction due): the context can be built
    #: from it instead of reading the log again
    log: SessionLog | None = None


@dataclass(frozen=True)
class SessionStatus:
    running: bool
    attempts: int
    summaries: int
    failures: int
    last_error: str
    retry_after: float


class CompactionPolicy(Protocol):
    """Adjusts the automatic passes (the prompt-cache-aware policy,
    ``contextengine.prompt_cache.compaction_policy``): the token check before a context and the
    post-invocation pass, also when ``Compact`` runs the latter (its default trigger). ``Compact``
    with an explicit sliding-window or token-threshold trigger is not reviewed."""

    async def due(self, key: SessionKey, view: View, log: list[event_pb2.Event], due: bool) -> bool:
        """Whether the token check before a context runs (``due``: ADK's answer)."""
        ...

    async def review(
        self, key: SessionKey, view: View, log: list[event_pb2.Event], plan: CompactionPlan
    ) -> CompactionPlan | None:
        """The plan to run instead of ``plan`` (None: defer); ``plan.trigger`` made it."""
        ...
