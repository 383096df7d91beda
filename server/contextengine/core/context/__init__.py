"""Context materialization: the model contents ADK 2.13 would send, computed from the log.

Pure functions over ``contextengine.v1.event_pb2.Event`` lists (no I/O). The pipeline follows
ADK's order exactly (``docs/design/context.md`` and section 6 of the ADK semantics):
rewinds -> per-event visibility -> compaction masking (+ recovery of compacted calls) ->
transcription folding -> other-agent rewriting -> call/response repair -> id stripping / emit.

The rewind and compaction-view helpers are exported too: compaction planning, the prompt-cache
rules and memory ingestion apply the same rewinds and see the same compacted ranges as the
pipeline, and the ``_`` modules stay private to this package (``tests/test_layers.py``).
"""

from __future__ import annotations

from contextengine.core.context._compaction_view import (
    CompactionRange,
    compaction_ranges,
    covered_intervals,
    latest_non_subsumed_compaction,
    surviving_ranges,
)
from contextengine.core.context._edits import (
    EditedLog,
    Hidden,
    apply_context_edits,
    is_stub,
    live_edits,
    stub_text,
)
from contextengine.core.context._model import Item, item_from_event
from contextengine.core.context._options import (
    DEFAULT_OTHER_AGENT_PREAMBLE,
    ContextOptions,
    IncludeContents,
)
from contextengine.core.context._pipeline import build_contents
from contextengine.core.context._rewind import apply_rewinds, live_indices
from contextengine.core.context._visibility import branch_is_visible, same_scope

__all__ = [
    "DEFAULT_OTHER_AGENT_PREAMBLE",
    "CompactionRange",
    "ContextOptions",
    "EditedLog",
    "Hidden",
    "IncludeContents",
    "Item",
    "apply_context_edits",
    "apply_rewinds",
    "branch_is_visible",
    "build_contents",
    "compaction_ranges",
    "covered_intervals",
    "is_stub",
    "item_from_event",
    "latest_non_subsumed_compaction",
    "live_edits",
    "live_indices",
    "same_scope",
    "stub_text",
    "surviving_ranges",
]
