"""The ``ConfigStore`` contract: an app's and a session's configuration; on every backend."""

from __future__ import annotations

import pytest

from contextengine.store import (
    EventStore,
    SessionKey,
)
from contextengine.v1 import config_pb2
from tests.store.conftest import FakeClock

from .helpers import APP, KEY, create, ev, raises

pytestmark = pytest.mark.unit

# --- app config -----------------------------------------------------------------------------------


async def test_app_config_round_trip(store: EventStore, clock: FakeClock) -> None:
    assert await store.get_app_config(APP) is None

    config = config_pb2.AppConfig(app_name=APP)
    config.events_compaction_config.compaction_interval = 3
    config.events_compaction_config.overlap_size = 1
    clock.now = 77.0
    stored = await store.put_app_config(config)

    assert stored.update_time == 77.0
    assert stored.events_compaction_config.compaction_interval == 3
    assert config.update_time == 0.0  # the caller's message is not modified
    assert await store.get_app_config(APP) == stored
    assert await store.get_app_config("other") is None

    replacement = config_pb2.AppConfig(app_name=APP)
    replacement.context_cache_config.ttl_seconds = 60
    clock.now = 78.0
    await store.put_app_config(replacement)
    fetched = await store.get_app_config(APP)
    assert fetched is not None
    assert not fetched.HasField("events_compaction_config")
    assert fetched.context_cache_config.ttl_seconds == 60
    assert fetched.update_time == 78.0


# --- session config -------------------------------------------------------------------------------


def _sliding(interval: int, overlap: int) -> config_pb2.SessionConfig:
    config = config_pb2.SessionConfig()
    config.events_compaction_config.compaction_interval = interval
    config.events_compaction_config.overlap_size = overlap
    return config


async def test_session_config_round_trip(store: EventStore, clock: FakeClock) -> None:
    await create(store)
    assert await store.get_session_config(KEY) == config_pb2.SessionConfig()

    config = _sliding(4, 2)
    clock.now = 55.0
    stored = await store.put_session_config(KEY, config)
    assert stored.update_time == 55.0
    assert config.update_time == 0.0  # the caller's message is not modified
    assert await store.get_session_config(KEY) == stored
    stored.events_compaction_config.compaction_interval = 9  # nor is the store's copy
    assert (await store.get_session_config(KEY)).events_compaction_config.compaction_interval == 4

    other = SessionKey(APP, "u1", "s2")
    await create(store, other)
    assert await store.get_session_config(other) == config_pb2.SessionConfig()

    clock.now = 56.0
    cleared = await store.put_session_config(KEY, config_pb2.SessionConfig())
    assert not cleared.HasField("events_compaction_config")
    assert (await store.get_session_config(KEY)).update_time == 56.0


async def test_a_session_can_be_created_with_its_config(store: EventStore) -> None:
    config = _sliding(5, 1)
    await store.create_session(KEY, {}, 9.0, config=config)
    stored = await store.get_session_config(KEY)
    assert stored.events_compaction_config == config.events_compaction_config
    assert stored.update_time == 9.0
    assert config.update_time == 0.0  # the caller's message is not modified
    other = SessionKey(APP, "u1", "s2")
    await store.create_session(other, {}, 9.0)
    assert await store.get_session_config(other) == config_pb2.SessionConfig()


async def test_session_config_needs_the_session_and_goes_with_it(store: EventStore) -> None:
    await raises("SESSION_NOT_FOUND", store.get_session_config(KEY))
    await raises("SESSION_NOT_FOUND", store.put_session_config(KEY, _sliding(2, 1)))
    await create(store)
    await store.put_session_config(KEY, _sliding(2, 1))
    await store.append_events(KEY, [ev("a")], None)  # appends leave it alone
    assert (await store.get_session_config(KEY)).events_compaction_config.overlap_size == 1
    assert await store.delete_session(KEY)
    await raises("SESSION_NOT_FOUND", store.get_session_config(KEY))
    await create(store)  # the same id again: a new session, without the old one's config
    assert await store.get_session_config(KEY) == config_pb2.SessionConfig()


# --- copies ---------------------------------------------------------------------------------------


async def test_returned_app_config_is_a_copy(store: EventStore) -> None:
    stored = await store.put_app_config(config_pb2.AppConfig(app_name=APP))
    stored.context_cache_config.ttl_seconds = 5
    fetched = await store.get_app_config(APP)
    assert fetched is not None
    fetched.context_cache_config.ttl_seconds = 6
    again = await store.get_app_config(APP)
    assert again is not None
    assert not again.HasField("context_cache_config")
