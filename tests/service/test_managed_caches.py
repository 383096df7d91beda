"""Managed Gemini caches: the sidecar creates, reuses and deletes ``cachedContents`` itself,
through the real google-genai client, against a local HTTP server speaking the Gemini REST API
(``tests/fakes/gemini_server.py``). A failing Gemini never fails BuildContext."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from contextengine.client import ContextEngineClient
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as cpb
from tests.fakes.gemini_server import (
    CACHE_CREATE,
    CACHE_DELETE,
    FakeGemini,
    delayed,
    error_reply,
    start_fake_gemini,
)

from .helpers import text_event

pytestmark = pytest.mark.service

APP = "managed"
AGENT = "agent"
MODEL = cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_GEMINI, model="gemini-2.0-flash")
INSTRUCTION = content_pb2.Content(parts=[content_pb2.Part(text="Be brief.")])
TOOLS: list[dict[str, Any]] = [{"function_declarations": [{"name": "lookup"}]}]


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with start_fake_gemini() as gemini:
        yield gemini


@pytest.fixture
async def client(
    fake: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ContextEngineClient]:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    settings = ServerSettings(gemini_base_url=fake.base_url, gemini_cache_timeout_seconds=0.5)
    async with (
        start_local_server(settings=settings) as server,
        ContextEngineClient(server.target, attempts=1) as ce,
    ):
        yield ce


async def _configure(client: ContextEngineClient, **fields: Any) -> None:
    await client.update_app_config(
        config_pb2.AppConfig(
            app_name=APP,
            context_cache_config=config_pb2.ContextCacheConfig(
                managed_gemini_caches=True, **fields
            ),
        )
    )


async def _context(client: ContextEngineClient, sid: str, inv: str) -> cpb.BuildContextResponse:
    return await client.build_context(
        APP,
        "u",
        sid,
        agent_name=AGENT,
        model=MODEL,
        system_instruction=INSTRUCTION,
        tools=TOOLS,
        invocation_id=inv,
    )


async def _turn(
    client: ContextEngineClient, sid: str, inv: str, question: str
) -> cpb.BuildContextResponse:
    """The user asks, the agent builds its context, answers and records the cache metadata."""
    await client.append_event(APP, "u", sid, text_event(question, invocation_id=inv))
    context = await _context(client, sid, inv)
    answer = text_event(f"answer to {question}", author=AGENT, invocation_id=inv)
    answer.cache_metadata.CopyFrom(context.cache_decision.cache_metadata)
    answer.usage_metadata.prompt_token_count = 5000
    await client.append_event(APP, "u", sid, answer)
    return context


async def test_create_reuse_invalidate(client: ContextEngineClient, fake: FakeGemini) -> None:
    await _configure(client, cache_intervals=1, ttl_seconds=600)
    sid = (await client.create_session(APP, "u")).id
    first = await _turn(client, sid, "i1", "one")
    assert first.cache_decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert first.cache_decision.managed
    assert fake.requests_for(CACHE_CREATE) == []

    before = time.time()
    second = await _turn(client, sid, "i2", "two")
    decision = second.cache_decision
    assert decision.action == cpb.CACHE_ACTION_CREATE
    assert decision.cache_name == "cachedContents/fake-1"
    metadata = decision.cache_metadata
    assert metadata.cache_name == "cachedContents/fake-1"
    assert metadata.invocations_used == 1
    assert metadata.contents_count == 2
    assert before <= metadata.created_at <= time.time()
    assert metadata.expire_time == pytest.approx(metadata.created_at + 600, abs=2)
    assert decision.send_from_index == 2
    assert decision.ttl_seconds == 0  # managed: nothing for the agent to create
    (create,) = fake.requests_for(CACHE_CREATE)
    assert create.headers["x-goog-api-key"] == "test-key"
    body = create.body
    assert body["model"] == "models/gemini-2.0-flash"
    assert body["ttl"] == "600s"
    assert [c["parts"][0]["text"] for c in body["contents"]] == ["one", "answer to one"]
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert body["tools"] == [{"functionDeclarations": [{"name": "lookup"}]}]
    assert body["displayName"].endswith("-2contents")

    # the same invocation again (a tool loop): reuse, nothing created
    await client.append_event(APP, "u", sid, text_event("more", invocation_id="i2"))
    again = await _context(client, sid, "i2")
    assert again.cache_decision.action == cpb.CACHE_ACTION_REUSE
    assert again.cache_decision.cache_name == "cachedContents/fake-1"
    assert len(fake.requests_for(CACHE_CREATE)) == 1

    # a new invocation: used 2 > cache_intervals 1: the engine deletes and re-creates
    third = await _turn(client, sid, "i3", "three")
    assert third.cache_decision.action == cpb.CACHE_ACTION_CREATE
    assert third.cache_decision.invalidated_cache_name == "cachedContents/fake-1"
    assert third.cache_decision.cache_name == "cachedContents/fake-2"
    (delete,) = fake.requests_for(CACHE_DELETE)
    assert delete.path == "/v1beta/cachedContents/fake-1"
    assert set(fake.caches) == {"cachedContents/fake-2"}


async def test_retried_build_context_creates_one_cache(
    client: ContextEngineClient, fake: FakeGemini
) -> None:
    await _configure(client)
    sid = (await client.create_session(APP, "u")).id
    await _turn(client, sid, "i1", "one")
    await client.append_event(APP, "u", sid, text_event("two", invocation_id="i2"))
    first = await _context(client, sid, "i2")
    retried = await _context(client, sid, "i2")  # the agent retries before recording anything
    assert first.cache_decision == retried.cache_decision
    assert len(fake.requests_for(CACHE_CREATE)) == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (error_reply(400, "Cached content is too small"), "HTTP 400"),
        (error_reply(500), "HTTP 500"),
        (error_reply(429), "HTTP 429"),
        (delayed(3.0), "no answer within 0.5s"),
    ],
)
async def test_creation_failure_degrades(
    client: ContextEngineClient, fake: FakeGemini, reply: Any, reason: str
) -> None:
    await _configure(client)
    sid = (await client.create_session(APP, "u")).id
    await _turn(client, sid, "i1", "one")
    fake.script(reply, route=CACHE_CREATE)
    await client.append_event(APP, "u", sid, text_event("two", invocation_id="i2"))
    context = await _context(client, sid, "i2")
    decision = context.cache_decision
    assert decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert decision.managed
    assert reason in decision.degraded_reason
    assert decision.cache_name == ""
    assert decision.send_from_index == 0
    # ADK's fallback: the fingerprint of the prefix it tried to cache, so the next call retries
    metadata = decision.cache_metadata
    assert not metadata.HasField("cache_name")
    assert metadata.contents_count == 2
    assert [c.parts[0].text for c in context.contents] == ["one", "answer to one", "two"]
    answer = text_event("ok", author=AGENT, invocation_id="i2")
    answer.cache_metadata.CopyFrom(metadata)
    answer.usage_metadata.prompt_token_count = 5000
    await client.append_event(APP, "u", sid, answer)
    # Gemini is back: the next invocation creates the cache
    third = await _turn(client, sid, "i3", "three")
    assert third.cache_decision.action == cpb.CACHE_ACTION_CREATE
    assert third.cache_decision.degraded_reason == ""


async def test_failed_delete_is_only_logged(
    client: ContextEngineClient, fake: FakeGemini, caplog: pytest.LogCaptureFixture
) -> None:
    await _configure(client, cache_intervals=1)
    sid = (await client.create_session(APP, "u")).id
    await _turn(client, sid, "i1", "one")
    await _turn(client, sid, "i2", "two")
    fake.script(error_reply(503), route=CACHE_DELETE)
    with caplog.at_level(logging.WARNING, logger="contextengine.prompt_cache"):
        third = await _turn(client, sid, "i3", "three")
    assert third.cache_decision.action == cpb.CACHE_ACTION_CREATE
    assert third.cache_decision.invalidated_cache_name == "cachedContents/fake-1"
    assert "could not delete Gemini cache cachedContents/fake-1" in caplog.text
    assert "test-key" not in caplog.text


async def test_other_providers_are_not_managed(
    client: ContextEngineClient, fake: FakeGemini
) -> None:
    await _configure(client)
    sid = (await client.create_session(APP, "u")).id
    await client.append_event(APP, "u", sid, text_event("one", invocation_id="i1"))
    context = await client.build_context(
        APP,
        "u",
        sid,
        agent_name=AGENT,
        model=cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_ANTHROPIC, model="claude"),
        invocation_id="i1",
    )
    assert not context.cache_decision.managed


async def test_no_api_key_degrades(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    settings = ServerSettings(gemini_base_url=fake.base_url)
    async with (
        start_local_server(settings=settings) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        await _configure(client)
        sid = (await client.create_session(APP, "u")).id
        await _turn(client, sid, "i1", "one")
        await client.append_event(APP, "u", sid, text_event("two", invocation_id="i2"))
        context = await _context(client, sid, "i2")
    assert context.cache_decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert "no Gemini API key" in context.cache_decision.degraded_reason
    assert fake.requests == []
