"""The text of a memory preload (google-adk's ``PreloadMemoryTool``, spec 9.4). Pure.

ADK writes one ``Time: <timestamp>`` line and one ``<author>: <text>`` line per memory, joins the
lines with newlines and wraps them in a fixed two-sentence header and a tag pair. The lines are
the same here; the wrapping text is a template (``MemoryConfig.preload_template``) whose default
is this project's own wording. ADK's own wrapping, set as the template, gives its text byte for
byte (``tests/memory/test_preload_parity.py`` reads it from the installed package).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from datetime import datetime, timezone

from contextengine.core.errors import invalid
from contextengine.memory.documents import joined_text
from contextengine.memory.index import Hit
from contextengine.v1 import config_pb2

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_PRELOAD_TEMPLATE",
    "MAX_RESULTS_LIMIT",
    "MAX_TEMPLATE_CHARS",
    "check_memory_config",
    "format_timestamp",
    "memory_lines",
    "render_preload",
]

#: memories a search returns and a preload recalls when nothing else is configured
DEFAULT_MAX_RESULTS = 10
#: the largest ``limit`` / ``max_results``
MAX_RESULTS_LIMIT = 1000
MAX_TEMPLATE_CHARS = 10_000

DEFAULT_PRELOAD_TEMPLATE = (
    "Below are notes recalled from earlier conversations with this user, picked because they "
    "share words with the current message. They can be incomplete or out of date: rely on them "
    "only where they help with the request at hand.\n"
    "<recalled_memories>\n"
    "{memories}\n"
    "</recalled_memories>\n"
)

_REASON = "INVALID_MEMORY_CONFIG"


def format_timestamp(timestamp: float, time_format: config_pb2.PreloadTimeFormat.ValueType) -> str:
    """ISO 8601, as ADK writes it. A time ``datetime`` cannot show (an event recorded before
    appends refused such timestamps: 1.7e12 milliseconds, 1e308) is written as the number of
    seconds it holds: a preload never fails for one stored value."""
    try:
        if time_format == config_pb2.PRELOAD_TIME_FORMAT_LOCAL:
            return datetime.fromtimestamp(timestamp).isoformat()
        return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat()
    except (OverflowError, ValueError, OSError):
        return f"{timestamp!r} seconds since the Unix epoch"


def memory_lines(
    hits: Sequence[Hit], time_format: config_pb2.PreloadTimeFormat.ValueType
) -> list[str]:
    """Per memory: its time line, then its text line (author-prefixed)."""
    lines: list[str] = []
    for hit in hits:
        entry = hit.entry
        lines.append(f"Time: {format_timestamp(entry.timestamp, time_format)}")
        text = joined_text(entry.content)
        if text:
            lines.append(f"{entry.author}: {text}" if entry.author else text)
    return lines


def render_preload(
    hits: Sequence[Hit],
    template: str = DEFAULT_PRELOAD_TEMPLATE,
    time_format: config_pb2.PreloadTimeFormat.ValueType = config_pb2.PRELOAD_TIME_FORMAT_UTC,
) -> str:
    """The preload block for ``hits``; empty when there are none."""
    lines = memory_lines(hits, time_format)
    if not lines:
        return ""
    return template.format(memories="\n".join(lines))


def _template_problem(template: str) -> str:
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
        template.format(memories="")
    except (ValueError, KeyError, IndexError, AttributeError) as error:
        return (
            f"preload_template is not a valid str.format template ({error!r}); double literal"
            " braces"
        )
    if fields != ["memories"]:
        return "preload_template must hold exactly one {memories} placeholder and no other field"
    return ""


def check_memory_config(cfg: config_pb2.MemoryConfig, field: str) -> None:
    """Raises INVALID_ARGUMENT / INVALID_MEMORY_CONFIG for an unusable configuration."""
    if cfg.HasField("max_results") and not 1 <= cfg.max_results <= MAX_RESULTS_LIMIT:
        raise invalid(
            _REASON,
            f"{field}.max_results",
            f"max_results must be between 1 and {MAX_RESULTS_LIMIT}",
        )
    if cfg.HasField("preload_template"):
        if len(cfg.preload_template) > MAX_TEMPLATE_CHARS:
            raise invalid(
                _REASON,
                f"{field}.preload_template",
                f"preload_template is longer than {MAX_TEMPLATE_CHARS} characters",
            )
        problem = _template_problem(cfg.preload_template)
        if problem:
            raise invalid(_REASON, f"{field}.preload_template", problem)
    if cfg.preload_time_format not in config_pb2.PreloadTimeFormat.values():
        raise invalid(
            _REASON,
            f"{field}.preload_time_format",
            f"preload_time_format {cfg.preload_time_format} is not a known value",
        )
