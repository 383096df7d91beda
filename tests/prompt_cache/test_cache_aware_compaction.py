"""Cache-aware compaction (ContextCacheConfig.cache_aware_compaction): the policy end to end on
the in-process engine, against the same sessions without the option (google-adk's behaviour),
and its pure parts."""

from __future__ import annotations

import pytest

from contextengine.core.prompt_cache import CacheSettings, Metadata
from contextengine.core.prompt_cache._compaction import (
    cached_prefix,
    consolidated_plan,
    is_warm,
    predicted_prompt_tokens,
)
from contextengine.v1 import config_pb2, context_service_pb2 as cpb, event_pb2

from .harness import AGENT, engine

pytestmark = pytest.mark.unit

SLIDING = config_pb2.EventsCompactionConfig(compaction_interval=2, overlap_size=0)


def _cache(aware: bool, **aware_fields: int) -> config_pb2.ContextCacheConfig:
    config = config_pb2.ContextCacheConfig(cache_intervals=10, ttl_seconds=1000)
    if aware:
        config.cache_aware_compaction.SetInParent()
        for name, value in aware_fields.items():
            setattr(config.cache_aware_compaction, name, value)
    return config


async def test_adk_compaction_breaks_the_cache() -> None:
    """Without the option: ADK's sliding window summarises the cached turns, so the next model
    call finds its prefix changed and gets no cache."""
    e = await engine(SLIDING, _cache(aware=False))
    first = await e.invocation(1)
    assert first.cache_decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    second = await e.invocation(2)
    assert second.cache_decision.action == cpb.CACHE_ACTION_CREATE
    assert len(await e.summaries()) == 1  # after i2: i1..i2 summarised
    third = await e.invocation(3)
    assert third.cache_decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert third.cache_decision.invalidated_cache_name == "cachedContents/c1"


async def test_warm_cache_summary_goes_after_the_prefix() -> None:
    """With the option: the summary covers only what follows the cached prefix, the cache is
    reused, and the summarised turn is gone from the contents."""
    e = await engine(SLIDING, _cache(aware=True))
    await e.invocation(1)
    second = await e.invocation(2)
    assert second.cache_decision.cache_metadata.contents_count == 2  # i1's question, answer
    (summary,) = await e.summaries()
    log = await e.log()
    covered = [ev for ev in log if summary.actions.compaction.start_sequence <= ev.sequence]
    assert covered[0].content.parts[0].text.startswith("question 2")  # not i1's events
    third = await e.invocation(3)
    decision = third.cache_decision
    assert decision.action == cpb.CACHE_ACTION_REUSE
    assert decision.cache_name == "cachedContents/c1"
    texts = [c.parts[0].text for c in third.contents]
    assert texts[:3] == ["question 1 x", "answer 1 x", "summary 1"]
    assert "question 2 x" not in texts


async def test_compaction_at_expiry_lets_adk_recreate_in_the_same_request() -> None:
    """A cold cache (expired by the server's clock): compaction runs, still after the old
    prefix, so the next call re-creates the cache at once instead of a fingerprint-only call."""
    e = await engine(SLIDING, _cache(aware=True))
    await e.invocation(1)
    await e.invocation(2)
    e.clock.now += 5000  # the cache expired
    await e.invocation(3)
    await e.invocation(4)
    fifth = await e.invocation(5)
    actions = [d.action for d in e.decisions]
    assert cpb.CACHE_ACTION_FINGERPRINT_ONLY not in actions[2:], actions
    assert fifth.cache_decision.action in (cpb.CACHE_ACTION_REUSE, cpb.CACHE_ACTION_CREATE)


async def test_hard_limit_consolidates() -> None:
    """At the hard limit a narrowed summary that does not shrink the prompt enough gives way to
    one summary of everything before the retained tail, earlier summaries rolled in."""
    config = config_pb2.EventsCompactionConfig(token_threshold=1_000_000, event_retention_size=1)
    e = await engine(config, _cache(aware=True, hard_token_limit=6000))
    for number in range(1, 5):
        await e.invocation(number, prompt_tokens=1000)
    assert await e.summaries() == []
    await e.add("user", "i5", "question 5")
    # the agent's last prompt was 1000 tokens; 5 invocations later it reports 7000: due
    await e.model_call("i5", "answer 5", prompt_tokens=7000)
    await e.add("user", "i6", "question 6")
    response = await e.model_call("i6", "answer 6")
    assert response.compaction_sequence > 0
    assert len(await e.summaries()) == 1
    texts = [c.parts[0].text for c in response.contents]
    assert texts[0] == "summary 1"
    assert texts[-1] == "question 6"


