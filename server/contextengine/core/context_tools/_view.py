"""One caller's view of a session's log, as the context tools read it.

Built once per call (or per appended answer): the live events (rewinds applied), the live edits
(pins, hidden ranges), which summaries cover which events, which events the caller can see at
all (its isolation scope, its branch and the branches above it), where its current turn starts
and which turns before it are protected, and every event's size in tokens (``measure``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from contextengine.core.context import (
    EditedLog,
    Hidden,
    branch_is_visible,
    compaction_ranges,
    live_edits,
    live_indices,
    same_scope,
)
from contextengine.v1 import config_pb2, event_pb2

__all__ = ["Caller", "Limits", "SessionView"]

#: limits' defaults (ContextToolsConfig: 0 means the default)
DEFAULT_MAX_EDITS = 8
DEFAULT_MAX_HIDDEN_FRACTION = 0.9
DEFAULT_MIN_TOKENS_FREED = 100


@dataclass(frozen=True)
class Caller:
    """The agent that called a tool, and the invocation it called it in."""

    agent_name: str
    branch: str | None
    isolation_scope: str | None
    invocation_id: str


@dataclass(frozen=True)
class Limits:
    """A session's effective ``ContextToolsConfig`` (defaults filled in)."""

    enabled: bool = False
    max_edits_per_invocation: int = DEFAULT_MAX_EDITS
    max_hidden_fraction: float = DEFAULT_MAX_HIDDEN_FRACTION
    min_tokens_freed: int = DEFAULT_MIN_TOKENS_FREED
    token_budget: int = 0
    protected_turns: int = 0

    @classmethod
    def of(cls, config: config_pb2.ContextToolsConfig, compaction_budget: int = 0) -> Limits:
        """``config`` with its defaults; ``compaction_budget`` is the compaction configuration's
        token threshold (0: none), the budget when the configuration names none."""
        return cls(
            enabled=config.enabled,
            max_edits_per_invocation=config.max_edits_per_invocation or DEFAULT_MAX_EDITS,
            max_hidden_fraction=config.max_hidden_fraction or DEFAULT_MAX_HIDDEN_FRACTION,
            min_tokens_freed=config.min_tokens_freed or DEFAULT_MIN_TOKENS_FREED,
            token_budget=config.token_budget or compaction_budget,
            protected_turns=config.protected_turns,
        )


def _scope(event: event_pb2.Event) -> str | None:
    return event.isolation_scope if event.HasField("isolation_scope") else None


def _is_summary(event: event_pb2.Event) -> bool:
    return event.actions.HasField("compaction")


