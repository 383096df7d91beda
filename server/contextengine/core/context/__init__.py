"""Context materialization: the model contents ADK 2.13 would send, computed from the log.

Pure functions over ``contextengine.v1.event_pb2.Event`` lists (no I/O). The pipeline follows
ADK's order exactly (``docs/design/context.md`` and section 6 of the ADK semantics):
rewinds -> per-event visibility -> compaction masking (+ recovery of compacted calls) ->
transcription folding -> other-agent rewriting -> call/response repair -> id stripping / emit.
"""

from __future__ import annotations

from contextengine.core.context._model import Item, item_from_event
from contextengine.core.context._options import (
    DEFAULT_OTHER_AGENT_PREAMBLE,
    ContextOptions,
    IncludeContents,
)
from contextengine.core.context._pipeline import build_contents

__all__ = [
    "DEFAULT_OTHER_AGENT_PREAMBLE",
    "ContextOptions",
    "IncludeContents",
    "Item",
    "build_contents",
    "item_from_event",
]
