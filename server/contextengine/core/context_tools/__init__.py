"""The context tools: the model pins, hides, summarizes, expands and searches its own context.

Pure functions over the log (no I/O): the declarations in each provider's shape
(``_declarations``), the arguments (``_args``), a caller's view of the log (``_view``), the
rules an edit must keep (``_rules``), the read-only answers (``_read``) and the edits an
appended answer records (``_record``). The engine runs them (``engine/_context_tools.py``);
``docs/design/context-tools.md`` is the design.
"""

from __future__ import annotations

from contextengine.core.context_tools._args import ToolArgs, parse_args
from contextengine.core.context_tools._declarations import (
    EDIT_TOOLS,
    EXPAND,
    HIDE,
    PIN,
    SEARCH,
    STATUS,
    SUMMARIZE,
    TOOL_NAMES,
    TOOLS,
    UNPIN,
    anthropic_tools,
    genai_declarations,
    openai_chat_tools,
    openai_responses_tools,
)
from contextengine.core.context_tools._read import (
    CacheState,
    edit_cost,
    event_text,
    expansion,
    in_context,
    status,
    where,
)
from contextengine.core.context_tools._record import answers_edit_calls, recorded_edits
from contextengine.core.context_tools._rules import (
    EditRefusedError,
    check_hide,
    check_pin,
    check_summarize,
    check_unpin,
)
from contextengine.core.context_tools._view import Caller, Limits, SessionView

__all__ = [
    "EDIT_TOOLS",
    "EXPAND",
    "HIDE",
    "PIN",
    "SEARCH",
    "STATUS",
    "SUMMARIZE",
    "TOOLS",
    "TOOL_NAMES",
    "UNPIN",
    "CacheState",
    "Caller",
    "EditRefusedError",
    "Limits",
    "SessionView",
    "ToolArgs",
    "answers_edit_calls",
    "anthropic_tools",
    "check_hide",
    "check_pin",
    "check_summarize",
    "check_unpin",
    "edit_cost",
    "event_text",
    "expansion",
    "genai_declarations",
    "in_context",
    "openai_chat_tools",
    "openai_responses_tools",
    "parse_args",
    "recorded_edits",
    "status",
    "where",
]
