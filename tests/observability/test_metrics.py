"""``/metrics`` after a scripted workload over real gRPC: every counter equals what was done.

The workload: an app configuration with a sliding-window compaction, two sessions, appends one
by one and in a batch, an append to a missing session (NOT_FOUND), a context built, a compaction
that succeeds and one whose summarizer fails, a memory ingestion and a subscriber. The scrape is
parsed with prometheus_client's own parser, and each number is checked against the workload or
against what the sidecar answered (the stored events' sizes, the context's tokens).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.store import SessionKey
from contextengine.subscriptions.broadcaster import EndReason, session_route
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    context_service_pb2 as cpb,
    event_pb2,
)
from tests.observability.helpers import Samples, ScriptedSummarizer, scrape, sidecar, value
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

APP, USER = "metrics-app", "u1"
SESSION = "SessionService"


def rpcs(samples: Samples, method: str, code: str = "OK") -> float:
    return value(
        samples,
        "contextengine_rpcs_handled_total",
        {"method": f"contextengine.v1.{method}", "code": code},
    )


async def _turn(client: ContextEngineClient, session: str, n: int) -> None:
    for author in ("user", "agent"):
        event = text_event(f"turn {n} of {author}", author=author, invocation_id=f"i{n}")
        await client.append_event(APP, USER, session, event)


async def _all_events(client: ContextEngineClient, session: str) -> list[event_pb2.Event]:
    return [event async for event in client.list_events(APP, USER, session)]


async def test_the_counters_match_a_scripted_workload(tmp_path: Path) -> None:
    summarizer = ScriptedSummarizer()
    async with (
        sidecar(tmp_path / "ce.db", summarizer=summarizer) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        before = await scrape(server.ops_port)
        assert value(before, "contextengine_events_appended_total") == 0
        assert value(before, "contextengine_store_writable") == 1

        app = config_pb2.AppConfig(app_name=APP)
        app.events_compaction_config.CopyFrom(
            config_pb2.EventsCompactionConfig(compaction_interval=2, overlap_size=1)
        )
        await client.update_app_config(app)
        await client.create_session(APP, USER, "s1")
        await client.create_session(APP, USER, "s2")
        for n in range(3):
            await _turn(client, "s1", n)
        await client.append_events(
            APP, USER, "s2", [text_event("a"), text_event("b", author="agent")]
        )
        with pytest.raises(ContextEngineError) as missing:
            await client.append_event(APP, USER, "nope", text_event("lost"))
        assert missing.value.code == grpc.StatusCode.NOT_FOUND

        built = await client.build_context(APP, USER, "s1")
        compacted = await client.compact(
            APP, USER, "s1", trigger=kpb.COMPACTION_TRIGGER_AFTER_INVOCATION
        )
        assert compacted.HasField("summary"), compacted
        summarizer.failing = True
        for n in range(3, 5):
            await _turn(client, "s1", n)
        failed = await client.compact(
            APP, USER, "s1", trigger=kpb.COMPACTION_TRIGGER_AFTER_INVOCATION
        )
        assert failed.skipped_reason == "summarizer_failed", failed
        ingested = await client.add_session_to_memory(APP, USER, "s1")
        assert ingested.added_count > 0

        stored = [*await _all_events(client, "s1"), *await _all_events(client, "s2")]
        after = await scrape(server.ops_port)

        # appends: every committed event (10 appended one by one, 2 in a batch, 1 summary)
        assert len(stored) == 13
        assert value(after, "contextengine_events_appended_total") == 13
        assert value(after, "contextengine_event_bytes_appended_total") == sum(
            e.ByteSize() for e in stored
        )
        # RPCs by method and code, the error included
        assert rpcs(after, f"{SESSION}/UpdateAppConfig") == 1
        assert rpcs(after, f"{SESSION}/CreateSession") == 2
        assert rpcs(after, f"{SESSION}/AppendEvent") == 10
        assert rpcs(after, f"{SESSION}/AppendEvents") == 1
        assert rpcs(after, f"{SESSION}/AppendEvent", "NOT_FOUND") == 1
        assert rpcs(after, "ContextService/BuildContext") == 1
        assert rpcs(after, "CompactionService/Compact") == 2
        assert rpcs(after, "MemoryService/AddSessionToMemory") == 1
        latency = value(
            after,
            "contextengine_rpc_duration_seconds_count",
            {"method": f"contextengine.v1.{SESSION}/AppendEvent", "code": "OK"},
        )
        assert latency == 10
        # compactions and the summarizer
        for outcome, count in [("started", 2), ("succeeded", 1), ("failed", 1), ("deferred", 0)]:
            assert value(after, "contextengine_compactions_total", {"outcome": outcome}) == count
        for outcome in ("ok", "failed"):
            labels = {"summarizer": "scripted", "outcome": outcome}
            assert value(after, "contextengine_summarizer_duration_seconds_count", labels) == 1
        # contexts, memory, store commits
        assert value(after, "contextengine_build_context_tokens_count") == 1
        assert value(after, "contextengine_build_context_tokens_sum") == (
            built.token_estimate.tokens
        )
        assert value(after, "contextengine_memory_ingestions_total") == 1
        added = value(after, "contextengine_memory_entries_total", {"change": "added"})
        assert added == ingested.added_count
        commits = value(
            after, "contextengine_store_commit_duration_seconds_count", {"outcome": "ok"}
        )
        # at least one commit per write RPC above (config, 2 sessions, 11 appends, a summary)
        assert commits >= 15


async def test_subscribers_are_gauged(tmp_path: Path) -> None:
    async with (
        sidecar(tmp_path / "ce.db") as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        await client.create_session(APP, USER, "s1")
        await client.append_event(APP, USER, "s1", text_event("hello"))
        frames = client.subscribe_events(APP, USER, "s1")
        await anext(frames)  # the stream is open: the subscription is registered
        samples = await scrape(server.ops_port)
        assert value(samples, "contextengine_subscribers") == 1
        assert value(samples, "contextengine_subscribers_lagged_total") == 0
        await frames.aclose()
        for _ in range(100):
            samples = await scrape(server.ops_port)
            if value(samples, "contextengine_subscribers") == 0:
                break
            await asyncio.sleep(0.02)
        assert value(samples, "contextengine_subscribers") == 0
        assert rpcs(samples, "SubscriptionService/SubscribeEvents", "CANCELLED") == 1


async def test_buffered_bytes_and_lagged_cut_offs_are_counted(tmp_path: Path) -> None:
    """A subscriber that does not read (registered on the sidecar's broadcaster, as a stream's
    reader registers itself) holds what is appended, then is cut off as lagged."""
    async with (
        sidecar(tmp_path / "ce.db") as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        await client.create_session(APP, USER, "s1")
        stalled = server.broadcaster.subscribe(
            session_route(SessionKey(APP, USER, "s1")),
            lambda change: True,
            2,
            capacity_bytes=1 << 20,
        )
        first = await client.append_event(APP, USER, "s1", text_event("one"))
        samples = await scrape(server.ops_port)
        assert value(samples, "contextengine_subscribers") == 1
        buffered = value(samples, "contextengine_subscriber_buffered_bytes")
        assert buffered == first.event.ByteSize()
        for text in ("two", "three"):
            await client.append_event(APP, USER, "s1", text_event(text))
        assert stalled.ended is EndReason.LAGGED
        samples = await scrape(server.ops_port)
        assert value(samples, "contextengine_subscribers_lagged_total") == 1
        assert value(samples, "contextengine_subscriber_buffered_bytes") == 0
        assert value(samples, "contextengine_subscribers") == 0


GEMINI = cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_GEMINI, model="gemini-2.0-flash")


async def test_cache_decisions_are_counted_by_action(tmp_path: Path) -> None:
    """Two invocations of an app with prompt caching: FINGERPRINT_ONLY, then CREATE (the agent
    creates the cache: not managed), as in the prompt-caching guide's example."""
    async with (
        sidecar(tmp_path / "ce.db") as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        await client.update_app_config(
            config_pb2.AppConfig(
                app_name=APP, context_cache_config=config_pb2.ContextCacheConfig(ttl_seconds=600)
            )
        )
        await client.create_session(APP, USER, "s1")
        actions = []
        for invocation in ("i1", "i2"):
            await client.append_event(
                APP, USER, "s1", text_event(f"question {invocation}", invocation_id=invocation)
            )
            context = await client.build_context(
                APP, USER, "s1", agent_name="agent", model=GEMINI, invocation_id=invocation
            )
            decision = context.cache_decision
            actions.append(cpb.CacheAction.Name(decision.action))
            answer = text_event("an answer", author="agent", invocation_id=invocation)
            answer.cache_metadata.CopyFrom(decision.cache_metadata)
            answer.usage_metadata.prompt_token_count = 3000
            await client.append_event(APP, USER, "s1", answer)
        samples = await scrape(server.ops_port)
    assert actions == ["CACHE_ACTION_FINGERPRINT_ONLY", "CACHE_ACTION_CREATE"]
    for action in actions:
        assert value(samples, "contextengine_cache_decisions_total", {"action": action}) == 1
    assert value(samples, "contextengine_build_context_tokens_count") == 2


async def test_refused_calls_are_counted_by_their_code(tmp_path: Path) -> None:
    settings = ServerSettings(auth_token="metrics-token-1")
    async with (
        sidecar(tmp_path / "ce.db", settings=settings) as server,
        ContextEngineClient(server.target, attempts=1) as anonymous,
    ):
        with pytest.raises(ContextEngineError) as refused:
            await anonymous.create_session(APP, USER, "s1")
        assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
        samples = await scrape(server.ops_port)
    assert rpcs(samples, f"{SESSION}/CreateSession", "UNAUTHENTICATED") == 1
    assert rpcs(samples, f"{SESSION}/CreateSession") == 0