def _event(
    sequence: int,
    author: str,
    role: str,
    *,
    metadata: Metadata | None = None,
    tokens: int | None = None,
    invocation: str = "i",
    text: str = "t",
) -> event_pb2.Event:
    event = event_pb2.Event(
        sequence=sequence, author=author, invocation_id=invocation, timestamp=float(sequence)
    )
    event.content.role = role
    event.content.parts.add(text=text)
    if metadata is not None:
        event.cache_metadata.CopyFrom(metadata.to_proto())
    if tokens is not None:
        event.usage_metadata.prompt_token_count = tokens
    return event


def test_cached_prefix_boundary_and_warmth() -> None:
    fp = Metadata("f", 2)
    active = Metadata("g", 4, "c1", 100.0, 3, 10.0)
    log = [
        _event(1, "user", "user"),
        _event(2, AGENT, "model", metadata=fp, tokens=10, invocation="i1"),
        _event(3, "user", "user", invocation="i2"),
        _event(4, "user", "user", invocation="i2"),
        _event(5, AGENT, "model", metadata=active, tokens=20, invocation="i2"),
        _event(6, "user", "user", invocation="i3", text="x" * 400),
        _event(7, AGENT, "model", metadata=active, invocation="i3"),
    ]
    prefix = cached_prefix(log, AGENT)
    assert prefix is not None
    assert prefix.metadata == active
    assert prefix.boundary_sequence == 3  # the trailing user run before the first carrier
    settings = CacheSettings(cache_intervals=4)
    assert is_warm(prefix, settings, 99.0, "i3")  # same invocation: 3 <= 4
    assert is_warm(prefix, settings, 99.0, None)  # next invocation: 4 <= 4
    assert not is_warm(prefix, CacheSettings(cache_intervals=3), 99.0, None)
    assert not is_warm(prefix, settings, 100.0, "i3")  # expired
    assert cached_prefix(log, "nobody") is None
    # the newest count (20, at sequence 5) plus what came after it: 400 + 1 characters
    assert predicted_prompt_tokens(log, AGENT) == 20 + 401 // 4


def test_consolidated_plan_rolls_every_summary_and_stops_at_pins() -> None:
    log = [_event(n, "user" if n % 2 else AGENT, "user" if n % 2 else "model") for n in range(1, 9)]
    summary = event_pb2.Event(sequence=9, author="user", timestamp=9.0)
    summary.actions.compaction.start_timestamp = 1.0
    summary.actions.compaction.end_timestamp = 2.0
    summary.actions.compaction.compacted_content.parts.add(text="s")
    log.append(summary)
    config = config_pb2.EventsCompactionConfig(event_retention_size=2)
    plan = consolidated_plan(log, config, None)
    assert plan is not None
    assert [e.sequence for e in plan.covered] == [3, 4, 5, 6]
    assert plan.window[0].content.parts[0].text == "s"  # the old summary, rolled in
    assert plan.start_timestamp == 1.0
    log[4].pinned = True  # sequence 5
    pinned = consolidated_plan(log, config, None)
    assert pinned is not None
    assert [e.sequence for e in pinned.covered] == [3, 4]


async def test_token_threshold_is_deferred_while_warm_below_the_hard_limit() -> None:
    token = config_pb2.EventsCompactionConfig(token_threshold=3000, event_retention_size=1)
    plain = await engine(token, _cache(aware=False))
    aware = await engine(token, _cache(aware=True, hard_token_limit=9000))
    for e in (plain, aware):
        await e.invocation(1, prompt_tokens=1000)
        await e.invocation(2, prompt_tokens=1000)  # creates the cache
        await e.invocation(3, prompt_tokens=4000)  # over the threshold from now on
        await e.invocation(4, prompt_tokens=4000)
    assert [d.action for d in aware.decisions] == [
        cpb.CACHE_ACTION_FINGERPRINT_ONLY,
        cpb.CACHE_ACTION_CREATE,
        cpb.CACHE_ACTION_REUSE,
        cpb.CACHE_ACTION_REUSE,  # ADK compacted before this call and lost its cache
    ]
    assert plain.decisions[3].action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert len(await plain.summaries()) >= 1
    assert await aware.summaries() == []  # deferred: the cache was warm
    await aware.invocation(5, prompt_tokens=9500)  # over the hard limit: compacted after it
    assert len(await aware.summaries()) == 1
