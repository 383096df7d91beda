"""Differential proof that the engine makes google-adk 2.13's cache decisions.

Seeded random multi-invocation sessions of one agent (with a second agent and a user talking in
between) are played step by step. Before every model call of the agent, both sides decide:

* ADK (``bench.peers.adk_cache.adk_cache_step``): its context-cache request processor over its events, its
  Gemini model class's own addition, ``GeminiContextCacheManager.handle_context_caching`` with a
  fake genai client and the simulation's clock;
* the engine: ``build_contents`` over the same events as protos, the request's fixed parts read
  as BuildContext reads them, ``find_cache_info`` and ``decide`` with the same clock, and the
  same creation outcome (success with or without a server expire time, or failure).

Each side records its own metadata (ADK's fingerprints differ from the engine's) on the model
response event it appends, so both logs evolve from their own decisions. At every step the test
asserts: the same action (fingerprint only / reuse / create), the same ``contents_count`` and
``invocations_used``, the same cache name and expiry, the same deleted cache, and the same number
of leading contents left out of the request.

Sessions vary: cache intervals, TTL (with clock jumps across it), ``min_tokens``, models with and
without ADK's size floors, system instruction and tool changes (and tool reorders, which must
not matter), summaries that change the prefix, prompt token counts of every size (or none),
creation failures, several model calls per invocation (tool loops), other authors' metadata.
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass
from typing import Any

import pytest
from bench.peers.adk_cache import AdkStep, FakeCaches, adk_cache_step
from google.adk.agents.context_cache_config import ContextCacheConfig
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.models.cache_metadata import CacheMetadata
from google.genai import types

from contextengine.core.prompt_cache import (
    Action,
    CacheSettings,
    Decision,
    Fingerprints,
    decide,
    find_cache_info,
    text_chars,
)
from contextengine.core.structs import dict_to_struct
from contextengine.prompt_cache.request import read_model_request_parts
from contextengine.v1 import content_pb2, event_pb2
from tests.core.context.adk_compare import adk_options, ours, run_adk, to_proto

pytestmark = pytest.mark.parity

AGENT = "agent"
HELPER = "helper"
SESSIONS = 120

_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "weather",
    "paris",
    "rome",
    "cache",
    "prefix",
    "token",
    "model",
    "agent",
    "tool",
]

_TOOL_A = {
    "function_declarations": [
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "OBJECT",
                "properties": {"city": {"type": "STRING"}},
                "required": ["city"],
            },
        },
        {"name": "get_time", "description": "Local time of a city."},
    ]
}
_TOOL_B = {"function_declarations": [{"name": "search", "description": "Web search " * 30}]}
_TOOL_C: dict[str, Any] = {"google_search": {}}
_TOOL_SETS: list[list[dict[str, Any]]] = [
    [_TOOL_A, _TOOL_B],
    [_TOOL_B, _TOOL_A],  # reordered: same fingerprint
    [
        {"function_declarations": list(reversed(_TOOL_A["function_declarations"]))},
        _TOOL_B,
    ],  # declarations reordered: same fingerprint
    [_TOOL_A, _TOOL_B, _TOOL_C],
    [],
]
_INSTRUCTIONS = [
    "You are a careful assistant. " * 40,
    "You are a terse assistant. " * 400,
    None,
]
_MODELS = [
    "gemini-2.5-flash",
    "gemini-3-pro-preview",
    "gemini-2.0-flash",
    "projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro",
    "tuned-model-123",
]


def _text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def _adk_action(step: AdkStep) -> Action:
    if step.created_contents is not None:
        return Action.CREATE
    if step.metadata is not None and step.metadata.cache_name is not None:
        return Action.REUSE
    return Action.FINGERPRINT_ONLY


@dataclass
class _Session:
    rng: random.Random
    config: ContextCacheConfig
    model: str
    now: float = 1_700_000_000.0
    instruction: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_config: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.adk_events: list[Event] = []
        self.engine_events: list[event_pb2.Event] = []
        self.caches = FakeCaches()
        self.steps: list[str] = []
        self.actions: list[Action] = []

    def tick(self, low: float = 0.5, high: float = 5.0) -> float:
        self.now += self.rng.uniform(low, high)
        return self.now

    def append(self, event: Event, engine_metadata: event_pb2.CacheMetadata | None = None) -> None:
        self.adk_events.append(event)
        (proto,) = to_proto([event])
        proto.sequence = len(self.adk_events)
        proto.ClearField("cache_metadata")
        if engine_metadata is not None:
            proto.cache_metadata.CopyFrom(engine_metadata)
        self.engine_events.append(proto)


def _engine_decision(
    session: _Session, invocation_id: str
) -> tuple[Decision, list[content_pb2.Content]]:
    events = session.engine_events
    contents = ours(events, adk_options(agent_name=AGENT))
    instruction = (
        content_pb2.Content(parts=[content_pb2.Part(text=session.instruction)])
        if session.instruction is not None
        else None
    )
    parts = read_model_request_parts(
        session.model,
        instruction,
        [dict_to_struct(tool) for tool in session.tools or []],
        dict_to_struct(session.tool_config) if session.tool_config is not None else None,
    )
    fingerprints = Fingerprints(parts.prefix, contents)
    config = session.config
    decision = decide(
        find_cache_info(events, AGENT, invocation_id),
        roles=[content.role for content in contents],
        fingerprint=fingerprints.of,
        settings=CacheSettings(config.cache_intervals, config.ttl_seconds, config.min_tokens),
        now=session.now,
        model=session.model,
        fixed_chars=parts.fixed_chars,
        content_chars=lambda: [text_chars(content) for content in contents],
    )
    return decision, contents


async def _model_call(session: _Session, invocation_id: str, last: bool, index: int) -> None:
    rng = session.rng
    fail = rng.random() < 0.15
    server_expire = rng.random() < 0.4
    session.caches.server_expire_time = (
        session.now + session.config.ttl_seconds - 7 if server_expire else None
    )
    session.caches.fail_next = RuntimeError("400 INVALID_ARGUMENT (fake)") if fail else None
    expected_name = session.caches.next_name()

    decision, contents = _engine_decision(session, invocation_id)
    adk_contents = run_adk(session.adk_events, adk_options(agent_name=AGENT))
    step = await adk_cache_step(
        session.adk_events,
        adk_contents,
        agent_name=AGENT,
        invocation_id=invocation_id,
        model=session.model,
        system_instruction=session.instruction,
        tools=[types.Tool.model_validate(tool) for tool in session.tools or []],
        tool_config=(
            types.ToolConfig.model_validate(session.tool_config) if session.tool_config else None
        ),
        config=session.config,
        caches=session.caches,
        now=session.now,
    )
    session.caches.fail_next = None
    if decision.action is Action.CREATE:
        if fail:
            decision = decision.creation_failed("creation failed")
        else:
            server = session.caches.server_expire_time
            # the server's time travels as an RFC 3339 timestamp (microseconds)
            expire = (
                datetime.datetime.fromtimestamp(server, datetime.UTC).timestamp()
                if server is not None
                else session.now + session.config.ttl_seconds
            )
            decision = decision.created(expected_name, expire, session.now)
    adk_action = _adk_action(step)
    if adk_action is Action.CREATE and step.metadata is None:
        raise AssertionError("ADK created a cache but returned no metadata")
    where = (
        f"{invocation_id} call {index}: ADK {adk_action.name} {step.metadata!s} deleted "
        f"{step.deleted}; engine {decision}"
    )
    session.steps.append(where)
    assert len(contents) == len(adk_contents), where
    assert decision.action is adk_action, where
    assert step.metadata is not None, where
    metadata = decision.metadata
    assert metadata.contents_count == step.metadata.contents_count, where
    assert metadata.invocations_used == step.metadata.invocations_used, where
    assert metadata.cache_name == step.metadata.cache_name, where
    assert metadata.expire_time == step.metadata.expire_time, where
    assert (decision.invalidated_cache_name,) == (step.deleted or (None,)), where
    if adk_action is Action.CREATE:
        assert step.created_contents == metadata.contents_count, where
    uses_cache = decision.action in (Action.REUSE, Action.CREATE)
    assert (decision.send_from_index if uses_cache else 0) == step.dropped, where
    session.actions.append(decision.action)

    usage_roll = rng.random()
    usage = None
    if usage_roll > 0.1:
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=rng.choice(
                [rng.randint(0, 1500), rng.randint(1500, 6000), rng.randint(6000, 60000)]
            )
        )
    if last:
        content = types.Content(role="model", parts=[types.Part(text=_text(rng, 20, 3000))])
    else:
        content = types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(
                        id=f"call-{invocation_id}-{index}", name="get_weather", args={"city": "x"}
                    )
                )
            ],
        )
    response = Event(
        id=f"m-{invocation_id}-{index}",
        author=AGENT,
        invocation_id=invocation_id,
        timestamp=session.tick(),
        content=content,
        usage_metadata=usage,
        cache_metadata=step.metadata,
    )
    session.append(response, metadata.to_proto())
    if not last:
        session.append(
            Event(
                id=f"r-{invocation_id}-{index}",
                author=AGENT,
                invocation_id=invocation_id,
                timestamp=session.tick(),
                content=types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                id=f"call-{invocation_id}-{index}",
                                name="get_weather",
                                response={"result": _text(rng, 10, 2500)},
                            )
                        )
                    ],
                ),
            )
        )


def _helper_event(session: _Session, invocation_id: str) -> None:
    rng = session.rng
    metadata = CacheMetadata(fingerprint="0123456789abcdef", contents_count=rng.randint(0, 5))
    if rng.random() < 0.5:
        metadata = CacheMetadata(
            cache_name="cachedContents/helper",
            expire_time=session.now + 10_000,
            fingerprint="fedcba9876543210",
            invocations_used=1,
            contents_count=1,
            created_at=session.now,
        )
    engine = event_pb2.CacheMetadata(fingerprint="other", contents_count=metadata.contents_count)
    event = Event(
        id=f"h-{invocation_id}-{len(session.adk_events)}",
        author=HELPER,
        invocation_id=invocation_id,
        timestamp=session.tick(),
        content=types.Content(role="model", parts=[types.Part(text=_text(rng, 20, 400))]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=99_999),
        cache_metadata=metadata,
    )
    session.append(event, engine)


def _summary_event(session: _Session) -> None:
    stamps = [event.timestamp for event in session.adk_events if not event.actions.compaction]
    if len(stamps) < 3:
        return
    end = stamps[session.rng.randint(1, len(stamps) - 2)]
    event = Event(
        id=f"s-{len(session.adk_events)}",
        author="user",
        invocation_id=f"summary-{len(session.adk_events)}",
        timestamp=session.tick(),
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=stamps[0],
                end_timestamp=end,
                compacted_content=types.Content(
                    role="model", parts=[types.Part(text=_text(session.rng, 50, 600))]
                ),
            )
        ),
    )
    session.append(event)


async def _play(seed: int) -> _Session:
    rng = random.Random(seed)
    config = ContextCacheConfig(
        cache_intervals=rng.choice([1, 2, 3, 5, 10]),
        ttl_seconds=rng.choice([30, 300, 1800]),
        min_tokens=rng.choice([0, 0, 800, 4000]),
    )
    session = _Session(rng, config, rng.choice(_MODELS))
    session.instruction = rng.choice(_INSTRUCTIONS)
    session.tools = rng.choice(_TOOL_SETS)
    if rng.random() < 0.3:
        session.tool_config = {"function_calling_config": {"mode": "AUTO"}}
    for number in range(rng.randint(3, 12)):
        invocation_id = f"inv-{number}"
        roll = rng.random()
        if roll < 0.15:
            session.now += rng.choice([0.0, -1.0, 1.0, 5.0]) + config.ttl_seconds
        elif roll < 0.3:
            session.now += rng.uniform(0, config.ttl_seconds)
        if rng.random() < 0.1:
            session.instruction = rng.choice(_INSTRUCTIONS)
        if rng.random() < 0.15:
            session.tools = rng.choice(_TOOL_SETS)
        session.append(
            Event(
                id=f"u-{invocation_id}",
                author="user",
                invocation_id=invocation_id,
                timestamp=session.tick(),
                content=types.Content(role="user", parts=[types.Part(text=_text(rng, 10, 4000))]),
            )
        )
        calls = rng.choice([1, 1, 2, 3])
        for index in range(calls):
            if rng.random() < 0.1:
                _helper_event(session, invocation_id)
            if rng.random() < 0.06:
                _summary_event(session)
            await _model_call(session, invocation_id, index == calls - 1, index)
    return session


@pytest.mark.parametrize("block", range(4))
async def test_decisions_equal_adk(block: int) -> None:
    seen: dict[Action, int] = dict.fromkeys(Action, 0)
    per_block = SESSIONS // 4
    for seed in range(block * per_block, (block + 1) * per_block):
        session = await _play(seed)
        for action in session.actions:
            seen[action] += 1
    # the sessions exercise every branch of the decision table
    assert all(count > 10 for count in seen.values()), seen
