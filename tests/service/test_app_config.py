"""Per-app configuration: persisted, validated with ADK's rules."""

from __future__ import annotations

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.v1 import config_pb2

pytestmark = pytest.mark.service


async def test_config_round_trip(client: ContextEngineClient) -> None:
    empty = await client.get_app_config("app")
    assert empty.app_name == "app"
    assert not empty.HasField("events_compaction_config")
    config = config_pb2.AppConfig(
        app_name="app",
        events_compaction_config=config_pb2.EventsCompactionConfig(
            compaction_interval=3, overlap_size=0, token_threshold=1000, event_retention_size=2
        ),
        context_cache_config=config_pb2.ContextCacheConfig(cache_intervals=5),
    )
    stored = await client.update_app_config(config)
    assert stored.update_time > 0
    fetched = await client.get_app_config("app")
    assert fetched == stored
    assert fetched.events_compaction_config.overlap_size == 0
    assert fetched.events_compaction_config.HasField("overlap_size")


BAD_COMPACTION = [
    ({"token_threshold": 100}, "token_threshold and event_retention_size must be set together"),
    ({"event_retention_size": 1}, "token_threshold and event_retention_size must be set together"),
    ({"compaction_interval": 2}, "compaction_interval and overlap_size must be set together"),
    ({}, "At least one compaction trigger must be configured"),
    ({"compaction_interval": 0, "overlap_size": 0}, "compaction_interval must be greater than 0"),
    (
        {"compaction_interval": 1, "overlap_size": -1},
        "overlap_size must be greater than or equal to 0",
    ),
    ({"token_threshold": -5, "event_retention_size": 1}, "token_threshold must be greater than 0"),
    ({"token_threshold": 5, "event_retention_size": -1}, "event_retention_size must be greater"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_COMPACTION)
async def test_invalid_compaction_config(
    client: ContextEngineClient, fields: dict[str, int], message: str
) -> None:
    config = config_pb2.AppConfig(
        app_name="app", events_compaction_config=config_pb2.EventsCompactionConfig(**fields)
    )
    with pytest.raises(ContextEngineError) as err:
        await client.update_app_config(config)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.reason == "INVALID_COMPACTION_CONFIG"
    assert message in err.value.message


@pytest.mark.parametrize(
    ("cache_config", "field"),
    [
        (config_pb2.ContextCacheConfig(cache_intervals=0), "cache_intervals"),
        (config_pb2.ContextCacheConfig(cache_intervals=101), "cache_intervals"),
        (config_pb2.ContextCacheConfig(ttl_seconds=0), "ttl_seconds"),
        (config_pb2.ContextCacheConfig(min_tokens=-1), "min_tokens"),
    ],
)
async def test_invalid_cache_config(
    client: ContextEngineClient, cache_config: config_pb2.ContextCacheConfig, field: str
) -> None:
    config = config_pb2.AppConfig(app_name="app", context_cache_config=cache_config)
    with pytest.raises(ContextEngineError) as err:
        await client.update_app_config(config)
    assert err.value.reason == "INVALID_CACHE_CONFIG"
    assert err.value.metadata["field"] == f"config.context_cache_config.{field}"


async def test_config_requires_app_name(client: ContextEngineClient) -> None:
    with pytest.raises(ContextEngineError) as err:
        await client.update_app_config(config_pb2.AppConfig())
    assert err.value.reason == "MISSING_FIELD"
    with pytest.raises(ContextEngineError) as err:
        await client.get_app_config("")
    assert err.value.reason == "MISSING_FIELD"
