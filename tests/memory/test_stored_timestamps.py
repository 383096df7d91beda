"""A memory whose stored timestamp ``datetime`` cannot show (recorded before appends refused such
values: 1.7e12 milliseconds, 1e308) never fails a preload or a search (issue 13, item 3)."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.memory.preload import format_timestamp
from contextengine.store import SessionKey
from contextengine.transport import ContextEngineServer
from contextengine.v1 import config_pb2
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

UTC = config_pb2.PRELOAD_TIME_FORMAT_UTC
LOCAL = config_pb2.PRELOAD_TIME_FORMAT_LOCAL
STORED = [1.7e12, 1e308, 253_402_300_800.0]


@pytest.mark.parametrize("stamp", STORED, ids=repr)
@pytest.mark.parametrize("time_format", [UTC, LOCAL], ids=["utc", "local"])
def test_an_unshowable_time_is_written_as_seconds(
    stamp: float, time_format: config_pb2.PreloadTimeFormat.ValueType
) -> None:
    assert format_timestamp(stamp, time_format) == f"{stamp!r} seconds since the Unix epoch"


def test_a_showable_time_is_iso() -> None:
    assert format_timestamp(1_767_225_600.5, UTC) == "2026-01-01T00:00:00.500000+00:00"


@pytest.mark.parametrize("stamp", STORED, ids=repr)
@pytest.mark.parametrize("time_format", [UTC, LOCAL], ids=["utc", "local"])
async def test_a_stored_bad_timestamp_does_not_fail_preload_or_search(
    server: ContextEngineServer,
    client: ContextEngineClient,
    stamp: float,
    time_format: config_pb2.PreloadTimeFormat.ValueType,
) -> None:
    await client.update_app_config(
        config_pb2.AppConfig(
            app_name="app", memory=config_pb2.MemoryConfig(preload_time_format=time_format)
        )
    )
    old = await client.create_session("app", "olga", "old")
    # As an older sidecar recorded it: straight into the store, past today's validation.
    await server.store.append_events(
        SessionKey("app", "olga", old.id),
        [text_event("My cat is called Pixel", event_id="bad", timestamp=stamp)],
        None,
    )
    with pytest.raises(ContextEngineError) as refused:  # today's sidecar refuses such an append
        await client.append_event(
            "app", "olga", old.id, text_event("My cat is old", timestamp=stamp)
        )
    assert refused.value.reason == "INVALID_EVENT"
    await client.append_event("app", "olga", old.id, text_event("My cat likes fish", event_id="ok"))
    assert (await client.add_session_to_memory("app", "olga", old.id)).entry_count == 2

    found = await client.search_memory("app", "olga", "cat")
    assert {(m.event_id, m.timestamp == stamp) for m in found.memories} >= {("bad", True)}

    new = await client.create_session("app", "olga", "new")
    await client.append_event("app", "olga", new.id, text_event("What is my cat called?"))
    context = await client.build_context("app", "olga", new.id, preload_memory=True)
    preload = context.memory_preload
    assert {m.event_id for m in preload.memories} == {"bad", "ok"}
    assert f"Time: {stamp!r} seconds since the Unix epoch\nuser: My cat is called Pixel" in (
        preload.text
    )
    assert "user: My cat likes fish" in preload.text

    # The server is healthy and the stored log is as it was.
    async with grpc.aio.insecure_channel(server.target) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    events = (await client.get_session("app", "olga", old.id)).events
    assert [(e.id, e.sequence) for e in events] == [("bad", 1), ("ok", 2)]
    assert events[0].timestamp == stamp
