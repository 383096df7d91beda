"""Keeps recently used sessions' logs in memory and tops them up with what was appended since.

Where the store has other writers (PostgreSQL shared by several sidecars), the cache asks the
store for the session's head (last sequence, creation time) on every use and reads only the events
after the cached ones, so it is never stale: a deleted and re-created session is detected by its
creation time. Where this process is the store's only writer (``EventStore.sole_writer``: SQLite,
memory), every change reaches the cache's commit listener in its commit's own step, so a cached
session's head is known without asking: it is read once, when the session is cached, and then
followed from the commits (a session deleted is dropped; a head read that a commit of the same
session overtook is not trusted, and the next use reads it again), and the events a commit
carries (as stored) are added to the cached log at once instead of being read back. A steady
BuildContext then reads nothing from the store, grown or not (the head read alone was a round
trip to a reader thread: more CPU than the rest of the call). Memory is bounded by the total
number of cached events (least recently used sessions are dropped first).

Token measures (what BuildContext's token estimate costs): each cached session has a
:class:`RememberingCounter`, its contents' (tokens, characters) by digest, which the context views
over the log count with (``SessionLog.counter``), so no content is tokenized twice. They are
persisted in the store (``content_measures``) and read back when a view over the session's log is
first built in this process (``read_measures``: the context builder asks for the measures of the
contents its view holds, or for all of them when the view holds most of the log), so the first
BuildContext after a restart tokenizes only what no earlier process measured and reads no more
counts than its view needs. Off every caller's path:

* events appended to a cached session are read into the cache and measured in the background (a
  task on the event loop, ``measure_seconds`` after the first unmeasured commit, so that the
  appends of a while go together and a BuildContext right after them measures its own; in small
  chunks), as read from the store (the JSON of call arguments
  is counted in the order the store gives the keys back, which may not be the order the caller
  sent: measuring the appended objects themselves would count what no view counts) and as the
  view will emit them (``adk-`` call ids removed: the ids are not counted, so one count serves
  both digests);
* what was measured is written in batches: at ``flush_at`` new measures, else ``flush_seconds``
  after the first unwritten one, when a session leaves the cache, and at ``close``. A write that
  fails is logged and forgotten (a later process counts those contents again).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial

from contextengine.core.context import Item, item_from_event
from contextengine.core.errors import ContextEngineError
from contextengine.core.tokens import (
    Measure,
    RememberingCounter,
    TokenCounter,
    content_digest,
    default_counter,
)
from contextengine.store import (
    Change,
    EventFilter,
    EventStore,
    LoggedEvent,
    SessionDeleted,
    SessionKey,
    StoredSession,
)
from contextengine.v1 import content_pb2, event_pb2

_LOG = logging.getLogger(__name__)

_PAGE = 1000

#: the prefix of the call ids a view removes (``core.context``: ADK's client-side ids)
_ADK_CALL_ID_PREFIX = "adk-"

#: appended events measured in one step of the background task (then it lets others run)
_MEASURE_CHUNK = 64


@dataclass
class _Entry:
    create_time: float
    measures: RememberingCounter
    last_sequence: int = 0
    events: list[event_pb2.Event] = field(default_factory=list)
    #: the context pipeline's per-event facts, parallel to ``events`` (events never change)
    items: list[Item] = field(default_factory=list)
    #: bumped whenever the cached list is replaced rather than extended
    generation: int = 0
    #: the timer of the next write of ``measures``' new ones (None: none pending)
    flush_timer: asyncio.TimerHandle | None = None
    #: how many of ``events`` the background task has measured
    measured_events: int = 0
    #: every measure kept in the store for the session has been read into ``measures``
    measures_read: bool = False
    #: the session's committed last sequence, followed from the commits (sole-writer stores
    #: only; None: unknown, the next use reads the head)
    head: int | None = None


@dataclass(frozen=True)
class SessionLog:
    events: list[event_pb2.Event]
    items: list[Item]
    last_sequence: int
    #: changes when the cached log was rebuilt from scratch (views over it must rebuild too)
    generation: int
    #: the session's creation time: a session deleted and created again has another one
    create_time: float
    #: the session's token counter (remembers, and persists, what it measured)
    counter: RememberingCounter
    #: the store may keep measures ``counter`` has not read (``SessionEventCache.read_measures``)
    measures_unread: bool


class SessionEventCache:
    def __init__(
        self,
        store: EventStore,
        max_events: int = 500_000,
        *,
        counter: TokenCounter | None = None,
        flush_at: int = 512,
        flush_seconds: float = 1.0,
        measure_seconds: float = 0.5,
    ) -> None:
        self._store = store
        self._max_events = max_events
        self._counter = counter if counter is not None else default_counter()
        self._flush_at = flush_at
        self._flush_seconds = flush_seconds
        self._measure_seconds = measure_seconds
        self._measure_timer: asyncio.TimerHandle | None = None
        self._entries: OrderedDict[SessionKey, _Entry] = OrderedDict()
        self._cached_events = 0
        self._generations = 0
        #: cached sessions with events appended since the background task measured them: the
        #: last sequence committed
        self._appended: dict[SessionKey, int] = {}
        self._measuring: asyncio.Task[None] | None = None
        self._writes: set[asyncio.Task[None]] = set()
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False
        #: heads come from the commits, not the store (``EventStore.sole_writer``)
        self._follow_heads = store.sole_writer
        #: sessions whose head is being read (how many reads), and those of them a commit
        #: changed meanwhile (what such a read returned may be older than the commit)
        self._reading: dict[SessionKey, int] = {}
        self._overtaken: set[SessionKey] = set()

    @property
    def counter(self) -> TokenCounter:
        """The counter the sessions' counters measure with (its ``name`` is theirs)."""
        return self._counter

    async def log(self, key: SessionKey) -> SessionLog:
        """The session's whole log (raises SESSION_NOT_FOUND)."""
        if self._unsubscribe is None and not self._closed:
            self._unsubscribe = self._store.add_commit_listener(self._on_commit)
        entry = self._entries.get(key)
        created = False
        if entry is not None and entry.head is not None:
            # Followed from the commits since it was read: nothing to ask the store.
            last_sequence = entry.head
        else:
            head, trusted = await self._read_head(key)
            last_sequence = head.last_sequence
            entry = self._entries.get(key)
            if (
                entry is None
                or entry.create_time != head.create_time
                or entry.last_sequence > head.last_sequence
            ):
                self._drop(key)
                self._generations += 1
                entry = _Entry(
                    create_time=head.create_time,
                    measures=self._new_counter(key),
                    generation=self._generations,
                )
                self._entries[key] = entry
                created = True
            if trusted:
                entry.head = last_sequence
        self._entries.move_to_end(key)
        await self._top_up(key, entry, last_sequence)
        if created:
            # What was there before the session was cached is measured by whoever needs it
            # (a view); the background task measures only what is appended from now on.
            entry.measured_events = len(entry.events)
        self._evict(keep=key)
        return SessionLog(
            entry.events,
            entry.items,
            entry.last_sequence,
            entry.generation,
            entry.create_time,
            entry.measures,
            not entry.measures_read,
        )

    async def _read_head(self, key: SessionKey) -> tuple[StoredSession, bool]:
        """The session's head from the store, and whether the cache may follow it from the
        commits from now on (a sole-writer store, and no commit of the session while it was
        read)."""
        self._reading[key] = self._reading.get(key, 0) + 1
        try:
            head = await self._store.get_session(key, EventFilter(num_recent_events=0))
        finally:
            overtaken = key in self._overtaken
            readers = self._reading.pop(key) - 1
            if readers:
                self._reading[key] = readers
            else:
                self._overtaken.discard(key)
        return head, self._follow_heads and not overtaken

    def cached(self, key: SessionKey) -> bool:
        """Whether the session's log is cached (its next ``log`` reads only what is new)."""
        return key in self._entries

    async def read_measures(
        self, key: SessionKey, counter: RememberingCounter, digests: Collection[bytes] | None
    ) -> None:
        """Reads the measures the store keeps for the session's contents of ``digests`` (None:
        all of them) into ``counter`` (the session's: ``SessionLog.counter``)."""
        kept = await self._store.get_content_measures(key, self._counter.name, digests)
        counter.remember(kept)
        entry = self._entries.get(key)
        if digests is None and entry is not None and entry.measures is counter:
            entry.measures_read = True

    def invalidate(self, key: SessionKey) -> None:
        self._drop(key)

    async def _top_up(self, key: SessionKey, entry: _Entry, last_sequence: int) -> None:
        """Reads the events after ``entry``'s up to ``last_sequence`` into it."""
        while entry.last_sequence < last_sequence:
            page, _ = await self._store.list_events(key, entry.last_sequence, _PAGE)
            if not page:
                break
            # Another caller (or a commit) may have topped the entry up while this one awaited
            # the store: keep only what is still missing, so the list stays one event per
            # sequence.
            self._extend(key, entry, [e for e in page if e.sequence > entry.last_sequence])

    def _extend(self, key: SessionKey, entry: _Entry, fresh: Sequence[event_pb2.Event]) -> None:
        """Appends ``fresh`` (the events after ``entry``'s, in order) to ``entry``."""
        if not fresh:
            return
        entry.events.extend(fresh)
        entry.items.extend(item_from_event(event) for event in fresh)
        entry.last_sequence = fresh[-1].sequence
        if self._entries.get(key) is entry:
            self._cached_events += len(fresh)

    async def close(self) -> None:
        """Measures what was appended and not measured yet (nothing more is queued), then writes
        the measures not written yet and waits for the writes. Idempotent; the store must still
        be open."""
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._measure_timer is not None:
            self._measure_timer.cancel()
            self._start_measuring()
        measuring, self._measuring = self._measuring, None
        if measuring is not None:
            await asyncio.gather(measuring, return_exceptions=True)
        for key, entry in self._entries.items():
            self._flush(key, entry)
        while self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    # -- token measures --------------------------------------------------------------------------

    def _new_counter(self, key: SessionKey) -> RememberingCounter:
        # The callback names the session, not the counter: a dropped session's counter (and the
        # measures it holds) is then freed by its reference count, even once frozen.
        return RememberingCounter(self._counter, on_measured=partial(self._measured, key))

    def _measured(self, key: SessionKey, counter: RememberingCounter) -> None:
        entry = self._entries.get(key)
        if entry is not None and entry.measures is counter:
            self._schedule_flush(key, entry)

    def _schedule_flush(self, key: SessionKey, entry: _Entry) -> None:
        if entry.measures.pending >= self._flush_at:
            self._flush(key, entry)
        elif entry.flush_timer is None and entry.measures.pending:
            loop = asyncio.get_running_loop()
            entry.flush_timer = loop.call_later(self._flush_seconds, self._flush, key, entry)

    def _flush(self, key: SessionKey, entry: _Entry) -> None:
        """Writes ``entry``'s new measures in the background (a task ``close`` waits for)."""
        if entry.flush_timer is not None:
            entry.flush_timer.cancel()
            entry.flush_timer = None
        measured = entry.measures.take_measured()
        if not measured:
            return
        task = asyncio.get_running_loop().create_task(self._write(key, measured))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, key: SessionKey, measured: dict[bytes, Measure]) -> None:
        try:
            await self._store.put_content_measures(key, self._counter.name, measured)
        except Exception as error:  # a cache: the contents are counted again next time
            _LOG.warning(
                "token measures of %d contents not written (%s: %s)",
                len(measured),
                type(error).__name__,
                error,
            )

    def _on_commit(self, changes: Sequence[Change]) -> None:
        """Queues the cached sessions that got events for measuring in the background; follows
        the heads of those whose head it follows, adding the committed events to them; drops
        deleted sessions (so a session made again is never topped up as the old one)."""
        queued = False
        extended: SessionKey | None = None
        for change in changes:
            if change.key in self._reading:
                self._overtaken.add(change.key)
            if isinstance(change, LoggedEvent):
                entry = self._entries.get(change.key)
                if entry is not None:
                    sequence = change.event.sequence
                    self._appended[change.key] = max(sequence, self._appended.get(change.key, 0))
                    if entry.head is not None:
                        entry.head = max(entry.head, sequence)
                        if sequence == entry.last_sequence + 1:
                            # The commit carries the event as stored: no need to read it back.
                            self._extend(change.key, entry, [change.event])
                            extended = change.key
                    queued = True
            elif isinstance(change, SessionDeleted):
                self._appended.pop(change.key, None)
                self._drop(change.key)
        if extended is not None:
            self._evict(keep=extended)
        if queued and not self._closed and self._measure_timer is None:
            # Later, so that the appends of a while are read and measured together, and a
            # BuildContext soon after them (which measures what its view gets) goes first.
            loop = asyncio.get_running_loop()
            self._measure_timer = loop.call_later(self._measure_seconds, self._start_measuring)

    def _start_measuring(self) -> None:
        self._measure_timer = None
        if self._measuring is None or self._measuring.done():
            self._measuring = asyncio.get_running_loop().create_task(self._measure_appended())

    async def _measure_appended(self) -> None:
        """Tops the queued sessions' entries up from the store and measures what they got."""
        while self._appended:
            key = next(iter(self._appended))
            last_sequence = self._appended.pop(key)
            entry = self._entries.get(key)
            if entry is None:
                continue
            try:
                # the commit told the head: no need to ask the store for it
                await self._top_up(key, entry, last_sequence)
            except ContextEngineError:  # deleted meanwhile, or the store cannot be read
                continue
            if self._entries.get(key) is not entry:
                continue
            while entry.measured_events < len(entry.events):
                start = entry.measured_events
                chunk = entry.events[start : start + _MEASURE_CHUNK]
                entry.measured_events = start + len(chunk)
                _measure_as_emitted(
                    entry.measures,
                    [event.content for event in chunk if event.HasField("content")],
                )
                self._schedule_flush(key, entry)
                await asyncio.sleep(0)

    # -- memory bound ----------------------------------------------------------------------------

    def _drop(self, key: SessionKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._cached_events -= len(entry.events)
            if not self._closed:
                self._flush(key, entry)

    def _evict(self, keep: SessionKey) -> None:
        while self._cached_events > self._max_events and len(self._entries) > 1:
            oldest = next(iter(self._entries))
            if oldest == keep:
                self._entries.move_to_end(keep)
                continue
            self._drop(oldest)


def _measure_as_emitted(
    counter: RememberingCounter, contents: Sequence[content_pb2.Content]
) -> None:
    """Measures ``contents`` and remembers the same measures for each one's form without
    ``adk-`` call and response ids (what a view emits unless ids are preserved)."""
    measures = counter.measure_contents(contents)
    for content, measure in zip(contents, measures, strict=True):
        stripped = _without_adk_ids(content)
        if stripped is not None:
            counter.learn(content_digest(stripped), measure)


def _without_adk_ids(content: content_pb2.Content) -> content_pb2.Content | None:
    """A copy of ``content`` without ``adk-`` function call / response ids (None: it has none)."""
    copy: content_pb2.Content | None = None
    for index, part in enumerate(content.parts):
        if part.HasField("function_call"):
            call_id = part.function_call.id
        elif part.HasField("function_response"):
            call_id = part.function_response.id
        else:
            continue
        if not call_id.startswith(_ADK_CALL_ID_PREFIX):
            continue
        if copy is None:
            copy = content_pb2.Content()
            copy.CopyFrom(content)
        copied = copy.parts[index]
        if copied.HasField("function_call"):
            copied.function_call.ClearField("id")
        else:
            copied.function_response.ClearField("id")
    return copy
