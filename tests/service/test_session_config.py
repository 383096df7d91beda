"""A session's own configuration (SessionConfig) over gRPC: stored with the session, replacing its
app's compaction configuration for every trigger, and gone with the session."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from contextengine.client import ContextEngineClient
from contextengine.compaction.compactor import View
from contextengine.prompt_cache.compaction_policy import CacheAwarePolicy
from contextengine.prompt_cache.service import PromptCache
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.resolver import ConfigResolver
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import MemoryStore, SessionKey
from contextengine.testing import start_local_server
from contextengine.v1 import compaction_service_pb2 as kpb, config_pb2, event_pb2
from tests.service.helpers import text_event
from tests.service.test_compaction import (
    APP,
    SESSION,
    SLIDING,
    TOKENS,
    USER,
    FakeSummarizer,
    Writer,
    engine,
    events_of,
    expect_error,
    summaries,
)

pytestmark = pytest.mark.service

KEY = SessionKey(APP, USER, SESSION)
EVERY_THREE = config_pb2.EventsCompactionConfig(compaction_interval=3, overlap_size=0)


def own(config: config_pb2.EventsCompactionConfig) -> config_pb2.SessionConfig:
    return config_pb2.SessionConfig(events_compaction_config=config)


async def test_round_trip_and_the_configuration_in_effect() -> None:
    async with engine() as (_, client):
        got = await client.get_session_config(APP, USER, SESSION)
        assert got.config == config_pb2.SessionConfig()
        assert got.effective_compaction_config == SLIDING  # the app's

        updated = await client.update_session_config(APP, USER, SESSION, own(TOKENS))
        assert updated.config.events_compaction_config == TOKENS
        assert updated.config.update_time > 0
        assert updated.effective_compaction_config == TOKENS
        got = await client.get_session_config(APP, USER, SESSION)
        assert got.config == updated.config
        assert got.effective_compaction_config == TOKENS

        # Another session of the app keeps the app's configuration.
        await client.create_session(APP, USER, "s2")
        other = await client.get_session_config(APP, USER, "s2")
        assert other.effective_compaction_config == SLIDING

        cleared = await client.update_session_config(APP, USER, SESSION, config_pb2.SessionConfig())
        assert not cleared.config.HasField("events_compaction_config")
        assert cleared.effective_compaction_config == SLIDING


async def test_a_session_created_with_its_configuration() -> None:
    async with engine() as (_, client):
        await client.create_session(APP, USER, "s2", config=own(TOKENS))
        got = await client.get_session_config(APP, USER, "s2")
        assert got.config.events_compaction_config == TOKENS
        assert got.config.update_time > 0
        assert got.effective_compaction_config == TOKENS
        # A rejected configuration creates nothing.
        bad = own(config_pb2.EventsCompactionConfig(token_threshold=10))
        await expect_error(
            client.create_session(APP, USER, "s3", config=bad),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_COMPACTION_CONFIG",
        )
        await expect_error(
            client.get_session(APP, USER, "s3"), grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND"
        )


async def test_without_an_app_configuration_only_the_session_is_compacted() -> None:
    async with engine(FakeSummarizer(), config=None) as (_, client):
        got = await client.get_session_config(APP, USER, SESSION)
        assert not got.HasField("effective_compaction_config")
        await expect_error(
            client.compact(APP, USER, SESSION),
            grpc.StatusCode.FAILED_PRECONDITION,
            "COMPACTION_NOT_CONFIGURED",
        )
        await client.update_session_config(APP, USER, SESSION, own(SLIDING))
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        response = await client.compact(APP, USER, SESSION)
        assert response.summary.actions.HasField("compaction")
        # The session asks for a sliding window only: the token trigger is not configured.
        await expect_error(
            client.plan_compaction(
                APP, USER, SESSION, trigger=kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD
            ),
            grpc.StatusCode.FAILED_PRECONDITION,
            "COMPACTION_NOT_CONFIGURED",
        )


async def test_each_session_compacts_after_invocations_with_its_own_configuration() -> None:
    fake = FakeSummarizer()
    async with engine(fake) as (server, client):  # the app: every 2 invocations
        compactor = server.compactor
        assert compactor is not None
        await client.update_session_config(APP, USER, SESSION, own(EVERY_THREE))
        await client.create_session(APP, USER, "s2")
        mine, theirs = Writer(client), Writer(client)

        async def turn(writer: Writer, session: str, n: int) -> None:
            for event in (
                text_event(f"Question {n}?", invocation_id=f"i{n}"),
                text_event(f"Answer {n}.", author="agent", invocation_id=f"i{n}"),
            ):
                writer.clock += 1.0
                event.timestamp = writer.clock
                await client.append_event(APP, USER, session, event)
            assert await client.end_invocation(APP, USER, session, f"i{n}")
            await compactor.idle(SessionKey(APP, USER, session))

        for n in (1, 2):
            await turn(mine, SESSION, n)
            await turn(theirs, "s2", n)
        assert summaries(await events_of(client)) == []  # 2 < 3 invocations
        others = [e async for e in client.list_events(APP, USER, "s2")]
        assert len(summaries(others)) == 1  # the app's interval of 2

        await turn(mine, SESSION, 3)
        (summary,) = summaries(await events_of(client))
        # Three invocations, no overlap: the first six events, all of them.
        raw = [e for e in await events_of(client) if not e.actions.HasField("compaction")]
        assert summary.actions.compaction.start_timestamp == raw[0].timestamp
        assert summary.actions.compaction.end_timestamp == raw[5].timestamp == mine.clock


async def test_the_token_check_before_a_context_uses_the_session_threshold() -> None:
    fake = FakeSummarizer()
    # The app's threshold is far away; the session's is reached by the recorded prompt size.
    app = config_pb2.EventsCompactionConfig(token_threshold=1_000_000, event_retention_size=1)
    async with engine(fake, config=app) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=150)
        await writer.turn(2, tokens=150)
        response = await client.build_context(APP, USER, SESSION, agent_name="agent")
        assert response.compaction_sequence == 0
        await client.update_session_config(APP, USER, SESSION, own(TOKENS))  # 100 tokens
        response = await client.build_context(APP, USER, SESSION, agent_name="agent")
        assert response.compaction_sequence > 0
        assert len(fake.inputs) == 1


async def test_a_session_created_again_starts_without_the_old_configuration() -> None:
    async with engine() as (_, client):
        await client.update_session_config(APP, USER, SESSION, own(TOKENS))
        assert (await client.get_session_config(APP, USER, SESSION)).config.HasField(
            "events_compaction_config"
        )
        await client.delete_session(APP, USER, SESSION)
        await expect_error(
            client.get_session_config(APP, USER, SESSION),
            grpc.StatusCode.NOT_FOUND,
            "SESSION_NOT_FOUND",
        )
        await client.create_session(APP, USER, SESSION)
        got = await client.get_session_config(APP, USER, SESSION)
        assert got.config == config_pb2.SessionConfig()
        assert got.effective_compaction_config == SLIDING


async def test_the_configuration_survives_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "ce.db")
    async with engine(db=db) as (_, client):
        stored = await client.update_session_config(APP, USER, SESSION, own(EVERY_THREE))
    async with (
        start_local_server(db) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        got = await client.get_session_config(APP, USER, SESSION)
    assert got.config == stored.config
    assert got.effective_compaction_config == EVERY_THREE


async def test_the_cache_aware_policy_takes_the_session_threshold_as_its_limit() -> None:
    """Without a hard_token_limit the cache-aware policy's limit is the token threshold in
    effect: the session's, when it sets one."""
    store = MemoryStore()
    await store.open()
    await store.create_session(KEY, {}, 1.0)
    apps = AppConfigs(store)
    app = config_pb2.AppConfig(app_name=APP)
    app.context_cache_config.cache_aware_compaction.SetInParent()
    await apps.put(app)
    configs = SessionConfigs(store)
    configs.start()
    policy = CacheAwarePolicy(ConfigResolver(apps, configs), PromptCache())
    answer = text_event("An answer.", author="agent", invocation_id="i1")
    answer.usage_metadata.prompt_token_count = 500
    log: list[event_pb2.Event] = [answer]
    view = View(agent_name="agent")
    assert not await policy.due(KEY, view, log, False)  # no limit at all
    threshold = config_pb2.EventsCompactionConfig(token_threshold=400, event_retention_size=1)
    await configs.put(KEY, own(threshold))
    assert await policy.due(KEY, view, log, False)  # 500 predicted >= 400
    configs.close()
    await store.close()
