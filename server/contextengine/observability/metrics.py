"""The sidecar's Prometheus metrics (``prometheus-client``), in a registry of their own.

Names follow the Prometheus conventions (``contextengine_`` prefix, base units, ``_total`` for
counters, ``_seconds`` / ``_bytes`` suffixes); ``docs/design/observability.md`` has the table.
Three sources feed them:

* the handler wrapper's observer (``rpc``): RPCs by method and code, their latency;
* the engine's ``Telemetry`` hook (``telemetry``): store commits, compactions, summarizer calls,
  BuildContext tokens and cache decisions, memory ingestion;
* what the engine keeps anyway, read at scrape time (:class:`EngineCollector`): appended events
  and bytes (counted by a commit listener), subscribers, their buffered bytes, lagged cut-offs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from contextengine.engine import Engine
from contextengine.store import Change, LoggedEvent

__all__ = [
    "BUSY_CAUSES",
    "EngineCollector",
    "GcCollector",
    "GcSource",
    "GenerationPauses",
    "Metrics",
]

#: the causes of STORAGE_BUSY (errors.proto), shown at 0 from the start
BUSY_CAUSES = (
    "lock_timeout",
    "statement_timeout",
    "idle_in_transaction_timeout",
    "pool_timeout",
    "conflict",
    "held_back",
)

#: RPC and commit latencies: 0.5 ms to 10 s
_LATENCY = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
#: summarizer calls (a model call): 10 ms to 2 min
_SUMMARIZER = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: context sizes in tokens
_TOKENS = (100, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 1_000_000)


class Metrics:
    """Every metric of one sidecar, registered in :attr:`registry` (not the process-global
    one: two sidecars in one process, as in tests, keep their own counts)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.rpcs = Counter(
            "contextengine_rpcs_handled",
            "RPCs handled, by full method name and gRPC status code.",
            ("method", "code"),
            registry=r,
        )
        self.rpc_seconds = Histogram(
            "contextengine_rpc_duration_seconds",
            "Time from an RPC's start to its end, by method and status code.",
            ("method", "code"),
            buckets=_LATENCY,
            registry=r,
        )
        self.store_commit_seconds = Histogram(
            "contextengine_store_commit_duration_seconds",
            "Time a store write waits from submission to its commit (or failure).",
            ("outcome",),
            buckets=_LATENCY,
            registry=r,
        )
        self.store_busy = Counter(
            "contextengine_store_busy",
            "Calls that failed with STORAGE_BUSY (PostgreSQL answered, but a lock, a statement, "
            "a free pooled connection or an older transaction took too long), by cause.",
            ("cause",),
            registry=r,
        )
        self.delivery_held = Gauge(
            "contextengine_store_delivery_held_seconds",
            "How long committed changes have waited so far for an older transaction still in "
            "flight before they can be delivered (PostgreSQL; 0 when none wait).",
            registry=r,
        )
        self.compactions = Counter(
            "contextengine_compactions",
            "Compaction passes by outcome: started, succeeded, failed, discarded, deferred.",
            ("outcome",),
            registry=r,
        )
        self.summarizer_seconds = Histogram(
            "contextengine_summarizer_duration_seconds",
            "Summarizer calls by summarizer and outcome (ok, failed).",
            ("summarizer", "outcome"),
            buckets=_SUMMARIZER,
            registry=r,
        )
        self.context_tokens = Histogram(
            "contextengine_build_context_tokens",
            "Estimated tokens of the contexts BuildContext produced.",
            buckets=_TOKENS,
            registry=r,
        )
        self.cache_decisions = Counter(
            "contextengine_cache_decisions",
            "Prompt-cache decisions of BuildContext by action (apps with prompt caching).",
            ("action",),
            registry=r,
        )
        self.memory_entries = Counter(
            "contextengine_memory_entries",
            "Long-term memory entries changed by ingestion, by change (added, removed).",
            ("change",),
            registry=r,
        )
        self.memory_ingestions = Counter(
            "contextengine_memory_ingestions",
            "Ingestions into long-term memory (AddSessionToMemory, AddEventsToMemory, and "
            "the background ingestion after EndInvocation).",
            registry=r,
        )
        #: the children written on every write (``labels`` is a locked dict lookup per call)
        self.commit_ok = self.store_commit_seconds.labels("ok")
        self.commit_failed = self.store_commit_seconds.labels("failed")
        # Pre-made children of the label sets every sidecar has, so they show as 0 at once.
        for outcome in ("started", "succeeded", "failed", "discarded", "deferred"):
            self.compactions.labels(outcome)
        for cause in BUSY_CAUSES:
            self.store_busy.labels(cause)
        for change in ("added", "removed"):
            self.memory_entries.labels(change)


