"""``MemoryStore``: the event store in process memory, for tests and ephemeral sidecars.

Every operation runs to completion without awaiting anything, so under asyncio each one is atomic
and concurrent appends are serialized by the event loop itself. Events and state are copied on the
way in and on the way out, so callers never share objects with the store.
"""

from __future__ import annotations

import bisect
import copy
import heapq
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contextengine.core.errors import ContextEngineError, session_already_exists, session_not_found
from contextengine.core.state import (
    APP_PREFIX,
    USER_PREFIX,
    JsonObject,
    apply_delta,
    merge_state,
    split_delta,
)
from contextengine.store._append import copy_event, plan_append
from contextengine.store._base import (
    AppendOutcome,
    CommitListener,
    ConfigListener,
    EventFilter,
    LoggedEvent,
    SessionCreated,
    SessionDeleted,
    SessionKey,
    StateAt,
    StorageListener,
    StoredSession,
)
from contextengine.store._listeners import CommitListeners
from contextengine.store._secrets import new_key
from contextengine.v1 import config_pb2, event_pb2

#: the configuration messages the store keeps its own copies of
_Config = TypeVar("_Config", config_pb2.AppConfig, config_pb2.SessionConfig)


def _nothing() -> None:
    """What removing a storage listener of a memory store does."""


@dataclass
class _Session:
    state: JsonObject
    create_time: float
    last_update_time: float
    #: events in sequence order: ``events[i].sequence == i + 1``
    events: list[event_pb2.Event] = field(default_factory=list)
    #: ``positions[i]`` is the global position of ``events[i]``
    positions: list[int] = field(default_factory=list)
    by_id: dict[str, event_pb2.Event] = field(default_factory=dict)
    #: the session's own configuration (empty: none set)
    config: config_pb2.SessionConfig = field(default_factory=config_pb2.SessionConfig)
    #: (counter, content digest) -> (tokens, chars): ``put_content_measures``
    measures: dict[tuple[str, bytes], tuple[int, int]] = field(default_factory=dict)


