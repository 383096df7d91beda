"""The summary event a plan and a summary make (ADK's ``LlmEventSummarizer`` output).

Author ``user``, a fresh invocation id, no content; ``actions.compaction`` holds the range
(timestamps of the first and last events given to the summarizer, in log order, not min / max),
the summary as a ``model`` content, and the sequences of the first and last summarised log events
(engine-only). The summarizer's token usage is recorded as the event's usage. The timestamp is the
time the summary was made, so it sorts after everything it covers.
"""

from __future__ import annotations

from contextengine.core.compaction._planner import CompactionPlan
from contextengine.v1 import content_pb2, event_pb2

__all__ = ["summary_event"]


def summary_event(
    plan: CompactionPlan,
    content: content_pb2.Content,
    *,
    event_id: str,
    invocation_id: str,
    timestamp: float,
    usage_metadata: event_pb2.UsageMetadata | None = None,
) -> event_pb2.Event:
    event = event_pb2.Event(
        id=event_id, author="user", invocation_id=invocation_id, timestamp=timestamp
    )
    if plan.isolation_scope is not None:
        event.isolation_scope = plan.isolation_scope
    compaction = event.actions.compaction
    compaction.start_timestamp = plan.start_timestamp
    compaction.end_timestamp = plan.end_timestamp
    compaction.compacted_content.CopyFrom(content)
    compaction.compacted_content.role = "model"
    rolls_up = plan.rolls_up
    if rolls_up is not None and rolls_up.actions.compaction.start_sequence:
        compaction.start_sequence = rolls_up.actions.compaction.start_sequence
    else:
        compaction.start_sequence = plan.covered[0].sequence
    compaction.end_sequence = plan.covered[-1].sequence
    if usage_metadata is not None:
        event.usage_metadata.CopyFrom(usage_metadata)
    return event
