"""App configurations, read through a process-local cache.

Every BuildContext needs its app's configuration; reading it from the store each time would add a
database round trip to the hot path. The sidecar is the only writer of its store, and every
update goes through :meth:`AppConfigs.put`, so the cache is never stale: a read that was under
way while an update happened does not overwrite the cache with what it read.
"""

from __future__ import annotations

from contextengine.store import EventStore
from contextengine.v1 import config_pb2


class AppConfigs:
    def __init__(self, store: EventStore) -> None:
        self._store = store
        self._cache: dict[str, config_pb2.AppConfig | None] = {}
        #: bumped by every update: a store read that overlapped one is not cached
        self._version = 0

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
