"""The "worth compacting" gate (section 3.4), checked before any summarizer is paid.

A range is worth compacting when an empty summary of it would remove more characters from the
prompt than the latest surviving summary holds (the last summary stands in for the size of the
next one). Sizes are google-genai's compact JSON of each content (``model_dump_json(
exclude_none=True)``), counted in characters, over the compaction-masked event list (section 6.4
without the recovery of compacted calls), whatever the events' branches or authors.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import MutableMapping, Sequence
from typing import Any

from contextengine.core.adk_json import content_to_adk_dict
from contextengine.core.context import (
    compaction_ranges,
    covered_intervals,
    is_stub,
    latest_non_subsumed_compaction,
    surviving_ranges,
)
from contextengine.v1 import content_pb2, event_pb2

__all__ = ["content_json_size", "genai_float_json", "is_worth_compacting", "request_size"]

#: ``{"parts":[],"role":"model"}``: the content of the weightless summary the gate prices with.
_EMPTY_SUMMARY_SIZE = 27


def genai_float_json(value: float) -> str:
    """How google-genai's JSON (pydantic-core) writes a finite float: Python's shortest
    round-trip digits, but ``1e-05`` is written ``0.00001`` (fixed notation from 1e-5 up, where
    Python switches at 1e-4) and exponents are not padded (``1e-7``, not ``1e-07``)."""
    text = repr(value)
    mantissa, is_exponent, exponent = text.partition("e")
    if not is_exponent:
        return text
    power = int(exponent)
    if power == -5:
        sign = "-" if mantissa.startswith("-") else ""
        return f"{sign}0.0000{mantissa.lstrip('-').replace('.', '')}"
    return f"{mantissa}e{'-' if power < 0 else '+'}{abs(power)}"


def _float_length_difference(value: Any) -> int:
    """Characters google-genai's JSON of ``value`` has more than ``json.dumps``' (which writes
    floats with ``repr``)."""
    if isinstance(value, float):
        return len(genai_float_json(value)) - len(repr(value))
    if isinstance(value, dict):
        return sum(_float_length_difference(item) for item in value.values())
    if isinstance(value, list):
        return sum(_float_length_difference(item) for item in value)
    return 0


def content_json_size(content: content_pb2.Content) -> int:
    """Characters of google-genai's compact JSON for ``content`` (key order does not change the
    length; bytes are base64 in both encoders, integral numbers are written as integers, floats
    as :func:`genai_float_json` writes them)."""
    data = content_to_adk_dict(content)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return len(text) + _float_length_difference(data)


def _request_content(event: event_pb2.Event) -> content_pb2.Content | None:
    compaction = event.actions.compaction
    if event.actions.HasField("compaction") and compaction.HasField("compacted_content"):
        return compaction.compacted_content
    return event.content if event.HasField("content") else None


def request_size(event: event_pb2.Event, memo: MutableMapping[int, int] | None = None) -> int:
    """Characters ``event`` contributes to a request: its summary for a summary event, else its
    content (0 without one). ``memo`` caches sizes by event sequence (stored events only: not a
    hidden range's stub, which stands in the log at its first event's sequence)."""
    key = 0 if is_stub(event) else event.sequence
    if memo is not None and key > 0:
        cached = memo.get(key)
        if cached is not None:
            return cached
    content = _request_content(event)
    size = 0 if content is None else content_json_size(content)
    if memo is not None and key > 0:
        memo[key] = size
    return size


def _kept(events: Sequence[event_pb2.Event], extra: tuple[float, float] | None) -> set[int]:
    """Positions that remain after compaction masking; ``extra`` is a summary range appended at
    position ``len(events)``."""
    candidates = [(r.position, r.start, r.end) for r in compaction_ranges(events)]
    # Summaries without a range or a content are candidates nowhere, but are never raw either.
    if extra is not None:
        candidates.append((len(events), extra[0], extra[1]))
    ranges = surviving_ranges(candidates)
    kept = {r.position for r in ranges}
    merged = covered_intervals(ranges)
    starts = [start for start, _ in merged]
    for index, event in enumerate(events):
        if event.actions.HasField("compaction"):
            continue
        timestamp = event.timestamp
        position = bisect_right(starts, timestamp) - 1
        if position < 0 or not timestamp <= merged[position][1]:
            kept.add(index)
    return kept


def is_worth_compacting(
    events: Sequence[event_pb2.Event],
    window: Sequence[event_pb2.Event],
    memo: MutableMapping[int, int] | None = None,
) -> bool:
    """Whether summarising ``window`` (the summarizer input, a rolled-up summary included) can
    shrink the prompt built from ``events`` (the scoped, rewound log)."""
    timestamps = [event.timestamp for event in window]
    before = _kept(events, None)
    after = _kept(events, (min(timestamps), max(timestamps)))
    removed = sum(request_size(events[index], memo) for index in before - after)
    added = sum(
        _EMPTY_SUMMARY_SIZE if index == len(events) else request_size(events[index], memo)
        for index in after - before
    )
    latest = latest_non_subsumed_compaction(events)
    previous = 0 if latest is None else request_size(latest, memo)
    return removed - added > previous
