"""Compaction masking (section 6.4): summaries replace the raw events they cover.

1. Surviving summaries: a summary whose timestamp range lies inside (or equals) another one's
   is dropped, the latest of identical ranges wins, partial overlaps all survive; NaN bounds
   always survive. (:func:`compaction_ranges`, shared with the compaction planner.)
2. A raw event is hidden iff its timestamp lies in the union of the surviving ranges
   (inclusive; by timestamp only).
3. Each surviving summary becomes a turn of the viewing agent (author = agent name, or 'model'),
   timestamped at its range's end; then everything is sorted by (timestamp, position).
4. A surviving function response whose call was hidden gets its whole call event back, right
   before the first response to it, followed by the latest response of each sibling call whose
   own response did not survive (:func:`recover_compacted_calls`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from contextengine.core.context._model import Item, content_role, part_views, synthetic_item
from contextengine.v1 import event_pb2

__all__ = [
    "CompactionRange",
    "compaction_ranges",
    "covered_intervals",
    "latest_non_subsumed_compaction",
    "mask_compacted",
    "recover_compacted_calls",
    "surviving_ranges",
]


class CompactionRange(NamedTuple):
    """A summary that survives: its position in the list it was found in, and its range."""

    position: int
    start: float
    end: float


def surviving_ranges(candidates: Iterable[tuple[int, float, float]]) -> list[CompactionRange]:
    """The non-subsumed ranges among ``(index, start, end)`` candidates, in index order.

    Sorting by (start, -end, -index) puts every range that could contain another before it, so
    a range survives iff its end exceeds every end seen so far."""
    ranges = [CompactionRange(*candidate) for candidate in candidates]
    retained: set[int] = set()
    comparable: list[CompactionRange] = []
    for item in ranges:
        if math.isnan(item.start) or math.isnan(item.end):
            retained.add(item.position)
        else:
            comparable.append(item)
    comparable.sort(key=lambda item: (item.start, -item.end, -item.position))
    max_end: float | None = None
    for item in comparable:
        if max_end is None or item.end > max_end:
            retained.add(item.position)
            max_end = item.end
    return [item for item in ranges if item.position in retained]


def _candidate(index: int, event: event_pb2.Event) -> tuple[int, float, float] | None:
    actions = event.actions
    if not actions.HasField("compaction"):
        return None
    compaction = actions.compaction
    if not compaction.HasField("compacted_content"):
        return None
    return index, compaction.start_timestamp, compaction.end_timestamp


def compaction_ranges(events: Sequence[event_pb2.Event]) -> list[CompactionRange]:
    """The surviving summaries among ``events`` (ADK's ``_get_compaction_ranges``); indexes are
    positions in ``events``. A summary without ``compacted_content`` is not a candidate."""
    candidates = (_candidate(index, event) for index, event in enumerate(events))
    return surviving_ranges(candidate for candidate in candidates if candidate is not None)


def latest_non_subsumed_compaction(events: Sequence[event_pb2.Event]) -> event_pb2.Event | None:
    """The last surviving summary in list order (the token-threshold rolling seed), if any."""
    ranges = compaction_ranges(events)
    return events[ranges[-1].position] if ranges else None


def covered_intervals(ranges: Sequence[CompactionRange]) -> list[tuple[float, float]]:
    """The union of the ranges with ``start <= end``, as sorted, disjoint intervals (touching or
    overlapping ranges merge)."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted((r.start, r.end) for r in ranges if r.start <= r.end):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def mask_compacted(items: Sequence[Item], agent_name: str) -> list[Item]:
    """Steps 1-3: summaries materialised in place of what they cover, sorted by time."""
    candidates: list[tuple[int, float, float]] = []
    for index, item in enumerate(items):
        if item.is_compaction:
            assert item.source is not None
            candidate = _candidate(index, item.source)
            if candidate is not None:
                candidates.append(candidate)
    ranges = surviving_ranges(candidates)
    covered = covered_intervals(ranges)
    starts = [start for start, _ in covered]

    placed: list[tuple[float, int, Item]] = []
    for surviving in ranges:
        summary = items[surviving.position]
        assert summary.source is not None
        content = summary.source.actions.compaction.compacted_content
        placed.append(
            (
                surviving.end,
                surviving.position,
                synthetic_item(
                    author=agent_name or "model",
                    timestamp=surviving.end,
                    role=content_role(content),
                    parts=part_views(content.parts),
                    content=content,
                    actions_of=summary.source,
                    is_compaction=True,
                ),
            )
        )
    for index, item in enumerate(items):
        if item.is_compaction:
            continue
        timestamp = item.timestamp
        position = bisect_right(starts, timestamp) - 1
        if position >= 0 and timestamp <= covered[position][1]:
            continue
        placed.append((timestamp, index, item))
    placed.sort(key=lambda entry: (entry[0], entry[1]))
    return [item for _, _, item in placed]


def recover_compacted_calls(items: list[Item], source_items: Sequence[Item]) -> list[Item]:
    """Step 4. ``source_items`` is the list before masking (same objects as in ``items``)."""
    if not any(item.responses for item in items):
        return items
    present = {id(item) for item in items}
    latest_call: dict[str, Item] = {}
    call_of_response: dict[tuple[int, str], Item] = {}
    latest_response: dict[tuple[int, str], Item] = {}
    surviving: set[tuple[int, str]] = set()
    for item in source_items:
        for call in item.calls:
            if call.id:
                latest_call[call.id] = item
        for response in item.responses:
            response_id = response.id
            if not response_id:
                continue
            call_item = latest_call.get(response_id)
            if call_item is None:
                continue
            call_of_response[id(item), response_id] = call_item
            key = (id(call_item), response_id)
            if id(item) in present:
                surviving.add(key)
            existing = latest_response.get(key)
            if existing is None or item.timestamp >= existing.timestamp:
                latest_response[key] = item

    result: list[Item] = []
    restored_calls: set[int] = set()
    restored_responses: set[int] = set()
    for item in items:
        for response in item.responses:
            if not response.id:
                continue
            call_item = call_of_response.get((id(item), response.id))
            if call_item is None or id(call_item) in present or id(call_item) in restored_calls:
                continue
            result.append(call_item)
            restored_calls.add(id(call_item))
            for sibling in call_item.calls:
                if not sibling.id:
                    continue
                key = (id(call_item), sibling.id)
                if key in surviving:
                    continue
                sibling_response = latest_response.get(key)
                if sibling_response is not None and id(sibling_response) not in restored_responses:
                    result.append(sibling_response)
                    restored_responses.add(id(sibling_response))
        result.append(item)
    return result if restored_calls else items
