"""The ``EventStore`` interface every storage backend implements, and the protocols it joins.

``EventStore`` is four small protocols and a life cycle (``open``, ``close``): ``EventLog``
(sessions, their events and scoped state), ``ConfigStore`` (app and session configuration),
``ContentMeasures`` (the token measures kept with a session) and ``Coordination`` (positions and
commit notifications, whether this process writes alone, the compaction lock, storage health,
the page token key). A backend implements all of them; a caller that uses one part depends on
that part's protocol. The contract below is checked by ``tests/store/contract`` (one module per
protocol), run against every backend.

The log (``EventLog``):

* A session's events get sequences 1, 2, 3, ... in append order, without gaps, even under
  concurrent appends; ``last_sequence`` is the highest one.
* ``append_events`` is atomic: all events of one call are recorded with consecutive sequences and
  their state deltas applied, or nothing is (on any error).
* Idempotency by event id: an event whose id is already recorded in the session is not recorded
  again. If its payload equals the recorded one (``contextengine.core.events.same_payload``) the
  recorded event is returned and flagged as a duplicate; otherwise EVENT_ID_CONFLICT is raised.
  Duplicates are resolved before ``expected_last_sequence`` is checked, and a call whose events are
  all duplicates succeeds whatever ``expected_last_sequence`` says (a retry of a committed call).
* ``expected_last_sequence`` (when not None) must equal the session's last sequence before the
  first new event, else SEQUENCE_MISMATCH.
* Events handed to ``append_events`` are already validated and normalized by the caller (id set,
  ``temp:`` keys stripped, ``partial`` events removed). A zero timestamp is replaced by the store's
  clock. The store sets ``sequence``. State deltas are split by scope
  (``contextengine.core.state.split_delta``) and applied with ``dict.update`` semantics to the app,
  user and session state in the same transaction. ``last_update_time`` becomes the timestamp of the
  last new event.
* Returned events are copies: callers may mutate them freely.
* Unknown sessions raise SESSION_NOT_FOUND; creating an existing one raises SESSION_ALREADY_EXISTS.
* Deleting a session deletes its events; app and user state stay.
* Once ``append_events`` returns, the events survive a crash of the process (kill -9).

Coordination (``Coordination``): positions and commit notifications (what subscriptions are built
on), and what the processes sharing a store agree through:

* Every recorded event has a global ``position``: a positive integer, never reused (it survives
  a restart when the store does). Position order is the log's order across sessions: a session's
  events are in sequence order, and every change a store reads back (``list_events_after_position``,
  the commit listeners) is *final*: no change committed later takes a position at or below it.
  Creating a session whose initial state has ``app:`` or ``user:`` keys also takes a position
  (a change other sessions see), so positions of events have gaps. Where one process writes
  (SQLite, memory) positions are counted in commit order; on PostgreSQL, where transactions of
  many processes commit at once, they come from the writing transaction's id and a position is
  final once every older transaction has ended (``postgres._positions``).
* ``last_position`` is the end of the final log: every change at or below it is readable (or was
  deleted), and a change committed after the call takes a higher position. With one writer it is
  the highest position taken so far (0 for a new store); on PostgreSQL it is derived from the
  oldest transaction still in flight, so it may lie above every recorded position.
* ``add_commit_listener`` registers a callback that is called on the event loop once per committed
  write (an append, a creation, a deletion; a store that commits several callers' writes in one
  transaction calls it once per session of it), with its changes (``LoggedEvent``,
  ``SessionCreated``, ``SessionDeleted``) in position order, and writes in position order. Where
  this process is the only writer it is called after the commit and before any writer of that
  transaction runs again (its call returns), so a change is notified before anyone can learn of
  it otherwise. On PostgreSQL a change with a position is told once that position is final, for
  every writer's transactions alike (after the writer's call returned: milliseconds while no
  older transaction is in flight, longer while one is); a change without one (a deletion, a
  session created without shared state) is told at once. Failed or rolled-back writes notify
  nothing. Listeners must not block, must not mutate what they receive and should not raise
  (errors are logged and ignored).
* ``sole_writer`` is True when this process is the only writer of the store (SQLite, whose file
  one sidecar holds; memory): every change to its sessions and events is then told to the commit
  listeners, so what they keep of the log is exact without asking the store again (the event
  cache follows session heads so). False where other processes write too (PostgreSQL).
* ``storage_problem`` says why the store cannot write (STORAGE_FULL / STORAGE_UNAVAILABLE), or
  None (a busy database, STORAGE_BUSY, fails calls but is not a storage problem);
  ``add_storage_listener`` registers a callback told of every change of it (on the event loop).
  The sidecar's health follows it. A store that cannot fail this way (memory) always says
  None and never calls its listeners.
* ``compaction_lock`` is held around one compaction of a session: exclusive among every process
  that shares the store (PostgreSQL: an advisory lock). Within one process the compactor already
  serialises a session's compactions, so a store only one process opens (SQLite, memory) holds
  nothing there.
* Reads that serve subscriptions return positions: ``list_logged_events`` (one session, by
  sequence), ``list_events_after_position`` (every session of an app, or of one user, by position)
  and ``get_state`` (the merged state with the last position it reflects: every change at or
  before it is included, none after it).

Configuration (``ConfigStore``):

* An app's configuration and a session's own are replaced whole (``update_time`` set by the
  store) and read back as stored; a session's goes with the session.
* ``add_config_listener`` registers a callback told when another process sharing the store
  replaced an app's or a session's configuration (``ConfigChanged``), so caches drop it.

Token measures (``ContentMeasures``): a cache of what counting a session's contents gave, kept
with the session (deleted with it); a digest already recorded keeps its numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from contextengine.core.errors import ContextEngineError
from contextengine.v1 import config_pb2, event_pb2


@dataclass(frozen=True, order=True)
class SessionKey:
    app_name: str
    user_id: str
    session_id: str


@dataclass(frozen=True)
class StoredSession:
    key: SessionKey
    #: merged state: session keys + ``user:k`` + ``app:k`` (see ``core.state.merge_state``)
    state: dict[str, Any]
    create_time: float
    last_update_time: float
    last_sequence: int
    events: list[event_pb2.Event] = field(default_factory=list)


@dataclass(frozen=True)
class EventFilter:
    """Which events ``get_session`` returns. Applied in this order: ``after_sequence``
    (``sequence > n``), ``after_timestamp`` (``timestamp >= t``), then ``num_recent_events``
    (the last N of what remains; 0 = none). Results are always in sequence order."""

    num_recent_events: int | None = None
    after_timestamp: float | None = None
    after_sequence: int | None = None


@dataclass(frozen=True)
class AppendOutcome:
    #: recorded events, in request order (duplicates as they were recorded earlier)
    events: list[event_pb2.Event]
    #: per event: True when it had been recorded before
    duplicates: list[bool]
    #: the session's last sequence after the call
    last_sequence: int


@dataclass(frozen=True)
class LoggedEvent:
    """A recorded event (with its ``sequence``), its session and its global position."""

    key: SessionKey
    event: event_pb2.Event
    position: int


@dataclass(frozen=True)
class SessionCreated:
    """A session was created. ``shared_state`` holds the ``app:`` and ``user:`` keys (prefixed)
    of its initial state: changes that other sessions of the app or user see. ``position`` is the
    position it took when ``shared_state`` is not empty, else 0."""

    key: SessionKey
    shared_state: dict[str, Any]
    position: int


@dataclass(frozen=True)
class SessionDeleted:
    """A session and its events were deleted (this takes no position)."""

    key: SessionKey


@dataclass(frozen=True)
class ConfigChanged:
    """Another process sharing the store replaced a configuration: the app's (``key`` None) or
    a session's. ``app_name`` None: any configuration may have changed (news were missed)."""

    app_name: str | None
    key: SessionKey | None = None


