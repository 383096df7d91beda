"""Step 2 of call/response repair (section 6.7.2): the trailing response event.

When the last event holds function responses, each response part belongs to its owning call
event: the last earlier event with a call of the same id (an id-less response: the last earlier
id-less call of the same name). Unless the only owner is the event right before the trailing one,
the list is rebuilt up to the latest owner, with, right after each owner, one response event
merging the intermediate responses to it and its share of the trailing parts (the non-response
parts of the trailing event go with the latest owner). Responses to those owners are removed from
earlier events, and every event after the latest owner other than the trailing one is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextengine.core.context._model import FnRef, Item, PartView
from contextengine.core.context._rearrange import drop_orphaned_responses, merge_responses

__all__ = ["rearrange_latest_response", "rearrange_latest_response_moved"]

#: per item, per part: the position of the owning call event (-1: none), None for non-responses
_Owners = list[list[int | None]]


def _owners(items: Sequence[Item]) -> _Owners:
    """For every response part, the owning call event among the events *before* its own."""
    last_with_id: dict[str, int] = {}
    last_idless_with_name: dict[str | None, int] = {}
    owners: _Owners = []
    for index, item in enumerate(items):
        row: list[int | None] = []
        for view in item.parts:
            response = view.response
            row.append(
                None if response is None else _owner(response, last_with_id, last_idless_with_name)
            )
        owners.append(row)
        for call in item.calls:
            if call.id:
                last_with_id[call.id] = index
            else:
                last_idless_with_name[call.name] = index
    return owners


def _owner(
    response: FnRef, last_with_id: dict[str, int], last_idless_with_name: dict[str | None, int]
) -> int:
    if response.id:
        return last_with_id.get(response.id, -1)
    if not response.name:
        return -1
    return last_idless_with_name.get(response.name, -1)


def rearrange_latest_response(items: Sequence[Item], *, drop_orphans: bool = True) -> list[Item]:
    """ADK's ``_rearrange_events_for_latest_function_response``, which starts by dropping
    orphaned responses; ``drop_orphans=False`` skips that when the caller just did it."""
    return rearrange_latest_response_moved(items, drop_orphans=drop_orphans)[0]


def rearrange_latest_response_moved(
    items: Sequence[Item], *, drop_orphans: bool = True
) -> tuple[list[Item], bool]:
    """:func:`rearrange_latest_response`, and whether the rule applied: the trailing event is a
    response it moved (what it produced then depends on that event being the last one)."""
    events = drop_orphaned_responses(items) if drop_orphans else list(items)
    if len(events) < 2 or not events[-1].responses:
        return events, False
    trailing = events[-1]
    if not trailing.parts:
        return events, False
    owners = _owners(events)
    shares: dict[int, list[PartView]] = {}
    other_parts: list[PartView] = []
    for view, owner in zip(trailing.parts, owners[-1], strict=True):
        if view.response is None:
            other_parts.append(view)
        elif owner is not None and owner != -1:
            shares.setdefault(owner, []).append(view)
    if not shares:
        return events, False
    latest = max(shares)
    shares[latest].extend(other_parts)
    if latest == len(events) - 2 and len(shares) == 1:
        return events, False

    def merged_response(owner: int) -> Item:
        collected: list[Item] = []
        for index in range(owner + 1, len(events) - 1):
            event = events[index]
            if not event.parts or not event.responses:
                continue
            is_call_event = bool(event.calls)
            matched = [
                view
                for view, part_owner in zip(event.parts, owners[index], strict=True)
                if (part_owner == owner if view.response is not None else not is_call_event)
            ]
            if any(view.response is not None for view in matched):
                collected.append(
                    event if len(matched) == len(event.parts) else event.with_parts(matched)
                )
        collected.append(trailing.with_parts(shares[owner]))
        return merge_responses(collected) if len(collected) > 1 else collected[0]

    result: list[Item] = []
    for index in range(latest + 1):
        event = events[index]
        if event.parts and event.responses:
            kept = [
                view
                for view, part_owner in zip(event.parts, owners[index], strict=True)
                if view.response is None or part_owner not in shares
            ]
            if not any(view.response is not None or view.call is not None for view in kept):
                continue
            if len(kept) != len(event.parts):
                event = event.with_parts(kept)
        result.append(event)
        if index in shares:
            result.append(merged_response(index))
    return result, True
