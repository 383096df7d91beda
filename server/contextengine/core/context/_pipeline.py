"""The pipeline: events in, the model contents ADK 2.13 would send out.

``IncludeContents.DEFAULT`` is ADK's ``_get_contents`` (the whole history) and
``IncludeContents.NONE`` its ``_get_current_turn_contents`` (the same pipeline over the events
from the start of the current turn). Steps, in ADK's order:

rewinds (6.1) -> visibility (6.3) -> compaction masking + recovery of compacted calls (6.4,
only when a visible summary exists) -> transcription folding (6.5) -> other-agent framing (6.6)
-> call/response repair (6.7) -> emit, plus the isolated agent's first turn (6.8). Before them,
the model's own edits (context tools: hidden ranges shown as stubs; ``_edits``), which a log
without them does not have.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from contextengine.core.context._compaction_view import mask_compacted, recover_compacted_calls
from contextengine.core.context._current_turn import current_turn_start
from contextengine.core.context._edits import apply_context_edits
from contextengine.core.context._emit import emit_contents, task_input_content
from contextengine.core.context._fencing import fence_other_agents
from contextengine.core.context._model import Item, item_from_event
from contextengine.core.context._options import ContextOptions, IncludeContents
from contextengine.core.context._rearrange import (
    drop_orphaned_calls,
    drop_orphaned_responses,
    rearrange_async_history,
)
from contextengine.core.context._rearrange_latest import rearrange_latest_response_moved
from contextengine.core.context._rewind import live_indices
from contextengine.core.context._transcription import fold_transcriptions_open
from contextengine.core.context._visibility import call_ids, visible_items
from contextengine.v1 import content_pb2, event_pb2

__all__ = ["build_contents", "build_contents_tail", "history_contents"]


def build_contents(
    events: Sequence[event_pb2.Event],
    options: ContextOptions,
    *,
    prepend_scope_content: bool = True,
    items: Sequence[Item] | None = None,
) -> list[content_pb2.Content]:
    """The contents of the model request for ``options``' agent, from the session's events in
    log order. ``items``, when given, are ``item_from_event`` of each event, computed earlier
    (items are never modified, so callers may cache them per event). Pure; ``events`` are not modified. The returned messages may be the input events'
    own ``content`` messages (or a summary's ``compacted_content``): treat them as read-only.

    ``IncludeContents.NONE`` never shows other agents' thoughts (as ADK's contents processor,
    whatever ``include_thoughts_from_other_agents`` says). ``prepend_scope_content=False`` leaves
    out the isolated agent's first user turn (for callers that extend an earlier result)."""
    return build_contents_tail(
        events, options, prepend_scope_content=prepend_scope_content, items=items
    )[0]


def build_contents_tail(
    events: Sequence[event_pb2.Event],
    options: ContextOptions,
    *,
    prepend_scope_content: bool = True,
    items: Sequence[Item] | None = None,
) -> tuple[list[content_pb2.Content], bool]:
    """:func:`build_contents`, and whether its tail is *open*: whether an event appended after
    ``events`` could change how the end of these contents is rendered, not only add to them.
    That is decided on the events ADK's rules actually see at the end of the history (after
    visibility, compaction masking and re-sorting, framing, orphan removal), not on the last
    event of the log: a transcription run not yet ended, or a trailing response the
    latest-response rule moved. ``IncludeContents.NONE`` is always open (the current turn's
    start moves)."""
    edited = apply_context_edits(events, pins=False)
    if edited is not events:
        known = {id(event): item for event, item in zip(events, items or (), strict=False)}
        events = edited
        items = [known.get(id(event)) or item_from_event(event) for event in events]
    if options.include_contents is IncludeContents.NONE:
        if options.include_thoughts_from_other_agents:
            options = dataclasses.replace(options, include_thoughts_from_other_agents=False)
        cache: list[Item | None] = list(items) if items is not None else [None] * len(events)

        def item_at(index: int) -> Item:
            item = cache[index]
            if item is None:
                item = cache[index] = item_from_event(events[index])
            return item

        start = current_turn_start(events, options, item_at)
        if start is None:
            return [], True
        contents = history_contents(
            events[start:],
            options,
            items=[item_at(index) for index in range(start, len(events))],
            prepend_scope_content=prepend_scope_content,
        )
        return contents, True
    return _history(events, options, items=items, prepend_scope_content=prepend_scope_content)


def history_contents(
    events: Sequence[event_pb2.Event],
    options: ContextOptions,
    *,
    items: Sequence[Item] | None = None,
    prepend_scope_content: bool = True,
) -> list[content_pb2.Content]:
    """ADK's ``_get_contents`` over ``events``; ``items``, when given, are
    ``item_from_event`` of each event (to avoid reading the events twice)."""
    return _history(events, options, items=items, prepend_scope_content=prepend_scope_content)[0]


def _history(
    events: Sequence[event_pb2.Event],
    options: ContextOptions,
    *,
    items: Sequence[Item] | None,
    prepend_scope_content: bool,
) -> tuple[list[content_pb2.Content], bool]:
    if items is None:
        items = [item_from_event(event) for event in events]
    live = live_indices(events, [item.rewind_target for item in items])
    live_items = items if len(live) == len(items) else [items[index] for index in live]
    visible = visible_items(
        live_items,
        agent_name=options.agent_name,
        branch=options.branch,
        isolation_scope=options.isolation_scope,
        include_thoughts_from_other_agents=options.include_thoughts_from_other_agents,
        ids=call_ids(live_items),
    )
    if any(item.is_compaction for item in visible):
        processed = recover_compacted_calls(mask_compacted(visible, options.agent_name), visible)
    else:
        processed = visible
    folded, fold_open = fold_transcriptions_open(processed)
    framed = fence_other_agents(
        folded,
        agent_name=options.agent_name,
        include_thoughts=options.include_thoughts_from_other_agents,
        preamble=options.other_agent_preamble,
    )
    paired, moved = rearrange_latest_response_moved(
        drop_orphaned_responses(framed), drop_orphans=False
    )
    repaired = drop_orphaned_calls(rearrange_async_history(paired))
    contents = emit_contents(
        repaired, preserve_function_call_ids=options.preserve_function_call_ids
    )
    if prepend_scope_content and options.isolation_scope is not None:
        first = task_input_content(events, options.isolation_scope, options.user_content)
        if first is not None:
            contents.insert(0, first)
    return contents, fold_open or moved