class EngineCollector(Collector):
    """Counts appended events and bytes (a commit listener on the engine's store) and reads
    the subscription gauges from the broadcaster when scraped."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.events = 0
        self.event_bytes = 0
        self._unlisten = engine.store.add_commit_listener(self._committed)

    def _committed(self, changes: Sequence[Change]) -> None:
        events = 0
        size = 0
        for change in changes:
            if isinstance(change, LoggedEvent):
                events += 1
                size += change.event.ByteSize()
        self.events += events
        self.event_bytes += size

    def close(self) -> None:
        self._unlisten()

    def collect(self) -> Iterator[Metric]:
        broadcaster = self._engine.broadcaster
        yield CounterMetricFamily(
            "contextengine_events_appended",
            "Events committed to the store (appended by clients, and summaries).",
            value=self.events,
        )
        yield CounterMetricFamily(
            "contextengine_event_bytes_appended",
            "Encoded bytes of the events committed to the store.",
            value=self.event_bytes,
        )
        yield GaugeMetricFamily(
            "contextengine_subscribers",
            "Open subscriptions (SubscribeEvents and WatchSessionState streams).",
            value=broadcaster.active,
        )
        yield GaugeMetricFamily(
            "contextengine_subscriber_buffered_bytes",
            "Encoded bytes of events waiting in subscribers' buffers.",
            value=broadcaster.buffered_bytes(),
        )
        yield CounterMetricFamily(
            "contextengine_subscribers_lagged",
            "Subscriptions ended with SUBSCRIBER_LAGGED (their buffer exceeded its budget).",
            value=broadcaster.lagged_total,
        )
        problem = self._engine.storage_problem
        yield GaugeMetricFamily(
            "contextengine_store_writable",
            "1 while the store can write, 0 while it cannot (full disk, I/O errors).",
            value=1 if problem is None else 0,
        )


class GenerationPauses(Protocol):
    """One generation's collections and their pauses so far."""

    @property
    def collections(self) -> int: ...

    @property
    def pause_seconds(self) -> float: ...

    @property
    def buckets(self) -> Sequence[int]:
        """Per bound of ``GcSource.pause_buckets``, the pauses at most that long (cumulative)."""
        ...


class GcSource(Protocol):
    """What the garbage collector's metrics read when scraped: the process's policy
    (``contextengine.process.gc_policy.GcPolicy``, which sits above this layer) has it."""

    @property
    def pause_buckets(self) -> Sequence[float]:
        """The upper bounds of the pause histogram's buckets, seconds (+Inf not included)."""
        ...

    @property
    def stats(self) -> Sequence[GenerationPauses]:
        """By generation, youngest first."""
        ...

    @property
    def frozen_objects(self) -> int: ...

    @property
    def thaws(self) -> int: ...


class GcCollector(Collector):
    """The garbage collector's collections and pauses by generation, and what is frozen, read
    from the process's garbage-collector policy (a :class:`GcSource`) when scraped."""

    def __init__(self, policy: GcSource) -> None:
        self._policy = policy

    def collect(self) -> Iterator[Metric]:
        policy = self._policy
        pauses = HistogramMetricFamily(
            "contextengine_gc_pause_seconds",
            "Pauses of the garbage collector (the whole process stops), by generation "
            "(2: a full collection).",
            labels=("generation",),
        )
        for generation, stats in enumerate(policy.stats):
            buckets = [
                (str(bound), count)
                for bound, count in zip(policy.pause_buckets, stats.buckets, strict=True)
            ]
            buckets.append(("+Inf", stats.collections))
            pauses.add_metric([str(generation)], buckets, stats.pause_seconds)
        yield pauses
        yield GaugeMetricFamily(
            "contextengine_gc_frozen_objects",
            "Objects out of the garbage collector's sight (frozen after start-up and, with "
            "gc_freeze, after each full collection).",
            value=policy.frozen_objects,
        )
        yield CounterMetricFamily(
            "contextengine_gc_thaws",
            "Times the frozen objects were handed back to a full collection (gc_thaw_seconds).",
            value=policy.thaws,
        )