#: one committed change, as given to commit listeners
Change: TypeAlias = LoggedEvent | SessionCreated | SessionDeleted
#: called with the changes of one committed transaction (see the module contract)
CommitListener: TypeAlias = Callable[[Sequence[Change]], None]
#: told of configurations another process sharing the store replaced (see ``ConfigChanged``)
ConfigListener: TypeAlias = Callable[[ConfigChanged], None]
#: told why the store cannot write (None: it can again); called on the event loop
StorageListener: TypeAlias = Callable[[ContextEngineError | None], None]


@dataclass(frozen=True)
class StateAt:
    """A session's merged state and the last position it reflects."""

    state: dict[str, Any]
    position: int


class EventLog(Protocol):
    """The log: sessions, their events in sequence order, and their scoped state (the module
    contract's first part). What the engine's session operations and the compactor's summary
    appends use."""

    async def create_session(
        self,
        key: SessionKey,
        state: dict[str, Any],
        now: float,
        *,
        config: config_pb2.SessionConfig | None = None,
    ) -> StoredSession:
        """Creates a session; ``state`` is split by scope like a delta (temp keys dropped).
        ``create_time`` and ``last_update_time`` are ``now``. ``config``: the session's own
        configuration, stored with it (its ``update_time`` set to ``now``)."""

    async def get_session(self, key: SessionKey, flt: EventFilter) -> StoredSession:
        """The session with merged state and the filtered events."""

    async def list_sessions(
        self,
        app_name: str,
        user_id: str | None,
        limit: int,
        after: tuple[str, str] | None,
    ) -> list[StoredSession]:
        """Sessions ordered by (user_id, session_id), strictly after ``after`` = (user_id,
        session_id), at most ``limit``, with merged state and no events."""

    async def list_sessions_by_update(
        self,
        app_name: str,
        user_id: str | None,
        limit: int,
        after: tuple[float, str, str] | None,
    ) -> list[StoredSession]:
        """Sessions ordered by (last_update_time, user_id, session_id) ascending (google-adk's
        ``list_sessions`` order), strictly after ``after`` = (last_update_time, user_id,
        session_id), at most ``limit``, with merged state and no events."""

    async def list_app_names(self, limit: int, after: str | None) -> list[str]:
        """The apps that have sessions, in name order, strictly after ``after``, at most
        ``limit`` (read-only listing for the inspector)."""

    async def list_user_ids(self, app_name: str, limit: int, after: str | None) -> list[str]:
        """The users of ``app_name`` that have sessions, in id order, strictly after ``after``,
        at most ``limit``."""

    async def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state, keys without the ``user:`` prefix; empty when the user has none
        (unknown users included)."""

    async def delete_session(self, key: SessionKey) -> bool:
        """Deletes the session and its events; False if it did not exist."""

    async def append_events(
        self,
        key: SessionKey,
        events: Sequence[event_pb2.Event],
        expected_last_sequence: int | None,
    ) -> AppendOutcome:
        """Appends atomically (see the module contract)."""

    async def list_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[event_pb2.Event], int]:
        """Up to ``limit`` events with ``sequence > after_sequence`` in order, and the session's
        last sequence."""


class ConfigStore(Protocol):
    """Configuration: an app's and a session's own configuration, and news of what another
    process sharing the store replaced (what the configuration caches of ``runtime`` use)."""

    async def get_app_config(self, app_name: str) -> config_pb2.AppConfig | None:
        """The stored configuration, or None if never set."""

    async def put_app_config(self, config: config_pb2.AppConfig) -> config_pb2.AppConfig:
        """Replaces the configuration (sets ``update_time``) and returns it as stored."""

    async def get_session_config(self, key: SessionKey) -> config_pb2.SessionConfig:
        """The session's own configuration (empty if never set); SESSION_NOT_FOUND if the
        session does not exist."""

    async def put_session_config(
        self, key: SessionKey, config: config_pb2.SessionConfig
    ) -> config_pb2.SessionConfig:
        """Replaces the session's own configuration (sets ``update_time``) and returns it as
        stored; SESSION_NOT_FOUND if the session does not exist. Deleting the session deletes
        it."""

    def add_config_listener(self, listener: ConfigListener) -> Callable[[], None]:
        """Calls ``listener`` (on the event loop) when another process sharing the store
        replaced a configuration, until the returned function is called. This process's own
        updates are not told (its callers made them); a store only one process opens never
        calls it."""


class ContentMeasures(Protocol):
    """Token measures: what counting a session's contents gave, kept with the session so a cold
    BuildContext need not count again (``runtime.event_cache``); a cache, whose loss costs only
    counting again."""

    async def get_content_measures(
        self, key: SessionKey, counter: str, digests: Collection[bytes] | None = None
    ) -> dict[bytes, tuple[int, int]]:
        """What ``put_content_measures`` recorded for the session's contents counted by
        ``counter``: content digest -> (tokens, chars); {} for an unknown session. With
        ``digests``, only the measures of those (the ones a view needs)."""

    async def put_content_measures(
        self, key: SessionKey, counter: str, measures: Mapping[bytes, tuple[int, int]]
    ) -> None:
        """Records ``measures`` (content digest -> (tokens, chars), counted by ``counter``) with
        the session; a digest already recorded keeps its numbers; nothing for an unknown
        session. A cache of what counting gives (``runtime.event_cache``): the rows go with
        the session, and their loss only costs counting again."""


class Coordination(Protocol):
    """Coordination among the store's readers and the processes that share it (the module
    contract's "Positions and commit notifications"): global positions and the commit
    listeners that subscriptions and caches follow, the reads that return positions, whether
    this process writes alone, the compaction lock, the storage health the sidecar's health
    follows, and the store-wide page token key (so a page token is valid in every sidecar)."""

    def add_commit_listener(self, listener: CommitListener) -> Callable[[], None]:
        """Calls ``listener`` after every commit (see the module contract) until the returned
        function is called."""

    async def list_logged_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[LoggedEvent], int]:
        """Like ``list_events``, with each event's position."""

    async def list_events_after_position(
        self, app_name: str, user_id: str | None, after_position: int, limit: int
    ) -> list[LoggedEvent]:
        """Up to ``limit`` events with ``position > after_position`` of every session of the app
        (of one user's sessions when ``user_id`` is not None), in position order."""

    async def last_position(self) -> int:
        """The end of the final log (see the module contract; 0 for a new one-writer store)."""

    async def get_state(self, key: SessionKey) -> StateAt:
        """The session's merged state and the last position it reflects."""

    @property
    def sole_writer(self) -> bool:
        """Whether this process is the store's only writer (see the module contract)."""

    def compaction_lock(self, key: SessionKey) -> AbstractAsyncContextManager[None]:
        """Held around one compaction of the session (see the module contract): waits while
        another process sharing the store compacts it."""

    @property
    def storage_problem(self) -> ContextEngineError | None:
        """Why the store cannot write (STORAGE_FULL / STORAGE_UNAVAILABLE), or None."""

    def add_storage_listener(self, listener: StorageListener) -> Callable[[], None]:
        """Calls ``listener`` with the problem when the store stops being writable and with None
        when it is writable again, until the returned function is called."""

    async def page_token_key(self) -> bytes:
        """A random key of this store, kept with its data (the same after a restart, in
        whichever process opens it; see ``store._secrets``); it keys the page tokens' HMAC."""


class EventStore(EventLog, ConfigStore, ContentMeasures, Coordination, Protocol):
    """Storage of sessions, their event logs, scoped state, and app and session
    configuration: every part (``EventLog``, ``ConfigStore``, ``ContentMeasures``,
    ``Coordination``), and the store's life cycle. A backend implements all of it; a caller that
    uses one part depends on that part's protocol."""

    async def open(self) -> None:
        """Prepares the store (creates or migrates the schema). Called once before use."""

    async def close(self) -> None:
        """Flushes pending writes and releases resources. Idempotent."""
