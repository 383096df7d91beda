"""``MemoryService``: ingestion, search, deletion and preload of long-term memory.

Ingestion reads a session's log (through the shared ``SessionEventCache``), keeps the events that
survive its rewinds and have searchable text, and brings the index in line in one atomic
operation: entries of events no longer live are removed, new ones added; entries already
remembered are left alone (events never change), so re-adding a grown session costs what it
grew by. Ingestions of one session are serialized (a lock per session), so a slower, older read
can never undo a newer one.

``on_invocation_end`` is the hook for ``CompactionService.EndInvocation``: when the app's
``MemoryConfig.ingest_on_end_invocation`` is set it schedules the session's ingestion in the
background and returns at once (one task per session; a trigger arriving while it runs makes it
run once more afterwards). Failures are logged, never raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from contextengine.core.context import live_indices
from contextengine.core.errors import ContextEngineError
from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.memory.documents import Entry, entry_from_event, live_entries
from contextengine.memory.index import Hit, MemoryIndex, Ranking
from contextengine.memory.preload import (
    DEFAULT_MAX_RESULTS,
    DEFAULT_PRELOAD_TEMPLATE,
    render_preload,
)
from contextengine.memory.text import MAX_QUERY_CHARS, query_terms
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.runtime.locks import KeyedLocks
from contextengine.store import SessionKey
from contextengine.v1 import config_pb2

__all__ = ["AddEventsOutcome", "IngestOutcome", "MemoryService", "Preload", "SearchResult"]

_LOG = logging.getLogger("contextengine.memory")


@dataclass(frozen=True)
class IngestOutcome:
    #: the session's entries after the ingestion
    entry_count: int
    added: int
    removed: int
    #: the session's last sequence when it was read
    last_sequence: int


@dataclass(frozen=True)
class AddEventsOutcome:
    remembered: list[int]
    skipped: list[int]


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    ranking: Ranking


@dataclass(frozen=True)
class Preload:
    query: str
    hits: list[Hit]
    text: str


def _max_results(config: config_pb2.MemoryConfig) -> int:
    return config.max_results if config.HasField("max_results") else DEFAULT_MAX_RESULTS


class MemoryService:
    """Long-term memory over a ``MemoryIndex`` (see the module docstring)."""

    def __init__(
        self,
        index: MemoryIndex,
        events: SessionEventCache,
        configs: AppConfigs,
        *,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.index = index
        #: told of every ingestion's added and removed entries (``core.telemetry``)
        self._telemetry = telemetry
        self._events = events
        self._configs = configs
        self._locks: KeyedLocks[SessionKey] = KeyedLocks()
        self._tasks: dict[SessionKey, asyncio.Task[None]] = {}
        self._again: set[SessionKey] = set()
        self._closed = False
        #: background ingestions finished (successfully or not), for tests and diagnostics
        self.background_runs = 0
        self.background_failures = 0

    async def open(self) -> None:
        await self.index.open()
        self._closed = False

    async def close(self) -> None:
        """Cancels background ingestions, then closes the index. Idempotent."""
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.index.close()

    async def _config(self, app_name: str) -> config_pb2.MemoryConfig:
        config = await self._configs.get(app_name)
        return config.memory if config is not None else config_pb2.MemoryConfig()

    # Ingestion -----------------------------------------------------------------------------

    async def add_session(self, key: SessionKey) -> IngestOutcome:
        """Makes the session's entries exactly its remembered events (SESSION_NOT_FOUND)."""
        async with self._locks.hold(key):
            # The index first: ``log.events`` is the cache's own list, which other calls extend,
            # so it is used without awaiting in between (every event considered is counted in
            # ``last_sequence``).
            known = await self.index.remembered(key)
            log = await self._events.log(key)
            skip = frozenset(known.items())
            sequences, new = live_entries(log.events, skip)
            live = set(sequences)
            remove = sorted(sequence for sequence in known if sequence not in live)
            # A remembered sequence whose event id changed (the session was deleted and created
            # again under the same id) is not in `skip`: its new entry replaces the old one.
            if remove or new:
                await self.index.apply(key, remove, new)
            self._telemetry.memory_ingested(len(new), len(remove))
            return IngestOutcome(
                entry_count=len(sequences),
                added=len(new),
                removed=len(remove),
                last_sequence=log.last_sequence,
            )

    async def add_events(self, key: SessionKey, sequences: Sequence[int]) -> AddEventsOutcome:
        """Remembers the chosen events (SESSION_NOT_FOUND, EVENT_NOT_FOUND)."""
        wanted = sorted(set(sequences))
        async with self._locks.hold(key):
            log = await self._events.log(key)
            beyond = [sequence for sequence in wanted if sequence > log.last_sequence]
            if beyond:
                raise ContextEngineError(
                    "EVENT_NOT_FOUND",
                    f"the session has no event with sequence {beyond[0]}"
                    f" (its last is {log.last_sequence})",
                    sequence=beyond[0],
                )
            events = log.events
            live = {events[index].sequence for index in live_indices(events)}
            known = await self.index.remembered(key)
            remembered: list[int] = []
            skipped: list[int] = []
            new: list[Entry] = []
            for sequence in wanted:
                event = events[sequence - 1]
                if event.sequence != sequence:  # pragma: no cover - the log has no gaps
                    raise RuntimeError(f"log out of order at sequence {sequence}")
                entry = entry_from_event(event) if sequence in live else None
                if entry is None:
                    skipped.append(sequence)
                    continue
                remembered.append(sequence)
                if known.get(sequence) != event.id:
                    new.append(entry)
            if new:
                await self.index.apply(key, [], new)
            self._telemetry.memory_ingested(len(new), 0)
            return AddEventsOutcome(remembered, skipped)

    # Search and deletion -------------------------------------------------------------------

    async def search(self, app_name: str, user_id: str, query: str, limit: int = 0) -> SearchResult:
        """The best memories of the user for ``query``; ``limit`` 0 = the app's default."""
        if limit <= 0:
            limit = _max_results(await self._config(app_name))
        return SearchResult(await self._find(app_name, user_id, query, limit), self.index.ranking)

    async def _find(self, app_name: str, user_id: str, query: str, limit: int) -> list[Hit]:
        terms = query_terms(query[:MAX_QUERY_CHARS])
        return await self.index.search(app_name, user_id, terms, limit) if terms else []

    async def delete(self, app_name: str, user_id: str, session_id: str = "") -> int:
        if session_id:
            return await self.index.delete_session(SessionKey(app_name, user_id, session_id))
        return await self.index.delete_user(app_name, user_id)

    # Preload -------------------------------------------------------------------------------

    async def preload(self, key: SessionKey, query: str) -> Preload:
        """What ADK's preload-memory tool would inject for ``query``. A failing search (or
        configuration read) is logged and gives no memories (as in ADK)."""
        query = query[:MAX_QUERY_CHARS]
        if not query.strip():
            return Preload(query, [], "")
        try:
            config = await self._config(key.app_name)
            hits = await self._find(key.app_name, key.user_id, query, _max_results(config))
        except Exception:
            _LOG.warning("memory preload failed (query length: %d)", len(query), exc_info=True)
            return Preload(query, [], "")
        template = (
            config.preload_template
            if config.HasField("preload_template")
            else DEFAULT_PRELOAD_TEMPLATE
        )
        return Preload(query, hits, render_preload(hits, template, config.preload_time_format))

    # Background ingestion ------------------------------------------------------------------

    async def on_invocation_end(self, key: SessionKey) -> bool:
        """Schedules the session's ingestion when its app asks for it; True when scheduled.
        Returns at once and never raises."""
        if self._closed:
            return False
        try:
            config = await self._config(key.app_name)
        except Exception:
            _LOG.warning("memory: cannot read the configuration of %r", key.app_name, exc_info=True)
            return False
        if not config.ingest_on_end_invocation:
            return False
        if key in self._tasks:
            self._again.add(key)
            return True
        self._tasks[key] = asyncio.get_running_loop().create_task(
            self._ingest_in_background(key), name=f"memory-ingest {key.session_id}"
        )
        return True

    async def wait_idle(self) -> None:
        """Returns once no background ingestion is running (for tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def _ingest_in_background(self, key: SessionKey) -> None:
        try:
            while True:
                self._again.discard(key)
                try:
                    await self.add_session(key)
                except ContextEngineError as err:
                    self.background_failures += 1
                    level = (
                        logging.DEBUG
                        if err.reason in ("SESSION_NOT_FOUND", "SHUTTING_DOWN")
                        else logging.WARNING
                    )
                    _LOG.log(level, "memory: ingestion of %s failed: %s", key, err.message)
                except Exception:
                    self.background_failures += 1
                    _LOG.warning("memory: ingestion of %s failed", key, exc_info=True)
                self.background_runs += 1
                if key not in self._again or self._closed:
                    return
        finally:
            self._tasks.pop(key, None)
            self._again.discard(key)