@dataclass
class SessionView:
    """The log as the tools of ``caller`` see it. ``log`` is the whole session, in sequence
    order (an appended answer's view is built over the events before it)."""

    log: Sequence[event_pb2.Event]
    caller: Caller
    measure: Callable[[event_pb2.Event], int]
    #: live events, in log order
    live: list[event_pb2.Event] = field(init=False)
    edits: EditedLog = field(init=False)
    #: sequence of a live raw event of the caller's scope -> the live summary that covers it
    covered_by: dict[int, int] = field(init=False)
    #: sequence where the current turn starts (every later event belongs to it)
    turn_start: int = field(init=False)
    _by_sequence: dict[int, event_pb2.Event] = field(init=False)
    _tokens: dict[int, int] = field(init=False, default_factory=dict)
    _spans: dict[int, tuple[int, int]] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        indices = live_indices(self.log)
        self.live = [self.log[index] for index in indices]
        self.edits = live_edits(self.log, indices)
        self._by_sequence = {event.sequence: event for event in self.live}
        scoped = [event for event in self.live if _scope(event) == self.caller.isolation_scope]
        self.covered_by = {}
        for compaction in compaction_ranges(scoped):
            summary = scoped[compaction.position]
            for event in scoped:
                if not _is_summary(event) and compaction.start <= event.timestamp <= compaction.end:
                    self.covered_by.setdefault(event.sequence, summary.sequence)
        self.turn_start = self._turn_start()

    # -- lookups -------------------------------------------------------------------------------

    def event(self, sequence: int) -> event_pb2.Event | None:
        """The live event at ``sequence``, if any."""
        return self._by_sequence.get(sequence)

    def covers(self, summary: int) -> tuple[int, int] | None:
        """The first and last sequence of the events the live summary at ``summary`` covers
        (None: it covers none, or is no surviving summary)."""
        if self._spans is None:
            spans: dict[int, tuple[int, int]] = {}
            for sequence, covering in self.covered_by.items():
                low, high = spans.get(covering, (sequence, sequence))
                spans[covering] = (min(low, sequence), max(high, sequence))
            self._spans = spans
        return self._spans.get(summary)

    def in_range(self, first: int, last: int) -> list[event_pb2.Event]:
        """The live events with sequences ``first``..``last``."""
        return [event for event in self.live if first <= event.sequence <= last]

    def visible(self, event: event_pb2.Event) -> bool:
        """Whether the caller can see ``event`` at all: its scope, its branch or one above."""
        if not same_scope(event, self.caller.isolation_scope):
            return False
        return branch_is_visible(self.caller.branch, event.branch or None)

    def pinned(self, event: event_pb2.Event) -> bool:
        return event.pinned or event.sequence in self.edits.pinned

    def hidden_at(self, sequence: int) -> Hidden | None:
        """The live hidden range that hides the event at ``sequence`` (a summary in a hidden
        range is not hidden)."""
        event = self._by_sequence.get(sequence)
        if event is not None and _is_summary(event):
            return None
        return self.edits.hidden_at(sequence)

    def is_summary(self, event: event_pb2.Event) -> bool:
        return _is_summary(event)

    def tokens(self, event: event_pb2.Event) -> int:
        tokens = self._tokens.get(event.sequence)
        if tokens is None:
            tokens = self._tokens[event.sequence] = self.measure(event)
        return tokens

    def scoped(self) -> list[event_pb2.Event]:
        """The live events the caller can see."""
        return [event for event in self.live if self.visible(event)]

    # -- turns ---------------------------------------------------------------------------------

    def _turn_start(self) -> int:
        """The first event of the caller's invocation; without one in the log, the latest user
        message (not a posted tool result) the caller can see; else just past the log."""
        invocation = self.caller.invocation_id
        if invocation:
            for event in self.live:
                if event.invocation_id == invocation:
                    return event.sequence
        for event in reversed(self.live):
            if event.author == "user" and self.visible(event) and _is_message(event):
                return event.sequence
        return (self.log[-1].sequence if self.log else 0) + 1

    def turns(self) -> list[tuple[int, int]]:
        """The caller's visible turns, as (first, last) sequences in log order: a turn starts at
        each new invocation id."""
        turns: list[tuple[int, int]] = []
        current = None
        for event in self.scoped():
            if _is_summary(event):
                continue  # summaries are appended between a turn's events
            if not turns or event.invocation_id != current:
                turns.append((event.sequence, event.sequence))
                current = event.invocation_id
            else:
                turns[-1] = (turns[-1][0], event.sequence)
        return turns

    def protected_from(self, protected_turns: int) -> int:
        """The first sequence no edit may touch: the current turn's start, moved back over
        ``protected_turns`` turns."""
        if protected_turns <= 0:
            return self.turn_start
        before = [turn for turn in self.turns() if turn[0] < self.turn_start]
        if not before:
            return self.turn_start
        return before[max(0, len(before) - protected_turns)][0]

    def edits_in_invocation(self) -> int:
        """Edits recorded by answers of the caller's invocation (live ones)."""
        invocation = self.caller.invocation_id
        if not invocation:
            return 0
        return sum(
            count
            for sequence, count in self.edits.recorded.items()
            if (event := self._by_sequence.get(sequence)) is not None
            and event.invocation_id == invocation
        )


def _is_message(event: event_pb2.Event) -> bool:
    parts = event.content.parts
    return bool(parts) and not any(part.HasField("function_response") for part in parts)
