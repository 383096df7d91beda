"""The context tools' declarations: one table, written out in each provider's shape.

The names, descriptions and parameters are this project's (docs/design/context-tools.md). The
descriptions are what the model reads to decide when to call a tool, so they say what the tool
changes, what it costs (a prompt cache) and what to call first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EDIT_TOOLS",
    "TOOLS",
    "TOOL_NAMES",
    "Param",
    "ToolSpec",
    "anthropic_tools",
    "genai_declarations",
    "openai_chat_tools",
    "openai_responses_tools",
]

STATUS = "context_status"
PIN = "context_pin"
UNPIN = "context_unpin"
HIDE = "context_hide"
SUMMARIZE = "context_summarize"
EXPAND = "context_expand"
SEARCH = "context_search"


@dataclass(frozen=True)
class Param:
    """One argument: a JSON Schema ``integer`` or ``string``."""

    name: str
    kind: str  # "integer" | "string"
    description: str
    required: bool = False


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[Param, ...] = ()
    #: whether a successful call edits the context (limited per invocation, recorded on append)
    edits: bool = False


_FIRST = Param(
    "first",
    "integer",
    "Sequence number of the first event of the range (context_status and context_search "
    "show them).",
    required=True,
)
_LAST = Param(
    "last",
    "integer",
    "Sequence number of the last event of the range; omit it for a single event.",
)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        STATUS,
        "Shows what your context holds now: its size in tokens against its budget, the turns "
        "with their event sequence numbers, the largest events, what is pinned, summarized or "
        "hidden, how many edits you have left in this turn, and whether editing now would throw "
        "away a warm prompt cache. Call it before pinning, hiding or summarizing. Read-only.",
    ),
    ToolSpec(
        PIN,
        "Pins a range of events so that automatic compaction never summarizes it away: use it "
        "for facts, instructions or results you will need verbatim later. Does not change the "
        "context itself.",
        (_FIRST, _LAST),
        edits=True,
    ),
    ToolSpec(
        UNPIN,
        "Removes the pins context_pin put on a range, so compaction may summarize it again.",
        (_FIRST, _LAST),
        edits=True,
    ),
    ToolSpec(
        HIDE,
        "Replaces a range of earlier events you no longer need (typically long tool results you "
        "have finished with) by a one-line stub, freeing their tokens. Nothing is deleted: "
        "context_expand reads them back. A call and its result are hidden together; ranges with "
        "an unanswered call, a pinned event or the current turn are refused.",
        (
            _FIRST,
            _LAST,
            Param(
                "stub",
                "string",
                "One sentence saying what the hidden events held, so that you know later "
                "whether to read them back. Omitted: the engine describes them.",
            ),
        ),
        edits=True,
    ),
    ToolSpec(
        SUMMARIZE,
        "Replaces a range of earlier events by your own summary of them, stored as an "
        "ordinary compaction summary. Keep every fact, name, number and open question the rest "
        "of the task needs. Nothing is deleted: context_expand reads the events back.",
        (
            Param(
                "first",
                "integer",
                "Sequence number of the first event to summarize.",
                required=True,
            ),
            Param(
                "last",
                "integer",
                "Sequence number of the last event to summarize.",
                required=True,
            ),
            Param("summary", "string", "The summary, in your words.", required=True),
        ),
        edits=True,
    ),
    ToolSpec(
        EXPAND,
        "Reads back, in full, the events a summary or a hidden-range stub stands for, or any "
        "one event by its sequence number. Read-only: the context keeps its summaries and stubs.",
        (
            Param(
                "sequence",
                "integer",
                "Sequence number of a summary, of a hidden range (its stub names it) or of any "
                "event.",
                required=True,
            ),
            Param(
                "max_chars",
                "integer",
                "The most characters to return (default 20000); longer text is cut.",
            ),
        ),
    ),
    ToolSpec(
        SEARCH,
        "Searches this session's whole history by keywords, including what summaries cover and "
        "what is hidden, and returns the best matching events with their sequence numbers and "
        "where they are now (in the context, summarized or hidden). Read-only.",
        (
            Param("query", "string", "Keywords to look for.", required=True),
            Param("limit", "integer", "The most events to return, 1 to 20 (default 5)."),
        ),
    ),
)

TOOL_NAMES: frozenset[str] = frozenset(tool.name for tool in TOOLS)
#: the tools whose successful calls edit the context
EDIT_TOOLS: frozenset[str] = frozenset(tool.name for tool in TOOLS if tool.edits)
BY_NAME: dict[str, ToolSpec] = {tool.name: tool for tool in TOOLS}


def _json_schema(tool: ToolSpec) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            param.name: {"type": param.kind, "description": param.description}
            for param in tool.params
        },
    }
    required = [param.name for param in tool.params if param.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def genai_declarations() -> list[dict[str, Any]]:
    """google-genai ``FunctionDeclaration`` JSON (snake_case), its ``Schema`` types in
    upper case as the Gemini API spells them."""
    out: list[dict[str, Any]] = []
    for tool in TOOLS:
        declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
        if tool.params:
            parameters: dict[str, Any] = {
                "type": "OBJECT",
                "properties": {
                    param.name: {"type": param.kind.upper(), "description": param.description}
                    for param in tool.params
                },
            }
            required = [param.name for param in tool.params if param.required]
            if required:
                parameters["required"] = required
            declaration["parameters"] = parameters
        out.append(declaration)
    return out


def openai_chat_tools() -> list[str]:
    """OpenAI Chat Completions tools, each one JSON text."""
    return [
        json.dumps(
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": _json_schema(tool),
                },
            }
        )
        for tool in TOOLS
    ]


def openai_responses_tools() -> list[str]:
    """OpenAI Responses API function tools, each one JSON text."""
    return [
        json.dumps(
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": _json_schema(tool),
                # strict mode needs every argument required; some of these are optional
                "strict": False,
            }
        )
        for tool in TOOLS
    ]


def anthropic_tools() -> list[str]:
    """Anthropic Messages API tools, each one JSON text."""
    return [
        json.dumps(
            {"name": tool.name, "description": tool.description, "input_schema": _json_schema(tool)}
        )
        for tool in TOOLS
    ]
