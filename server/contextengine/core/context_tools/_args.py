"""A context tool call's arguments, checked against its declaration.

Models send JSON: integers may arrive as ``12.0`` (a protobuf ``Struct`` holds doubles) or, from
some models, as the text ``"12"``; both are read as 12. Anything else of the wrong shape (a
missing required argument, one the tool does not have, a fraction, a negative sequence) is
INVALID_TOOL_ARGUMENTS, naming the argument: the caller's bug, not a refusal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contextengine.core.context_tools._declarations import BY_NAME, Param
from contextengine.core.errors import ContextEngineError

__all__ = ["ToolArgs", "parse_args"]

#: limits of the read-only tools' optional arguments
DEFAULT_MAX_CHARS = 20_000
MAX_MAX_CHARS = 200_000
DEFAULT_SEARCH_LIMIT = 5
MAX_SEARCH_LIMIT = 20
#: the longest stub, summary or query accepted, in characters
MAX_TEXT_CHARS = 100_000


@dataclass(frozen=True)
class ToolArgs:
    """The arguments of one call; only the tool's own are set."""

    name: str
    first: int = 0
    last: int = 0
    stub: str = ""
    summary: str = ""
    sequence: int = 0
    max_chars: int = DEFAULT_MAX_CHARS
    query: str = ""
    limit: int = DEFAULT_SEARCH_LIMIT


def _bad(name: str, message: str) -> ContextEngineError:
    return ContextEngineError(
        "INVALID_TOOL_ARGUMENTS", message, field=f"call.args.{name}" if name else "call.args"
    )


def _integer(param: Param, value: Any) -> int:
    if isinstance(value, bool):
        raise _bad(param.name, f"{param.name} must be an integer, not {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip("-").isdigit():
            raise _bad(param.name, f"{param.name} must be an integer, not {value!r}")
        return int(text)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    raise _bad(param.name, f"{param.name} must be an integer, not {value!r}")


def _text(param: Param, value: Any) -> str:
    if not isinstance(value, str):
        raise _bad(param.name, f"{param.name} must be a string")
    if len(value) > MAX_TEXT_CHARS:
        raise _bad(param.name, f"{param.name} is longer than {MAX_TEXT_CHARS} characters")
    return value


def parse_args(name: str, args: Mapping[str, Any]) -> ToolArgs:
    """The call's arguments (``name`` must be a context tool's), or INVALID_TOOL_ARGUMENTS."""
    tool = BY_NAME[name]
    known = {param.name: param for param in tool.params}
    for key in args:
        if key not in known:
            allowed = ", ".join(known) or "none"
            raise _bad(key, f"{name} has no argument {key!r} (its arguments: {allowed})")
    values: dict[str, Any] = {}
    for param in tool.params:
        value = args.get(param.name)
        if value is None:
            if param.required:
                raise _bad(param.name, f"{name} needs the argument {param.name!r}")
            continue
        values[param.name] = (
            _integer(param, value) if param.kind == "integer" else _text(param, value)
        )
    parsed = ToolArgs(name=name, **values)
    if "first" in known:
        if parsed.first <= 0:
            raise _bad("first", "first must be a sequence number (1 or more)")
        if "last" not in values:
            parsed = ToolArgs(**{**parsed.__dict__, "last": parsed.first})
        if parsed.last < parsed.first:
            raise _bad("last", f"last ({parsed.last}) must not be before first ({parsed.first})")
    if "sequence" in known and parsed.sequence <= 0:
        raise _bad("sequence", "sequence must be a sequence number (1 or more)")
    if "summary" in known and not parsed.summary.strip():
        raise _bad("summary", "summary must not be empty")
    if "query" in known and not parsed.query.strip():
        raise _bad("query", "query must not be empty")
    if not 1 <= parsed.max_chars <= MAX_MAX_CHARS:
        raise _bad("max_chars", f"max_chars must be between 1 and {MAX_MAX_CHARS}")
    if not 1 <= parsed.limit <= MAX_SEARCH_LIMIT:
        raise _bad("limit", f"limit must be between 1 and {MAX_SEARCH_LIMIT}")
    return parsed
