"""The process-local cache of sessions' own configurations never serves what the store no longer
holds: reads that overlap an update or a deletion are not cached."""

from __future__ import annotations

import asyncio

import pytest

from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.resolver import ConfigResolver
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import MemoryStore, SessionKey
from contextengine.v1 import config_pb2

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "u", "s")


class GatedStore(MemoryStore):
    """Reads a session's configuration at once, but answers only once ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: asyncio.Event | None = None
        self.reads = 0

    async def get_session_config(self, key: SessionKey) -> config_pb2.SessionConfig:
        self.reads += 1
        config = await super().get_session_config(key)
        if self.gate is not None:
            await self.gate.wait()
        return config

    async def get_app_config(self, app_name: str) -> config_pb2.AppConfig | None:
        config = await super().get_app_config(app_name)
        if self.gate is not None:
            await self.gate.wait()
        return config


def every(interval: int) -> config_pb2.SessionConfig:
    return config_pb2.SessionConfig(
        events_compaction_config=config_pb2.EventsCompactionConfig(
            compaction_interval=interval, overlap_size=0
        )
    )


async def opened() -> tuple[GatedStore, SessionConfigs]:
    store = GatedStore()
    await store.open()
    await store.create_session(KEY, {}, 1.0)
    configs = SessionConfigs(store)
    configs.start()
    return store, configs


async def test_answers_come_from_the_cache_once_read() -> None:
    store, configs = await opened()
    await configs.put(KEY, every(3))
    reads = store.reads
    for _ in range(3):
        assert (await configs.get(KEY)).events_compaction_config.compaction_interval == 3
    assert store.reads == reads


async def test_a_read_overlapping_an_update_is_not_cached() -> None:
    store, configs = await opened()
    store.gate = asyncio.Event()
    reading = asyncio.create_task(configs.get(KEY))
    await asyncio.sleep(0)  # the read has the old (empty) configuration and waits
    store.gate.set()
    store.gate = None
    await configs.put(KEY, every(4))
    await reading
    assert (await configs.get(KEY)).events_compaction_config.compaction_interval == 4


async def test_a_deleted_or_recreated_session_is_read_again() -> None:
    store, configs = await opened()
    await configs.put(KEY, every(5))
    await store.delete_session(KEY)
    await store.create_session(KEY, {}, 2.0)
    assert await configs.get(KEY) == config_pb2.SessionConfig()
    resolver = ConfigResolver(AppConfigs(store), configs)
    assert await resolver.compaction(KEY) is None  # the app has none either


async def test_an_app_config_read_overlapping_an_update_is_not_cached() -> None:
    store = GatedStore()
    await store.open()
    apps = AppConfigs(store)
    store.gate = asyncio.Event()
    reading = asyncio.create_task(apps.get("app"))
    await asyncio.sleep(0)
    store.gate.set()
    store.gate = None
    await apps.put(config_pb2.AppConfig(app_name="app", other_agent_preamble="new"))
    assert await reading is None  # what the store held when it was read
    stored = await apps.get("app")
    assert stored is not None
    assert stored.other_agent_preamble == "new"
