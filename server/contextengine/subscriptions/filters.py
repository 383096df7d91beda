"""What a subscription is limited to: event kinds, authors and branches. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from contextengine.v1 import content_pb2, event_pb2, subscription_service_pb2 as pb

#: every kind a filter may name (``EVENT_KIND_UNSPECIFIED`` is never one)
KNOWN_KINDS: frozenset[int] = frozenset(
    value for value in pb.EventKind.values() if value != pb.EVENT_KIND_UNSPECIFIED
)


def _is_message_part(part: content_pb2.Part) -> bool:
    """Text, media or code: anything but calls and responses."""
    return (
        part.HasField("text")
        or part.HasField("inline_data")
        or part.HasField("file_data")
        or part.HasField("executable_code")
        or part.HasField("code_execution_result")
        or part.HasField("audio_transcription")
    )


def event_kinds(event: event_pb2.Event) -> frozenset[int]:
    """The kinds of ``event`` (an event can be of several kinds, or of none)."""
    kinds: set[int] = set()
    if event.HasField("content"):
        for part in event.content.parts:
            if _is_message_part(part):
                kinds.add(pb.EVENT_KIND_MESSAGE)
            if part.HasField("function_call"):
                kinds.add(pb.EVENT_KIND_TOOL_CALL)
            if part.HasField("function_response"):
                kinds.add(pb.EVENT_KIND_TOOL_RESPONSE)
    # Transcriptions are folded into text content by ADK: they are messages too.
    if event.HasField("input_transcription") or event.HasField("output_transcription"):
        kinds.add(pb.EVENT_KIND_MESSAGE)
    if event.HasField("actions"):
        actions = event.actions
        if actions.state_delta.fields:
            kinds.add(pb.EVENT_KIND_STATE_CHANGE)
        if actions.HasField("compaction"):
            kinds.add(pb.EVENT_KIND_COMPACTION)
        if actions.HasField("rewind_before_invocation_id"):
            kinds.add(pb.EVENT_KIND_REWIND)
    return frozenset(kinds)


@dataclass(frozen=True)
class EventMatcher:
    """Empty sets mean "all". An event passes when it passes every non-empty set."""

    authors: frozenset[str] = frozenset()
    #: exact branch names; "" stands for events without a branch
    branches: frozenset[str] = frozenset()
    kinds: frozenset[int] = frozenset()

    @classmethod
    def of(
        cls, authors: Iterable[str] = (), branches: Iterable[str] = (), kinds: Iterable[int] = ()
    ) -> EventMatcher:
        return cls(frozenset(authors), frozenset(branches), frozenset(kinds))

    @property
    def is_everything(self) -> bool:
        return not (self.authors or self.branches or self.kinds)

    def matches(self, event: event_pb2.Event) -> bool:
        if self.authors and event.author not in self.authors:
            return False
        if self.branches and event.branch not in self.branches:
            return False
        return not self.kinds or not self.kinds.isdisjoint(event_kinds(event))


def unknown_kinds(kinds: Iterable[int]) -> list[int]:
    """The values of ``kinds`` that name no kind (including ``EVENT_KIND_UNSPECIFIED``)."""
    return [kind for kind in kinds if kind not in KNOWN_KINDS]
