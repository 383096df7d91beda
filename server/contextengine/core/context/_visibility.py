"""Per-event visibility (section 6.3): which live events an agent may see at all.

An event is kept iff its isolation scope equals the viewer's exactly; it is not a user message
addressed to a workflow node (a user event without function responses whose ``node_info.path``
is set: the viewer is never a node here, so any path excludes it); it is not empty (section 1.4:
a summary is never empty, otherwise it needs a role and a visible part, unless it carries a
transcription); its branch is the viewer's branch or an ancestor of it (segment-wise); it is not
an internal framework / auth / confirmation exchange; and it is not a tool's progress message
published on a sub-branch ``<tool>@<call id>`` below the viewer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from contextengine.core.context._model import Item
from contextengine.v1 import event_pb2

__all__ = [
    "FRAMEWORK_CALL_NAMES",
    "branch_is_visible",
    "call_ids",
    "is_empty",
    "is_other_agent_reply",
    "is_tool_sub_branch",
    "is_visible",
    "same_scope",
    "visible_items",
]

#: Calls and responses with these names are the framework's own bookkeeping, never model context
#: (``adk_request_input`` is deliberately absent: ADK Python keeps it).
FRAMEWORK_CALL_NAMES = frozenset(
    {"adk_framework", "adk_request_credential", "adk_request_confirmation"}
)


def is_other_agent_reply(agent_name: str, item: Item) -> bool:
    """By author alone: in a live session everything not from the user; otherwise an author
    that is neither the viewer nor the user (never, when the viewer has no name)."""
    if item.live:
        return item.author != "user"
    return bool(agent_name) and item.author != agent_name and item.author != "user"


def call_ids(items: Iterable[Item]) -> set[str]:
    """The (non-empty) ids of every function call in ``items``."""
    return {call.id for item in items for call in item.calls if call.id}


def branch_is_visible(viewer_branch: str | None, event_branch: str | None) -> bool:
    """Equal branches, or the event's branch is an ancestor of the viewer's (by '.' segments:
    ``a.b`` sees ``a`` but not ``ab``). Either side empty: visible."""
    if not viewer_branch or not event_branch:
        return True
    # Segment lists are equal iff the strings are; the event's segments are a strict prefix of
    # the viewer's iff the viewer's string continues the event's with a '.'.
    return viewer_branch == event_branch or viewer_branch.startswith(event_branch + ".")


def is_tool_sub_branch(
    viewer_branch: str | None, event_branch: str | None, agent_name: str, ids: Collection[str]
) -> bool:
    """The event's branch lies strictly below the viewer's and one of the segments below the
    viewer's depth is ``<name>@<call id>`` for a recorded call id, with a name other than the
    viewer's own (an agent run as a tool lives on ``<agent>@<call id>`` and sees itself)."""
    if not event_branch:
        return False
    segments = event_branch.split(".")
    viewer = viewer_branch.split(".") if viewer_branch else []
    depth = len(viewer)
    if len(segments) <= depth or segments[:depth] != viewer:
        return False
    for segment in segments[depth:]:
        name, separator, run_id = segment.rpartition("@")
        if separator and run_id in ids and name != agent_name:
            return True
    return False


def is_empty(item: Item, source: event_pb2.Event, *, include_thoughts: bool) -> bool:
    """Section 1.4's emptiness: no content, no role, no parts or only invisible parts, and no
    transcription. Summaries are never empty."""
    if item.is_compaction:
        return False
    if item.shows_with_thoughts if include_thoughts else item.shows:
        return False
    return not (source.HasField("output_transcription") or source.HasField("input_transcription"))


def is_framework_event(item: Item) -> bool:
    return not FRAMEWORK_CALL_NAMES.isdisjoint([ref.name for ref in item.calls + item.responses])


def same_scope(source: event_pb2.Event, isolation_scope: str | None) -> bool:
    """The event's isolation scope equals ``isolation_scope`` (unset only equals None)."""
    if isolation_scope is None:
        return not source.HasField("isolation_scope")
    if isolation_scope:
        return source.isolation_scope == isolation_scope
    return source.HasField("isolation_scope") and not source.isolation_scope


def is_visible(
    item: Item,
    *,
    branch: str | None,
    isolation_scope: str | None,
    include_thoughts: bool,
    branch_memo: dict[str, bool] | None = None,
) -> bool:
    """Rules 1-5 of section 6.3 (the tool sub-branch rule is :func:`is_tool_sub_branch`)."""
    source = item.source
    assert source is not None, "visibility applies to input events"
    if not same_scope(source, isolation_scope):
        return False
    if item.author == "user" and not item.responses and source.node_info.path:
        return False
    if is_empty(item, source, include_thoughts=include_thoughts):
        return False
    # an unset branch and '' are the same here (visible from everywhere)
    event_branch = source.branch
    if event_branch and branch:
        if branch_memo is None:
            visible = branch_is_visible(branch, event_branch)
        else:
            cached = branch_memo.get(event_branch)
            if cached is None:
                cached = branch_memo[event_branch] = branch_is_visible(branch, event_branch)
            visible = cached
        if not visible:
            return False
    return not (item.calls or item.responses) or not is_framework_event(item)


def visible_items(
    items: Sequence[Item],
    *,
    agent_name: str,
    branch: str | None,
    isolation_scope: str | None,
    include_thoughts_from_other_agents: bool,
    ids: Collection[str],
) -> list[Item]:
    """The items an agent may see (all of section 6.3), in order. ``ids`` are the function-call
    ids of the whole live session (for the tool sub-branch rule)."""
    # rules 4 and 6 depend on the event's branch only: decided once per distinct branch
    branch_ok: dict[str, bool] = {}
    kept: list[Item] = []
    for item in items:
        source = item.source
        assert source is not None
        if not same_scope(source, isolation_scope):
            continue
        responses = item.responses
        if item.author == "user" and not responses and source.node_info.path:
            continue
        if not item.is_compaction:
            if include_thoughts_from_other_agents and is_other_agent_reply(agent_name, item):
                shown = item.shows_with_thoughts
            else:
                shown = item.shows
            if not shown and not (
                source.HasField("output_transcription") or source.HasField("input_transcription")
            ):
                continue
        event_branch = source.branch
        if event_branch:
            ok = branch_ok.get(event_branch)
            if ok is None:
                ok = branch_ok[event_branch] = branch_is_visible(
                    branch, event_branch
                ) and not is_tool_sub_branch(branch, event_branch, agent_name, ids)
            if not ok:
                continue
        if (item.calls or responses) and is_framework_event(item):
            continue
        kept.append(item)
    return kept
