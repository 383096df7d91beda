"""Compaction planning: pure functions over the log (no I/O, no summarizer).

``plan_sliding_window`` / ``plan_token_threshold`` / ``plan_after_invocation`` choose the range
google-adk 2.13 would summarise now (plus this engine's pinned events), ``render_events`` shows a
range the way ADK's summarizer does, ``is_worth_compacting`` is ADK's size gate and
``summary_event`` builds the event to append. See ``docs/design/compaction.md``.
"""

from __future__ import annotations

from contextengine.core.compaction._client_range import Expansion, client_plan, expand_summary
from contextengine.core.compaction._gate import content_json_size, is_worth_compacting
from contextengine.core.compaction._obligations import (
    call_ids,
    longest_self_contained_prefix,
    open_obligations,
    response_ids,
    safe_split_index,
)
from contextengine.core.compaction._planner import (
    SLIDING_WINDOW,
    TOKEN_THRESHOLD,
    CompactionPlan,
    PlanResult,
    RecordedScan,
    TokenReading,
    has_live_root_events,
    latest_prompt_token_count,
    plan_after_invocation,
    plan_sliding_window,
    plan_token_threshold,
    scan_recorded,
    seed_event,
)
from contextengine.core.compaction._render import is_credential_request, render_events
from contextengine.core.compaction._summary_event import summary_event

__all__ = [
    "SLIDING_WINDOW",
    "TOKEN_THRESHOLD",
    "CompactionPlan",
    "Expansion",
    "PlanResult",
    "RecordedScan",
    "TokenReading",
    "call_ids",
    "client_plan",
    "content_json_size",
    "expand_summary",
    "has_live_root_events",
    "is_credential_request",
    "is_worth_compacting",
    "latest_prompt_token_count",
    "longest_self_contained_prefix",
    "open_obligations",
    "plan_after_invocation",
    "plan_sliding_window",
    "plan_token_threshold",
    "render_events",
    "response_ids",
    "safe_split_index",
    "scan_recorded",
    "seed_event",
    "summary_event",
]
