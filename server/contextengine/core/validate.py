"""Request validation shared by every RPC: ids, events, state, configs. Pure; raises
:class:`contextengine.core.errors.ContextEngineError` with an INVALID_ARGUMENT reason."""

from __future__ import annotations

import math
import re

from contextengine.core.errors import invalid
from contextengine.core.state import validate_state
from contextengine.core.structs import struct_to_dict
from contextengine.v1 import config_pb2, event_pb2

MAX_ID_CHARS = 256
#: event timestamps are below 10000-01-01T00:00:00Z, in seconds (see ``check_timestamp``)
MAX_TIMESTAMP = 253_402_300_800.0


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _has_control_chars(value: str) -> bool:
    return _CONTROL.search(value) is not None


def check_id(value: str, field: str, *, required: bool = True) -> None:
    """Ids are non-empty (when required), at most 256 characters, without control characters
    and without surrounding whitespace."""
    if not value:
        if required:
            raise invalid("MISSING_FIELD", field, f"{field} is required")
        return
    if len(value) > MAX_ID_CHARS:
        raise invalid(
            "INVALID_ID", field, f"{field} is {len(value)} characters long (max {MAX_ID_CHARS})"
        )
    if _has_control_chars(value):
        raise invalid("INVALID_ID", field, f"{field} contains control characters")
    if value != value.strip():
        raise invalid("INVALID_ID", field, f"{field} has leading or trailing whitespace")


def check_session_address(app_name: str, user_id: str, session_id: str) -> None:
    check_id(app_name, "app_name")
    check_id(user_id, "user_id")
    check_id(session_id, "session_id")


def check_timestamp(value: float, field: str) -> None:
    """Event times are seconds since the Unix epoch (ADK's ``time.time()``), in
    ``[0, MAX_TIMESTAMP)``: before 10000-01-01T00:00:00Z, so ``datetime`` can show every one.
    Milliseconds (1.7e12 today), negative and non-finite values are refused."""
    if not (math.isfinite(value) and 0.0 <= value < MAX_TIMESTAMP):
        hint = " (milliseconds?)" if MAX_TIMESTAMP <= value < 1000 * MAX_TIMESTAMP else ""
        raise invalid(
            "INVALID_EVENT",
            field,
            f"{field} must be a number of seconds since the Unix epoch, >= 0 and"
            f" < {MAX_TIMESTAMP:.0f} (year 10000); got {value!r}{hint}",
        )


def _good_id(value: str) -> bool:
    """Whether ``check_id(value, ..., required=False)`` passes (without naming a field)."""
    return (
        len(value) <= MAX_ID_CHARS
        and _CONTROL.search(value) is None
        and (not value or value == value.strip())
    )


def check_event(event: event_pb2.Event, field: str = "event") -> None:
    """What an event must satisfy to be appended. (The ids are checked without naming their
    fields first, the common case of an event that passes; ``check_id`` then says which failed
    and why.)"""
    author = event.author
    if not author:
        raise invalid("MISSING_FIELD", f"{field}.author", f"{field}.author is required")
    event_id = event.id
    invocation_id = event.invocation_id
    if not (_good_id(author) and _good_id(event_id) and _good_id(invocation_id)):
        check_id(author, f"{field}.author")
        check_id(event_id, f"{field}.id", required=False)
        check_id(invocation_id, f"{field}.invocation_id", required=False)
    if event.HasField("branch"):
        check_id(event.branch, f"{field}.branch", required=False)
    timestamp = event.timestamp
    if timestamp != 0.0:
        check_timestamp(timestamp, f"{field}.timestamp")
    if event.actions.HasField("compaction"):
        compaction = event.actions.compaction
        for name in ("start_timestamp", "end_timestamp"):
            if compaction.HasField(name):
                check_timestamp(getattr(compaction, name), f"{field}.actions.compaction.{name}")
    if event.actions.HasField("state_delta"):
        validate_state(
            struct_to_dict(event.actions.state_delta, f"{field}.actions.state_delta"),
            f"{field}.actions.state_delta",
        )


