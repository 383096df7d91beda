"""BuildContext in process: the engine's ContextResult (wire bytes, decoded response, typed
fields) and the prompt cache's typed fields, without a gRPC server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from contextengine.core.errors import ContextEngineError
from contextengine.engine import ContextResult, Engine, EngineSettings, open_engine
from contextengine.v1 import (
    config_pb2,
    context_service_pb2 as cpb,
    session_service_pb2 as spb,
)
from tests.service.helpers import text_event

pytestmark = pytest.mark.unit

APP = "app"
CACHED = "cached"
GEMINI = cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_GEMINI, model="gemini-2.0-flash")


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with await open_engine(EngineSettings(db=":memory:")) as opened:
        yield opened


async def _session(engine: Engine, app: str, turns: int) -> None:
    await engine.create_session(spb.CreateSessionRequest(app_name=app, user_id="u", session_id="s"))
    for turn in range(turns):
        for event in (
            text_event(f"question {turn}", invocation_id=f"i{turn}"),
            text_event(f"answer {turn}", author="agent", invocation_id=f"i{turn}"),
        ):
            await engine.append_event(
                spb.AppendEventRequest(app_name=app, user_id="u", session_id="s", event=event)
            )


def _request(app: str, **fields: Any) -> cpb.BuildContextRequest:
    return cpb.BuildContextRequest(
        app_name=app, user_id="u", session_id="s", agent_name="agent", **fields
    )


async def test_result_bytes_decode_to_the_typed_fields(engine: Engine) -> None:
    await _session(engine, APP, 3)
    result = await engine.build_context(_request(APP, preload_memory=True))
    assert isinstance(result, ContextResult)
    response = result.response()
    assert (
        response.SerializeToString()
        == cpb.BuildContextResponse.FromString(result.encoded()).SerializeToString()
    )
    assert result.contents_count == len(response.contents) == 6
    assert result.last_sequence == response.last_sequence == 6
    assert result.token_estimate == response.token_estimate.tokens > 0
    assert result.token_counter == response.token_estimate.counter
    assert result.compaction_sequence == response.compaction_sequence == 0
    preload = result.memory_preload
    assert preload is not None
    assert preload == response.memory_preload
    # No prompt caching for this app: none of its fields.
    assert result.cache_decision is None
    assert result.fingerprint == ""
    assert result.cacheable_contents_count == 0
    assert not response.HasField("cache_decision")


async def test_a_result_does_not_change_when_the_view_grows(engine: Engine) -> None:
    await _session(engine, APP, 2)
    first = await engine.build_context(_request(APP))
    encoded = first.encoded()
    await engine.append_event(
        spb.AppendEventRequest(
            app_name=APP, user_id="u", session_id="s", event=text_event("more", invocation_id="j")
        )
    )
    second = await engine.build_context(_request(APP))
    assert second.contents_count == first.contents_count + 1
    assert first.encoded() == encoded
    assert first.response().contents == second.response().contents[:-1]


async def test_prompt_cache_fields_are_copies(engine: Engine) -> None:
    await engine.update_app_config(
        spb.UpdateAppConfigRequest(
            config=config_pb2.AppConfig(
                app_name=CACHED, context_cache_config=config_pb2.ContextCacheConfig()
            )
        )
    )
    await _session(engine, CACHED, 2)
    result = await engine.build_context(_request(CACHED, invocation_id="i9", model=GEMINI))
    response = result.response()
    decision = result.cache_decision
    assert decision is not None
    assert decision == response.cache_decision
    assert decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert result.fingerprint == response.fingerprint == decision.cache_metadata.fingerprint
    assert result.cacheable_contents_count == response.cacheable_contents_count == 4
    decision.action = cpb.CACHE_ACTION_CREATE  # a copy: the result is unchanged
    assert result.cache_decision == response.cache_decision


async def test_errors_are_domain_errors(engine: Engine) -> None:
    await _session(engine, APP, 1)
    with pytest.raises(ContextEngineError) as bad_enum:
        await engine.build_context(_request(APP, include_contents=7))
    assert bad_enum.value.reason == "INVALID_ARGUMENT"
    with pytest.raises(ContextEngineError) as missing:
        await engine.build_context(
            cpb.BuildContextRequest(app_name=APP, user_id="u", session_id="nope", agent_name="a")
        )
    assert missing.value.reason == "SESSION_NOT_FOUND"
