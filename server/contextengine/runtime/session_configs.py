"""Sessions' own configurations (``SessionConfig``), read through a process-local cache (the
compaction configuration in effect, the session's over its app's, is resolved by
:class:`~contextengine.runtime.resolver.ConfigResolver`).

The compactor asks for a session's configuration on every BuildContext, so the answer is cached
(up to ``capacity`` sessions, least recently used dropped), including "none set". Every update of
this sidecar goes through :meth:`SessionConfigs.put`, another sidecar's on a shared store is told
by the store's configuration listeners (the entry is dropped); a session
deleted or created again is dropped from the cache when the store commits it (a commit listener),
so a session created again under the same id never sees its predecessor's entry. A store read or
update that overlapped any of these changes is not cached (the next call reads the store again).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contextengine.runtime.lru import BoundedLru
from contextengine.store import (
    Change,
    ConfigChanged,
    EventStore,
    SessionCreated,
    SessionDeleted,
    SessionKey,
)
from contextengine.v1 import config_pb2

DEFAULT_CAPACITY = 10_000


class SessionConfigs:
    def __init__(self, store: EventStore, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self._store = store
        self._cache: BoundedLru[SessionKey, config_pb2.SessionConfig] = BoundedLru(capacity)
        #: bumped by every update and every session created or deleted
        self._version = 0
        self._unlisten: list[Callable[[], None]] = []

    def start(self) -> None:
        if not self._unlisten:
            self._unlisten = [
                self._store.add_commit_listener(self._on_commit),
                self._store.add_config_listener(self._on_config_changed),
            ]

    def close(self) -> None:
        unlisten, self._unlisten = self._unlisten, []
        for remove in unlisten:
            remove()

    async def get(self, key: SessionKey) -> config_pb2.SessionConfig:
        """The session's own configuration (empty if none is set); SESSION_NOT_FOUND if the
        session does not exist. Treat it as read-only."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        version = self._version
        config = await self._store.get_session_config(key)
        if version == self._version:
            self._cache.put(key, config)
        return config

    async def put(
        self, key: SessionKey, config: config_pb2.SessionConfig
    ) -> config_pb2.SessionConfig:
        """Stores the session's new configuration (validated by the caller)."""
        version = self._version
        stored = await self._store.put_session_config(key, config)
        overlapped = version != self._version
        self._version += 1
        if overlapped:
            self._cache.pop(key)
        else:
            self._cache.put(key, stored)
        return stored

    def _on_commit(self, changes: Sequence[Change]) -> None:
        for change in changes:
            if isinstance(change, SessionCreated | SessionDeleted):
                self._version += 1
                self._cache.pop(change.key)

    def _on_config_changed(self, change: ConfigChanged) -> None:
        if change.app_name is None:
            self._version += 1
            self._cache.clear()
        elif change.key is not None:
            self._version += 1
            self._cache.pop(change.key)