def check_compaction_config(cfg: config_pb2.EventsCompactionConfig, field: str) -> None:
    """ADK's ``EventsCompactionConfig`` rules: pairs set together, at least one pair, bounds."""
    has = cfg.HasField
    if has("compaction_interval") and cfg.compaction_interval <= 0:
        raise invalid(
            "INVALID_COMPACTION_CONFIG",
            f"{field}.compaction_interval",
            "compaction_interval must be greater than 0",
        )
    if has("overlap_size") and cfg.overlap_size < 0:
        raise invalid(
            "INVALID_COMPACTION_CONFIG",
            f"{field}.overlap_size",
            "overlap_size must be greater than or equal to 0",
        )
    if has("token_threshold") and cfg.token_threshold <= 0:
        raise invalid(
            "INVALID_COMPACTION_CONFIG",
            f"{field}.token_threshold",
            "token_threshold must be greater than 0",
        )
    if has("event_retention_size") and cfg.event_retention_size < 0:
        raise invalid(
            "INVALID_COMPACTION_CONFIG",
            f"{field}.event_retention_size",
            "event_retention_size must be greater than or equal to 0",
        )
    if has("token_threshold") != has("event_retention_size"):
        raise invalid(
            "INVALID_COMPACTION_CONFIG",
            f"{field}.token_threshold",
            "token_threshold and event_retention_size must be set together",
        )
    if has("compaction_interval") != has("overlap_size"):
        raise invalid(
            "INVALID_COMPACTION_CONFIG",
            f"{field}.compaction_interval",
            "compaction_interval and overlap_size must be set together",
        )
    if not has("compaction_interval") and not has("token_threshold"):
        raise invalid(
            "INVALID_COMPACTION_CONFIG",
            field,
            "At least one compaction trigger must be configured: either "
            "(compaction_interval and overlap_size) or (token_threshold and event_retention_size)",
        )


def check_cache_config(cfg: config_pb2.ContextCacheConfig, field: str) -> None:
    """ADK's ``ContextCacheConfig`` bounds."""
    if cfg.HasField("cache_intervals") and not 1 <= cfg.cache_intervals <= 100:
        raise invalid(
            "INVALID_CACHE_CONFIG",
            f"{field}.cache_intervals",
            "cache_intervals must be between 1 and 100",
        )
    if cfg.HasField("ttl_seconds") and cfg.ttl_seconds <= 0:
        raise invalid(
            "INVALID_CACHE_CONFIG", f"{field}.ttl_seconds", "ttl_seconds must be greater than 0"
        )
    if cfg.HasField("min_tokens") and cfg.min_tokens < 0:
        raise invalid(
            "INVALID_CACHE_CONFIG",
            f"{field}.min_tokens",
            "min_tokens must be greater than or equal to 0",
        )
    aware = cfg.cache_aware_compaction
    if (
        cfg.HasField("cache_aware_compaction")
        and aware.HasField("hard_token_limit")
        and aware.hard_token_limit <= 0
    ):
        raise invalid(
            "INVALID_CACHE_CONFIG",
            f"{field}.cache_aware_compaction.hard_token_limit",
            "hard_token_limit must be greater than 0",
        )


def check_context_tools_config(cfg: config_pb2.ContextToolsConfig, field: str) -> None:
    """The context tools' limits: none negative, the hidden fraction at most 1."""
    for name in ("max_edits_per_invocation", "min_tokens_freed", "token_budget", "protected_turns"):
        if getattr(cfg, name) < 0:
            raise invalid("INVALID_ARGUMENT", f"{field}.{name}", f"{name} must not be negative")
    fraction = cfg.max_hidden_fraction
    if not 0.0 <= fraction <= 1.0:  # a NaN fails too
        raise invalid(
            "INVALID_ARGUMENT",
            f"{field}.max_hidden_fraction",
            "max_hidden_fraction must be between 0 and 1",
        )


def check_app_config(cfg: config_pb2.AppConfig) -> None:
    check_id(cfg.app_name, "config.app_name")
    if cfg.HasField("events_compaction_config"):
        check_compaction_config(cfg.events_compaction_config, "config.events_compaction_config")
    if cfg.HasField("context_cache_config"):
        check_cache_config(cfg.context_cache_config, "config.context_cache_config")
    if cfg.HasField("context_tools"):
        check_context_tools_config(cfg.context_tools, "config.context_tools")


def check_page_size(page_size: int, field: str = "page_size") -> int:
    """AIP-158: 0 means the default (100), larger values are coerced to 1000, negative fails."""
    if page_size < 0:
        raise invalid("INVALID_ARGUMENT", field, f"{field} must not be negative")
    if page_size == 0:
        return 100
    return min(page_size, 1000)


def _word_chars(value: str, extra: str) -> bool:
    return all(ch.isalnum() or ch in extra for ch in value)


def check_agent_name(value: str, field: str = "agent_name") -> None:
    """Agent names: letters, digits, '_' and '-' (empty allowed: no agent)."""
    check_id(value, field, required=False)
    if value and not _word_chars(value, "_-"):
        raise invalid("INVALID_ID", field, f"{field} may only contain letters, digits, '_' and '-'")


def check_branch(value: str, field: str = "branch") -> None:
    """Branches: '.'-separated non-empty segments of letters, digits, '_', '-', '@' and ':'."""
    check_id(value, field, required=False)
    if not value:
        return
    for segment in value.split("."):
        if not segment or not _word_chars(segment, "_-@:"):
            raise invalid(
                "INVALID_ID",
                field,
                f"{field} must be '.'-separated segments of letters, digits, '_', '-', '@', ':'",
            )
