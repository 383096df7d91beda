"""The pipeline's working representation of an event: the facts every step reads, read once.

Each input event is scanned once into an :class:`Item`: a few metadata fields, and one
:class:`PartView` per part telling whether the part is a function call or response (id and
name), its text and whether it is a thought. The later steps look at these facts rather than at
the protobuf (reading a protobuf field costs far more than reading a Python attribute), and
"modifying" an event (dropping parts, merging responses) means building a new ``Item`` over
another tuple of the same ``PartView`` objects: the input protos are never copied or mutated.
Contents are only built (or shared, when unchanged) at the very end, by ``_emit``.

Items compare and hash by identity, which is how ADK matches events across steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from contextengine.v1 import content_pb2, event_pb2

#: Prefix of the function-call ids ADK generates for calls that came without one.
ADK_CALL_ID_PREFIX = "adk-"


class FnRef(NamedTuple):
    """A function call or response as pairing sees it. ``id`` is None when the field is unset,
    which ADK distinguishes from ``''`` when it keys dictionaries by id."""

    id: str | None
    name: str | None


@dataclass(slots=True, eq=False)
class PartView:
    """One part of a content, with the facts the pipeline needs about it. Never modified."""

    part: content_pb2.Part
    call: FnRef | None
    response: FnRef | None
    #: the text ('' when unset)
    text: str
    thought: bool
    #: visible in a context (section 1.4) when thoughts are hidden / when they are shown
    visible: bool
    visible_with_thoughts: bool
    #: the call or response id starts with 'adk-' (stripped on emit unless preserved)
    adk_id: bool


@dataclass(slots=True, eq=False)
class Item:
    """An event on its way through the pipeline (an input event, or one the pipeline made).

    Facts that few steps need are read from the protos on demand: ``source`` is the input event
    the item stands for (None for an event the pipeline made), ``actions_of`` the event whose
    ``actions`` and ``invocation_id`` the item carries (a materialised summary carries its
    summary event's)."""

    source: event_pb2.Event | None
    actions_of: event_pb2.Event | None
    author: str
    timestamp: float
    #: the event has a content (possibly with no role or no parts)
    has_content: bool
    #: the content's role, None when unset
    role: str | None
    parts: tuple[PartView, ...]
    #: a content message holding exactly ``role`` and ``parts``, when one exists (the input
    #: event's own content, a summary's content); None when ``_emit`` has to build one
    content: content_pb2.Content | None
    calls: tuple[FnRef, ...]
    responses: tuple[FnRef, ...]
    #: ``actions.compaction`` is set (summary events, also once materialised)
    is_compaction: bool
    #: read from the input event, for the visibility step: the content has a role and a part
    #: visible with thoughts hidden / shown (section 1.4)
    shows: bool = True
    shows_with_thoughts: bool = True
    #: ``actions.rewind_before_invocation_id`` of the input event
    rewind_target: str = ""

    @property
    def invocation_id(self) -> str:
        return self.actions_of.invocation_id if self.actions_of is not None else ""

    @property
    def has_hitl_request(self) -> bool:
        """The event carries auth or tool-confirmation requests."""
        if self.actions_of is None:
            return False
        actions = self.actions_of.actions
        return bool(
            len(actions.requested_tool_confirmations) or len(actions.requested_auth_configs)
        )

    @property
    def long_running_tool_ids(self) -> Sequence[str]:
        return self.source.long_running_tool_ids if self.source is not None else ()

    @property
    def live(self) -> bool:
        """``live_session_id`` is set and non-empty."""
        return bool(self.source.live_session_id) if self.source is not None else False

    @property
    def input_text(self) -> str:
        """``input_transcription.text`` of the input event ('' when unset)."""
        return self.source.input_transcription.text if self.source is not None else ""

    @property
    def output_text(self) -> str:
        return self.source.output_transcription.text if self.source is not None else ""

    def with_parts(self, parts: Sequence[PartView]) -> Item:
        """A copy of this item whose content holds ``parts`` instead (ADK's deep copy + edit)."""
        return dataclasses.replace(
            self,
            parts=tuple(parts),
            content=None,
            calls=calls_of(parts),
            responses=responses_of(parts),
        )


def part_view(part: content_pb2.Part) -> PartView:
    text = part.text
    if part.HasField("function_call"):
        fc = part.function_call
        call_id: str | None = fc.id
        if not call_id and not fc.HasField("id"):
            call_id = None
        name: str | None = fc.name
        if not name and not fc.HasField("name"):
            name = None
        adk_id = call_id is not None and call_id.startswith(ADK_CALL_ID_PREFIX)
        return PartView(part, FnRef(call_id, name), None, text, part.thought, True, True, adk_id)
    if part.HasField("function_response"):
        fr = part.function_response
        response_id: str | None = fr.id
        if not response_id and not fr.HasField("id"):
            response_id = None
        name = fr.name
        if not name and not fr.HasField("name"):
            name = None
        adk_id = response_id is not None and response_id.startswith(ADK_CALL_ID_PREFIX)
        return PartView(
            part, None, FnRef(response_id, name), text, part.thought, True, True, adk_id
        )
    thought = part.thought
    if text and not thought:  # the common case: plain text, visible whatever else it has
        return PartView(part, None, None, text, False, True, True, False)
    if part.thought_signature or part.HasField("tool_call") or part.HasField("tool_response"):
        return PartView(part, None, None, text, thought, True, True, False)
    with_thoughts = bool(
        text
        or part.HasField("inline_data")
        or part.HasField("file_data")
        or part.HasField("executable_code")
        or part.HasField("code_execution_result")
    )
    return PartView(
        part, None, None, text, thought, with_thoughts and not thought, with_thoughts, False
    )


def part_views(parts: Iterable[content_pb2.Part]) -> tuple[PartView, ...]:
    return tuple([part_view(part) for part in parts])


def content_role(content: content_pb2.Content) -> str | None:
    role = content.role
    if not role and not content.HasField("role"):
        return None
    return role


def item_from_event(event: event_pb2.Event) -> Item:
    actions = event.actions
    if not event.HasField("content"):
        return Item(
            event, event, event.author, event.timestamp, False, None, (), None, (), (),
            actions.HasField("compaction"), False, False, actions.rewind_before_invocation_id,
        )  # fmt: skip
    content = event.content
    role: str | None = content.role
    if not role and not content.HasField("role"):
        role = None
    views: list[PartView] = []
    calls: tuple[FnRef, ...] = ()
    responses: tuple[FnRef, ...] = ()
    shows = shows_with_thoughts = False
    for part in content.parts:
        view = part_view(part)
        views.append(view)
        if view.call is not None:
            calls += (view.call,)
        elif view.response is not None:
            responses += (view.response,)
        if view.visible_with_thoughts:
            shows_with_thoughts = True
            if view.visible:
                shows = True
    if not role:
        shows = shows_with_thoughts = False
    return Item(
        event, event, event.author, event.timestamp, True, role, tuple(views), content, calls,
        responses, actions.HasField("compaction"), shows, shows_with_thoughts,
        actions.rewind_before_invocation_id,
    )  # fmt: skip


def synthetic_item(
    *,
    author: str,
    timestamp: float,
    role: str | None,
    parts: Sequence[PartView],
    content: content_pb2.Content | None = None,
    actions_of: event_pb2.Event | None = None,
    is_compaction: bool = False,
) -> Item:
    """An event the pipeline makes (a materialised summary, a framed other-agent turn, ...)."""
    return Item(
        None,
        actions_of,
        author,
        timestamp,
        True,
        role,
        tuple(parts),
        content,
        calls_of(parts),
        responses_of(parts),
        is_compaction,
    )


def text_part(text: str) -> PartView:
    """A new part holding ``text`` (what ``part_view`` would say about it, without asking)."""
    return PartView(
        content_pb2.Part(text=text), None, None, text, False, bool(text), bool(text), False
    )


def calls_of(parts: Iterable[PartView]) -> tuple[FnRef, ...]:
    return tuple([view.call for view in parts if view.call is not None])


def responses_of(parts: Iterable[PartView]) -> tuple[FnRef, ...]:
    return tuple([view.response for view in parts if view.response is not None])
