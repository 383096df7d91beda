"""``EngineSettings``: how the engine runs, whatever serves it (the sidecar or a Python program)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from annotated_types import Gt, Interval

from contextengine.core.setting import setting
from contextengine.memory import FtsMode
from contextengine.subscriptions.pacing import LivePacer

#: the SQLite file ``contextengine serve`` uses without flags
DEFAULT_DB = "contextengine.db"
#: the ``db`` of a non-persistent in-process store
MEMORY_DB = ":memory:"


@dataclass(frozen=True)
class EngineSettings:
    """The engine's part of ``ServerSettings`` (same fields, same defaults). Every field is a
    :func:`~contextengine.core.setting.setting`: its flag, environment variable and configuration
    file key are derived from it (``contextengine.config``), and so is the check of its range
    (the ``Annotated`` constraints). Values no engine can run with raise ValueError when the
    settings are made."""

    db: str = setting(
        DEFAULT_DB,
        "SQLite file, or :memory: for a throw-away store; one sidecar per file (it holds "
        "<db>.lock; a second one exits with status 1); or a postgresql:// URL (a PostgreSQL "
        "database any number of sidecars share; its password is masked in logs)",
    )
    durability: Literal["normal", "full"] = setting(
        "normal",
        "normal: acknowledged events survive a crash of the process; full: also power loss "
        "(slower)",
    )
    postgres_pool_size: Annotated[int, Gt(0)] = setting(
        10,
        "with a postgresql:// --db: the most database connections this sidecar opens (each "
        "call in progress holds one for its transaction)",
    )
    postgres_lock_timeout_seconds: Annotated[float, Gt(0)] = setting(
        2.0,
        "with a postgresql:// --db: the longest a statement of this sidecar waits for a lock "
        "another transaction holds; beyond, the call fails with UNAVAILABLE / STORAGE_BUSY and "
        "the health stays SERVING",
    )
    postgres_statement_timeout_seconds: Annotated[float, Gt(0)] = setting(
        30.0,
        "with a postgresql:// --db: the longest one statement of this sidecar runs (then "
        "STORAGE_BUSY); a server silent 5 s longer counts as unreachable",
    )
    postgres_idle_tx_timeout_seconds: Annotated[float, Gt(0)] = setting(
        5.0,
        "with a postgresql:// --db: the longest a transaction of this sidecar stays open "
        "between two statements before PostgreSQL ends it (its "
        "idle_in_transaction_session_timeout: bounds how long a stopped sidecar holds back the "
        "delivery of every sidecar's commits)",
    )
    subscriber_buffer: Annotated[int, Gt(0)] = setting(
        1024, "changes a subscriber may have waiting before it is ended with SUBSCRIBER_LAGGED"
    )
    subscriber_buffer_bytes: Annotated[int, Gt(0)] = setting(
        32 * 1024 * 1024,
        "bytes of events (encoded) a subscriber may have waiting before its stream ends with "
        "SUBSCRIBER_LAGGED, resumable from its cursor: what one stalled subscriber can pin in "
        "memory",
    )
    heartbeat_seconds: Annotated[float, Gt(0)] = setting(
        15.0,
        "seconds between heartbeats of idle subscription streams, unless a request asks otherwise",
    )
    gemini_base_url: str | None = setting(
        None,
        "Gemini endpoint for Gemini summarizers and managed caches (unset: google-genai's "
        "default, or GOOGLE_GEMINI_BASE_URL); the key comes from GEMINI_API_KEY or GOOGLE_API_KEY",
    )
    compaction_backoff_seconds: Annotated[float, Gt(0)] = setting(
        2.0, "first backoff (seconds) after a failed summary; doubles per consecutive failure"
    )
    memory_fts: FtsMode = setting(
        "auto",
        "memory search with a SQLite store: auto uses FTS5 when SQLite has it, on requires it, "
        "off searches without it (instr matching, ranked by matched terms)",
    )
    gemini_cache_timeout_seconds: Annotated[float, Gt(0)] = setting(
        10.0, "time limit (seconds) of one managed Gemini cache call (create or delete)"
    )
    subscription_max_hold_seconds: Annotated[float, Gt(0)] = setting(
        0.05,
        "when the event loop is busy, the longest a batched subscriber waits for its next live "
        "message, in milliseconds (lower: fresher deliveries, more messages, more load)",
        flag="--subscription-max-hold-ms",
        scale=0.001,
    )
    subscription_target_load: Annotated[float, Interval(gt=0, le=1)] = setting(
        0.75,
        "the share of its time the event loop's thread may spend (running or waiting for a CPU) "
        "before batched subscribers are paced, in (0, 1]; lower: pacing starts earlier",
    )

    def __post_init__(self) -> None:
        self.pacer()  # the pacer's own checks (ValueError), so that no engine is half built

    def pacer(self) -> LivePacer:
        """A new pacer of batched subscribers with these settings."""
        return LivePacer(
            target_demand=self.subscription_target_load,
            max_hold_seconds=self.subscription_max_hold_seconds,
        )
