"""App configurations, read through a process-local cache.

Every BuildContext needs its app's configuration; reading it from the store each time would add a
database round trip to the hot path. Every update of this sidecar goes through
:meth:`AppConfigs.put`, and another sidecar's update on a shared store (PostgreSQL) is told by the
store's configuration listeners, which drop the entry; so the cache is not stale: a read that
was under way while an update happened does not overwrite the cache with what it read.
"""

from __future__ import annotations

from contextengine.store import ConfigChanged, ConfigStore
from contextengine.v1 import config_pb2


class AppConfigs:
    def __init__(self, store: ConfigStore) -> None:
        self._store = store
        self._cache: dict[str, config_pb2.AppConfig | None] = {}
        #: bumped by every update: a store read that overlapped one is not cached
        self._version = 0
        store.add_config_listener(self._on_config_changed)

    async def get(self, app_name: str) -> config_pb2.AppConfig | None:
        """The stored configuration (None if never set). Treat it as read-only."""
        if app_name in self._cache:
            return self._cache[app_name]
        version = self._version
        config = await self._store.get_app_config(app_name)
        if version == self._version:
            self._cache[app_name] = config
        return config

    async def put(self, config: config_pb2.AppConfig) -> config_pb2.AppConfig:
        stored = await self._store.put_app_config(config)
        self._version += 1
        self._cache[config.app_name] = stored
        return stored

    def _on_config_changed(self, change: ConfigChanged) -> None:
        if change.key is not None:
            return  # a session's configuration: not cached here
        self._version += 1
        if change.app_name is None:
            self._cache.clear()
        else:
            self._cache.pop(change.app_name, None)
