"""Structured logs: ``log_format = "json"`` writes one JSON object per line.

Every record becomes ``{"time", "level", "logger", "message"}``; the per-RPC line of the handler
wrapper also carries its ``rpc`` fields at the top level: ``method``, ``code``, ``ms``, ``peer``
and, when observed, ``app``, ``user``, ``session``, ``trace_id``, ``span_id``. Those are ids and
numbers only: requests' contents and bearer tokens never reach a log record (the handler
wrapper reads nothing else), and exceptions are rendered as their traceback text, as the text
format does.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

from contextengine.settings import LogFormat

__all__ = ["JsonFormatter", "use_log_format"]


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "rpc", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def use_log_format(log_format: LogFormat, logger: logging.Logger | None = None) -> None:
    """Gives the handlers of ``logger`` (the root logger by default, as ``contextengine serve``
    configures it) the JSON formatter; "text" leaves them as they are."""
    if log_format == "text":
        return
    if log_format != "json":
        raise ValueError(f"log_format must be 'text' or 'json', not {log_format!r}")
    target = logger if logger is not None else logging.getLogger()
    for handler in target.handlers:
        handler.setFormatter(JsonFormatter())
