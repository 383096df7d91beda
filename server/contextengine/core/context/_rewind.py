"""Rewinds (section 6.1): which events are still live once every rewind has been applied.

A rewind event names an invocation X (``actions.rewind_before_invocation_id``). Walking the log
from its end, a rewind whose X first appears earlier in the log removes itself and everything
back to (and including) that first event of X; the walk then resumes just before it, so rewinds
inside a removed stretch have no effect. A rewind whose X is unknown, or does not appear before
it, removes only itself. The same rule serves context building and compaction, so rewound
content reaches neither prompts nor summaries.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextengine.v1 import event_pb2

__all__ = ["apply_rewinds", "live_indices"]


def live_indices(
    events: Sequence[event_pb2.Event], targets: Sequence[str] | None = None
) -> list[int]:
    """Positions (ascending) of the events of ``events`` that survive all rewinds. ``targets``,
    when given, are the events' ``actions.rewind_before_invocation_id`` already read."""
    if targets is None:
        targets = [event.actions.rewind_before_invocation_id for event in events]
    if not any(targets):
        return list(range(len(events)))
    first_index: dict[str, int] = {}
    for index, event in enumerate(events):
        invocation_id = event.invocation_id
        if invocation_id and invocation_id not in first_index:
            first_index[invocation_id] = index
    kept: list[int] = []
    index = len(events) - 1
    while index >= 0:
        target = targets[index]
        if target:
            start = first_index.get(target)
            if start is not None and start < index:
                index = start
        else:
            kept.append(index)
        index -= 1
    kept.reverse()
    return kept


def apply_rewinds(events: Sequence[event_pb2.Event]) -> list[event_pb2.Event]:
    """The events of ``events`` that survive all rewinds, in their order (the same objects)."""
    return [events[index] for index in live_indices(events)]
