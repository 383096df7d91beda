"""Function call/response repair (section 6.7), run in this order by the pipeline:

1. :func:`drop_orphaned_responses` - a response part survives only if an earlier event made a
   call with its id (an id-less response: an earlier id-less call of the same name);
2. ``_rearrange_latest.rearrange_latest_response`` - a trailing response event is moved (merged)
   right after the call(s) it answers;
3. :func:`rearrange_async_history` - every call is followed by its last response (several
   responding events merged), and model text replies between two progress updates of the same
   call are dropped;
4. :func:`drop_orphaned_calls` - calls with an id that nobody answered and that are not
   long-running disappear.

Modified events are new items; events left without parts disappear.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import pairwise

from contextengine.core.context._model import Item, PartView

__all__ = [
    "drop_orphaned_calls",
    "drop_orphaned_responses",
    "merge_responses",
    "rearrange_async_history",
]


def drop_orphaned_responses(items: Sequence[Item]) -> list[Item]:
    if not any(item.responses for item in items):
        return list(items)
    seen_ids: set[str] = set()
    seen_idless_names: set[str] = set()
    result: list[Item] = []
    for item in items:
        if item.parts and item.responses:
            kept = [
                view
                for view in item.parts
                if view.response is None
                or (
                    view.response.id in seen_ids
                    if view.response.id
                    else bool(view.response.name) and view.response.name in seen_idless_names
                )
            ]
            if kept:
                result.append(item if len(kept) == len(item.parts) else item.with_parts(kept))
        else:
            result.append(item)
        for call in item.calls:
            if call.id:
                seen_ids.add(call.id)
            elif call.name:
                seen_idless_names.add(call.name)
    return result


def merge_responses(items: Sequence[Item]) -> Item:
    """One response event from several (oldest first): the first event's metadata; a later
    response replaces the part answering the same id (None and '' are different ids) or is
    appended; other parts are appended."""
    first = items[0]
    if not first.has_content or not first.parts:
        raise ValueError("There should be at least one function_response part.")
    parts = list(first.parts)
    position: dict[str | None, int] = {}
    for index, view in enumerate(parts):
        if view.response is not None:
            position[view.response.id] = index
    for item in items[1:]:
        if not item.has_content or not item.parts:
            raise ValueError("There should be at least one function_response part.")
        for view in item.parts:
            if view.response is None:
                parts.append(view)
                continue
            response_id = view.response.id
            if response_id in position:
                parts[position[response_id]] = view
            else:
                parts.append(view)
                position[response_id] = len(parts) - 1
    return first.with_parts(parts)


def _is_stale_text_reply(item: Item, invocation_id: str) -> bool:
    return (
        item.invocation_id == invocation_id
        and item.author != "user"
        and item.has_content
        and item.role == "model"
        and not item.calls
        and not item.is_compaction
        and any(view.text for view in item.parts)
    )


def rearrange_async_history(items: Sequence[Item]) -> list[Item]:
    # Calls are indexed only from events without responses; a response belongs to the nearest
    # call event before it that carries its id (the first one when none precedes it).
    call_positions: dict[str | None, list[int]] = {}
    for index, item in enumerate(items):
        if item.responses:
            continue
        for call in item.calls:
            call_positions.setdefault(call.id, []).append(index)

    responses_of: dict[tuple[str | None, int], list[int]] = {}
    has_responses = False
    for index, item in enumerate(items):
        for response in item.responses:
            has_responses = True
            positions = call_positions.get(response.id)
            if not positions:
                continue
            owner = positions[max(bisect_left(positions, index) - 1, 0)]
            responses_of.setdefault((response.id, owner), []).append(index)
    if not has_responses:
        return list(items)

    stale: set[int] = set()
    for positions in responses_of.values():
        for current, following in pairwise(positions):
            earlier, later = items[current], items[following]
            if earlier.invocation_id != later.invocation_id or earlier.author != later.author:
                continue
            if earlier.has_hitl_request:
                continue
            gap = range(current + 1, following)
            if gap and all(
                _is_stale_text_reply(items[index], earlier.invocation_id) for index in gap
            ):
                stale.update(gap)

    result: list[Item] = []
    for index, item in enumerate(items):
        if index in stale or item.responses:
            continue
        if not item.calls:
            result.append(item)
            continue
        answering: set[int] = set()
        for call in item.calls:
            positions = responses_of.get((call.id, index))
            if positions:
                answering.add(positions[-1])
        result.append(item)
        if len(answering) == 1:
            result.append(items[next(iter(answering))])
        elif answering:
            result.append(merge_responses([items[i] for i in sorted(answering)]))
    return result


def drop_orphaned_calls(items: Sequence[Item]) -> list[Item]:
    answered = {response.id for item in items for response in item.responses if response.id}
    unanswered = {call.id for item in items for call in item.calls if call.id} - answered
    if not unanswered:
        return list(items)
    long_running: set[str] = set()
    for item in items:
        long_running.update(item.long_running_tool_ids)
    if unanswered <= long_running:
        return list(items)
    result: list[Item] = []
    for item in items:
        if not item.parts or not item.calls:
            result.append(item)
            continue
        kept: list[PartView] = [
            view
            for view in item.parts
            if not (
                view.call is not None
                and view.call.id
                and view.call.id not in answered
                and view.call.id not in long_running
            )
        ]
        if not kept:
            continue
        result.append(item if len(kept) == len(item.parts) else item.with_parts(kept))
    return result