class MemoryStore:
    """An ``EventStore`` kept in dictionaries. Nothing survives the process."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._sessions: dict[SessionKey, _Session] = {}
        self._app_states: dict[str, JsonObject] = {}
        self._user_states: dict[tuple[str, str], JsonObject] = {}
        self._configs: dict[str, config_pb2.AppConfig] = {}
        #: every live event in position order (the store's own objects), and their positions
        self._log: list[LoggedEvent] = []
        self._log_positions: list[int] = []
        self._last_position = 0
        self._listeners = CommitListeners()
        self._closed = False
        self._page_token_key = new_key()

    async def open(self) -> None:
        self._closed = False

    async def close(self) -> None:
        self._closed = True

    @property
    def sole_writer(self) -> bool:
        """True: the store lives in this process."""
        return True

    @property
    def storage_problem(self) -> ContextEngineError | None:
        """Always None: memory does not stop being writable."""
        return None

    def add_config_listener(self, listener: ConfigListener) -> Callable[[], None]:
        """``listener`` is never called: no other process shares this store."""
        return _no_listener

    def compaction_lock(self, key: SessionKey) -> AbstractAsyncContextManager[None]:
        """Nothing to hold: one process opens this store, and its compactor serialises a
        session's compactions itself."""
        return nullcontext()

    def add_storage_listener(self, listener: StorageListener) -> Callable[[], None]:
        """``listener`` is never called (see ``storage_problem``)."""
        return _nothing

    async def create_session(
        self,
        key: SessionKey,
        state: dict[str, Any],
        now: float,
        *,
        config: config_pb2.SessionConfig | None = None,
    ) -> StoredSession:
        self._check_open()
        if key in self._sessions:
            raise session_already_exists(key.session_id)
        scoped = split_delta(copy.deepcopy(state))
        session = _Session(state=scoped.session, create_time=now, last_update_time=now)
        if config is not None:
            session.config.CopyFrom(config)
            session.config.update_time = now
        self._update_shared_state(key, scoped.app, scoped.user)
        self._sessions[key] = session
        shared = {APP_PREFIX + k: v for k, v in scoped.app.items()}
        shared.update((USER_PREFIX + k, v) for k, v in scoped.user.items())
        position = self._take_positions(1) if shared else 0
        self._listeners.notify([SessionCreated(key, copy.deepcopy(shared), position)])
        return self._stored(key, session, [])

    async def get_session(self, key: SessionKey, flt: EventFilter) -> StoredSession:
        self._check_open()
        session = self._session(key)
        return self._stored(key, session, _filtered(session.events, flt))

    async def list_sessions(
        self,
        app_name: str,
        user_id: str | None,
        limit: int,
        after: tuple[str, str] | None,
    ) -> list[StoredSession]:
        self._check_open()
        keys = sorted(
            key
            for key in self._sessions
            if key.app_name == app_name
            and (user_id is None or key.user_id == user_id)
            and (after is None or (key.user_id, key.session_id) > after)
        )
        return [self._stored(key, self._sessions[key], []) for key in keys[: max(limit, 0)]]

    async def list_sessions_by_update(
        self,
        app_name: str,
        user_id: str | None,
        limit: int,
        after: tuple[float, str, str] | None,
    ) -> list[StoredSession]:
        self._check_open()
        if limit <= 0:
            return []
        # One pass keeping the ``limit`` smallest: O(n log limit).
        rows = heapq.nsmallest(
            limit,
            (
                row
                for key, session in self._sessions.items()
                if key.app_name == app_name and (user_id is None or key.user_id == user_id)
                for row in ((session.last_update_time, key.user_id, key.session_id),)
                if after is None or row > after
            ),
        )
        return [
            self._stored(key, self._sessions[key], [])
            for key in (SessionKey(app_name, user, session_id) for _, user, session_id in rows)
        ]

    async def list_app_names(self, limit: int, after: str | None) -> list[str]:
        self._check_open()
        names = sorted({k.app_name for k in self._sessions if after is None or k.app_name > after})
        return names[: max(limit, 0)]

    async def list_user_ids(self, app_name: str, limit: int, after: str | None) -> list[str]:
        self._check_open()
        users = sorted(
            {
                k.user_id
                for k in self._sessions
                if k.app_name == app_name and (after is None or k.user_id > after)
            }
        )
        return users[: max(limit, 0)]

    async def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        self._check_open()
        return copy.deepcopy(self._user_states.get((app_name, user_id), {}))

    async def delete_session(self, key: SessionKey) -> bool:
        self._check_open()
        if self._sessions.pop(key, None) is None:
            return False
        kept = [logged for logged in self._log if logged.key != key]
        self._log = kept
        self._log_positions = [logged.position for logged in kept]
        self._listeners.notify([SessionDeleted(key)])
        return True

    async def append_events(
        self,
        key: SessionKey,
        events: Sequence[event_pb2.Event],
        expected_last_sequence: int | None,
    ) -> AppendOutcome:
        self._check_open()
        session = self._session(key)
        plan = plan_append(
            [copy_event(event) for event in events],
            session.by_id.get,
            len(session.events),
            expected_last_sequence,
            self._clock(),
        )
        if plan.new_events:
            # Nothing below can fail, so the append is all-or-nothing.
            self._update_shared_state(key, plan.changes.app, plan.changes.user)
            session.state = apply_delta(session.state, plan.changes.session)
            session.events.extend(plan.new_events)
            session.by_id.update((event.id, event) for event in plan.new_events)
            session.last_update_time = plan.new_events[-1].timestamp
            first = self._take_positions(len(plan.new_events))
            logged = [LoggedEvent(key, event, first + i) for i, event in enumerate(plan.new_events)]
            session.positions.extend(entry.position for entry in logged)
            self._log.extend(logged)
            self._log_positions.extend(entry.position for entry in logged)
            self._listeners.notify([_copied(entry) for entry in logged])
        return AppendOutcome(
            events=[copy_event(event) for event in plan.recorded],
            duplicates=plan.duplicates,
            last_sequence=plan.last_sequence,
        )

    async def list_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[event_pb2.Event], int]:
        self._check_open()
        session = self._session(key)
        start = max(after_sequence, 0)
        page = session.events[start : start + max(limit, 0)]
        return [copy_event(event) for event in page], len(session.events)

    def add_commit_listener(self, listener: CommitListener) -> Callable[[], None]:
        return self._listeners.add(listener)

    async def list_logged_events(
        self, key: SessionKey, after_sequence: int, limit: int
    ) -> tuple[list[LoggedEvent], int]:
        self._check_open()
        session = self._session(key)
        start = max(after_sequence, 0)
        end = start + max(limit, 0)
        page = [
            LoggedEvent(key, copy_event(event), position)
            for event, position in zip(
                session.events[start:end], session.positions[start:end], strict=True
            )
        ]
        return page, len(session.events)

    async def list_events_after_position(
        self, app_name: str, user_id: str | None, after_position: int, limit: int
    ) -> list[LoggedEvent]:
        self._check_open()
        out: list[LoggedEvent] = []
        if limit <= 0:
            return out
        for logged in self._log[bisect.bisect_right(self._log_positions, after_position) :]:
            key = logged.key
            if key.app_name == app_name and (user_id is None or key.user_id == user_id):
                out.append(_copied(logged))
                if len(out) == limit:
                    break
        return out

    async def last_position(self) -> int:
        self._check_open()
        return self._last_position

    async def get_state(self, key: SessionKey) -> StateAt:
        self._check_open()
        stored = self._stored(key, self._session(key), [])
        return StateAt(state=stored.state, position=self._last_position)

    async def get_content_measures(
        self, key: SessionKey, counter: str, digests: Collection[bytes] | None = None
    ) -> dict[bytes, tuple[int, int]]:
        self._check_open()
        session = self._sessions.get(key)
        if session is None:
            return {}
        if digests is not None:
            found = ((digest, session.measures.get((counter, digest))) for digest in digests)
            return {digest: m for digest, m in found if m is not None}
        return {digest: m for (name, digest), m in session.measures.items() if name == counter}

    async def put_content_measures(
        self, key: SessionKey, counter: str, measures: Mapping[bytes, tuple[int, int]]
    ) -> None:
        self._check_open()
        session = self._sessions.get(key)
        if session is None:
            return
        for digest, (tokens, chars) in measures.items():
            session.measures.setdefault((counter, bytes(digest)), (int(tokens), int(chars)))

    async def get_app_config(self, app_name: str) -> config_pb2.AppConfig | None:
        self._check_open()
        stored = self._configs.get(app_name)
        return None if stored is None else _copy_config(stored)

    async def put_app_config(self, config: config_pb2.AppConfig) -> config_pb2.AppConfig:
        self._check_open()
        stored = _copy_config(config)
        stored.update_time = self._clock()
        self._configs[stored.app_name] = stored
        return _copy_config(stored)

    async def get_session_config(self, key: SessionKey) -> config_pb2.SessionConfig:
        self._check_open()
        return _copy_config(self._session(key).config)

    async def put_session_config(
        self, key: SessionKey, config: config_pb2.SessionConfig
    ) -> config_pb2.SessionConfig:
        self._check_open()
        session = self._session(key)
        session.config = _copy_config(config)
        session.config.update_time = self._clock()
        return _copy_config(session.config)

    async def page_token_key(self) -> bytes:
        self._check_open()
        return self._page_token_key

    def _take_positions(self, count: int) -> int:
        """Takes ``count`` consecutive positions and returns the first."""
        first = self._last_position + 1
        self._last_position += count
        return first

    def _check_open(self) -> None:
        if self._closed:
            raise ContextEngineError("SHUTTING_DOWN", "the store is closed")

    def _session(self, key: SessionKey) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            raise session_not_found(key.app_name, key.user_id, key.session_id)
        return session

    def _update_shared_state(self, key: SessionKey, app: JsonObject, user: JsonObject) -> None:
        if app:
            self._app_states[key.app_name] = apply_delta(
                self._app_states.get(key.app_name, {}), app
            )
        if user:
            user_key = (key.app_name, key.user_id)
            self._user_states[user_key] = apply_delta(self._user_states.get(user_key, {}), user)

    def _stored(
        self, key: SessionKey, session: _Session, events: list[event_pb2.Event]
    ) -> StoredSession:
        merged = merge_state(
            session.state,
            self._user_states.get((key.app_name, key.user_id), {}),
            self._app_states.get(key.app_name, {}),
        )
        return StoredSession(
            key=key,
            state=copy.deepcopy(merged),
            create_time=session.create_time,
            last_update_time=session.last_update_time,
            last_sequence=len(session.events),
            events=[copy_event(event) for event in events],
        )


def _filtered(events: list[event_pb2.Event], flt: EventFilter) -> list[event_pb2.Event]:
    """``EventFilter`` over a log in sequence order (``events[i].sequence == i + 1``)."""
    selected = events[max(flt.after_sequence, 0) :] if flt.after_sequence is not None else events
    if flt.after_timestamp is not None:
        threshold = flt.after_timestamp
        selected = [event for event in selected if event.timestamp >= threshold]
    if flt.num_recent_events is not None:
        count = max(flt.num_recent_events, 0)
        selected = selected[-count:] if count else []
    return selected


def _copied(logged: LoggedEvent) -> LoggedEvent:
    return LoggedEvent(logged.key, copy_event(logged.event), logged.position)


def _copy_config(config: _Config) -> _Config:
    out = type(config)()
    out.CopyFrom(config)
    return out


def _no_listener() -> None:
    """What removing a configuration listener of a store no other process shares does."""
