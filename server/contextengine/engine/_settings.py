"""``EngineSettings``: how the engine runs, whatever serves it (the sidecar or a Python program)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from contextengine.memory import FtsMode
from contextengine.subscriptions.pacing import LivePacer

#: the SQLite file ``contextengine serve`` uses without flags
DEFAULT_DB = "contextengine.db"
#: the ``db`` of a non-persistent in-process store
MEMORY_DB = ":memory:"


@dataclass(frozen=True)
class EngineSettings:
    """The engine's part of ``ServerSettings`` (same fields, same defaults). Values no engine can
    run with raise ValueError when the settings are made."""

    #: SQLite file path, or ``:memory:`` for a non-persistent in-process store; one process per
    #: file (opening fails with ``DatabaseLockedError`` while another holds ``<db>.lock``)
    db: str = DEFAULT_DB
    #: "normal": survives a crash of the process; "full": also survives power loss (slower)
    durability: Literal["normal", "full"] = "normal"
    #: changes a subscriber may have waiting before it is ended with SUBSCRIBER_LAGGED
    subscriber_buffer: int = 1024
    #: bytes of events (encoded) a subscriber may have waiting before it is ended with
    #: SUBSCRIBER_LAGGED: what one stalled subscriber can pin in memory
    subscriber_buffer_bytes: int = 32 * 1024 * 1024
    #: seconds between heartbeats of idle subscription streams, unless the request says otherwise
    heartbeat_seconds: float = 15.0
    #: Gemini endpoint for Gemini summarizers and managed caches (None: google-genai's default,
    #: or the GOOGLE_GEMINI_BASE_URL environment variable); the key comes from GEMINI_API_KEY or
    #: GOOGLE_API_KEY
    gemini_base_url: str | None = None
    #: first backoff (seconds) after a failed summary; doubles per consecutive failure
    compaction_backoff_seconds: float = 2.0
    #: memory search with a SQLite store: "auto" uses FTS5 when SQLite has it, "on" requires
    #: it, "off" searches without it (instr matching, ranked by matched terms)
    memory_fts: FtsMode = "auto"
    #: time limit (seconds) of one managed Gemini cache call (create or delete)
    gemini_cache_timeout_seconds: float = 10.0
    #: when the event loop is busy, the longest a batched subscriber waits for its next live
    #: message (seconds); lower: fresher deliveries, more messages, less loop time for the rest
    subscription_max_hold_seconds: float = 0.05
    #: the share of its time the event loop's thread may spend (running or waiting for a CPU)
    #: before batched subscribers are paced, in (0, 1]; lower: pacing starts earlier
    subscription_target_load: float = 0.75

    def __post_init__(self) -> None:
        self.pacer()  # the pacer's own checks (ValueError), so that no engine is half built

    def pacer(self) -> LivePacer:
        """A new pacer of batched subscribers with these settings."""
        return LivePacer(
            target_demand=self.subscription_target_load,
            max_hold_seconds=self.subscription_max_hold_seconds,
        )
