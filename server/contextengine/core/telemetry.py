"""``Telemetry``: what the engine's components tell about their work, without knowing who listens.

The components below the transport (the store, compaction, memory, prompt caching, the engine)
must not import Prometheus or OpenTelemetry (``tests/test_layers.py``). They are handed a
``Telemetry`` instead (``open_engine(telemetry=...)``) and call its methods where the work
happens; this base class does nothing, so an engine without observability pays one method call.
The sidecar's ``contextengine.observability`` subclasses it to count (Prometheus) and trace
(OpenTelemetry spans). Each method is called on the event loop, never with event contents.

What is not here is read at scrape time instead: subscribers, buffered bytes and lagged cut-offs
(``Broadcaster``), appended events and bytes (the store's commit listeners).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext

__all__ = ["NO_TELEMETRY", "Attributes", "Telemetry"]

#: span attributes: small scalar values (ids, names, counts), never contents
Attributes = Mapping[str, str | int | float | bool]

_NULL: AbstractContextManager[None] = nullcontext()


class Telemetry:
    """The neutral recorder: every method is a no-op. Subclasses override what they record."""

    def span(self, name: str, attributes: Attributes | None = None) -> AbstractContextManager[None]:
        """A unit of work nested in the caller's (the RPC's) span: ``with telemetry.span(...)``.
        Names used: ``store.commit``, ``summarizer.summarize``, ``gemini.caches.create`` and
        ``gemini.caches.delete``."""
        return _NULL

    def store_commit(self, seconds: float, ok: bool) -> None:
        """A write of the store was committed (or failed) ``seconds`` after it was submitted."""

    def store_busy(self, cause: str) -> None:
        """A call failed because the database was busy (STORAGE_BUSY), for ``cause``
        (``lock_timeout``, ``statement_timeout``, ``pool_timeout``, ...)."""

    def store_delivery_held(self, seconds: float) -> None:
        """Committed changes have waited ``seconds`` so far for an older transaction still in
        flight (PostgreSQL; 0 when none wait). Told after every read of the change feed."""

    def compaction(self, outcome: str) -> None:
        """A compaction pass: ``started`` (a summarizer is asked), then ``succeeded``,
        ``failed`` (the summarizer failed or returned nothing) or ``discarded`` (the log moved);
        or ``deferred`` (the cache-aware policy postponed a planned compaction)."""

    def summarizer_call(self, summarizer: str, seconds: float, ok: bool) -> None:
        """One summarizer call of ``summarizer`` (its name) took ``seconds``."""

    def context_built(self, tokens: int, cache_action: str) -> None:
        """BuildContext produced a context of ``tokens`` (estimated); ``cache_action`` is the
        prompt-cache decision's action name ('' for apps without prompt caching)."""

    def memory_ingested(self, added: int, removed: int) -> None:
        """An ingestion into long-term memory added and removed that many entries."""


#: the default recorder of an engine without observability
NO_TELEMETRY = Telemetry()
