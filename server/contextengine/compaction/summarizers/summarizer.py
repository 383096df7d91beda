"""The one interface every summarizer implements, and the prompt template rules.

A summarizer turns a planned range into a summary content. It is given the events (the rolled-up
summary first, when there is one) and their rendering (``core.compaction.render_events``), and
returns the summary text as a content plus the model's token usage, or ``None`` when it has
nothing to say. It raises :class:`SummarizerError` (or anything else) on failure; the scheduler
then appends nothing, counts the failure and backs off. The engine gives the content the role
``model`` and builds the summary event itself, so summarizers never see ids, clocks or the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from contextengine.v1 import content_pb2, event_pb2

__all__ = [
    "DEFAULT_PROMPT_TEMPLATE",
    "Summarizer",
    "SummarizerError",
    "Summary",
    "SummaryInput",
    "fill_template",
]

#: The engine's own summarization prompt ("{conversation_history}" is replaced by the rendered
#: events). Parity tests configure ADK's text instead.
DEFAULT_PROMPT_TEMPLATE = (
    "You are condensing the earlier part of a conversation between a user and an AI agent so the"
    " agent can continue without the full transcript. The transcript below may itself begin with"
    " an earlier condensed summary.\n"
    "Write a compact summary that keeps: what the user asked for, in their own terms; the facts"
    " established and decisions taken; results obtained from tools; and anything still open or"
    " promised.\n"
    "Rules:\n"
    "- Begin with a line 'Conversation Language: <language>' naming the language the user writes"
    " in.\n"
    "- Name every tool the agent called, exactly as written in the transcript.\n"
    "- Keep names, numbers, identifiers and quoted values verbatim; do not invent anything.\n"
    "\n"
    "Transcript:\n"
    "{conversation_history}"
)


class SummarizerError(Exception):
    """The summarizer could not produce a usable summary (the message says why)."""


@dataclass(frozen=True)
class SummaryInput:
    #: the events to summarise, in order (a rolled-up summary first, authored "model")
    events: Sequence[event_pb2.Event]
    #: ``render_events(events)``
    conversation_history: str


@dataclass(frozen=True)
class Summary:
    #: the summary (the engine sets its role to "model")
    content: content_pb2.Content
    #: token usage of the call that wrote it, if the summarizer knows it
    usage_metadata: event_pb2.UsageMetadata | None = None


class Summarizer(Protocol):
    """Writes summaries. Implementations must be safe to call concurrently for different
    sessions (the scheduler never runs two compactions of one session at once)."""

    #: a short name for logs and status ("extractive", "gemini:gemini-2.5-flash", ...)
    name: str

    async def summarize(self, request: SummaryInput) -> Summary | None: ...


def fill_template(template: str, conversation_history: str) -> str:
    """``template.format(conversation_history=...)`` (ADK's ``str.format`` rule: other braces must
    be doubled). Raises :class:`SummarizerError` for a template ``str.format`` rejects."""
    try:
        return template.format(conversation_history=conversation_history)
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as error:
        raise SummarizerError(f"invalid prompt template: {error!r}") from error
