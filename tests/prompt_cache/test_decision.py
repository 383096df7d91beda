"""ADK's cache rules as named examples (sections 7.1-7.7 of the specification); the random
differential test against google-adk itself is tests/prompt_cache/test_cache_differential.py."""

from __future__ import annotations

import pytest

from contextengine.core.prompt_cache import (
    BELOW_MIN_TOKENS,
    BELOW_MODEL_MINIMUM,
    NO_PREVIOUS_PROMPT,
    Action,
    CacheInfo,
    CacheSettings,
    Metadata,
    cacheable_count,
    decide,
    estimate_prefix_tokens,
    find_cache_info,
    minimum_cache_tokens,
    send_from_index,
)
from contextengine.v1 import event_pb2

pytestmark = pytest.mark.unit

NOW = 1_000.0


def _fp(n: int) -> str:
    return f"fp{n}"


def _decide(info: CacheInfo, roles: list[str], **kwargs: object) -> object:
    params: dict[str, object] = {
        "roles": roles,
        "fingerprint": _fp,
        "settings": CacheSettings(cache_intervals=2, ttl_seconds=60),
        "now": NOW,
        "model": "gemini-2.0-flash",
    }
    params.update(kwargs)
    return decide(info, **params)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("roles", "count"),
    [
        ([], 0),
        (["user", "user"], 0),
        (["user", "model"], 2),
        (["user", "model", "user"], 2),
        (["model", "user", "model", "user", "user"], 3),
    ],
)
def test_cacheable_count(roles: list[str], count: int) -> None:
    assert cacheable_count(roles) == count


def test_send_from_index_counts_the_appended_user_content() -> None:
    # [u, m, u]: the request has 3 contents; a 2-content cache leaves out 2 (the last is sent)
    assert send_from_index(2, ["user", "model", "user"]) == 2
    # [u, m]: ADK appends a user content, so both cached contents can be left out
    assert send_from_index(2, ["user", "model"]) == 2
    # [u]: a cache of 1 content still sends the last one
    assert send_from_index(1, ["user"]) == 0
    assert send_from_index(0, ["user", "model", "user"]) == 0


def test_first_call_is_fingerprint_only() -> None:
    decision = _decide(CacheInfo(None, 5000), ["user"])
    assert decision.action is Action.FINGERPRINT_ONLY  # type: ignore[attr-defined]
    assert decision.metadata == Metadata("fp0", 0)  # type: ignore[attr-defined]


def test_adk_verified_sequence() -> None:
    """The sequence the specification verified against the package (section 7.5)."""
    second = _decide(CacheInfo(Metadata("fp0", 0), 5000), ["user", "model", "user"])
    assert second.action is Action.CREATE  # type: ignore[attr-defined]
    assert second.metadata == Metadata("fp2", 2)  # type: ignore[attr-defined]
    assert second.send_from_index == 2  # type: ignore[attr-defined]
    created = second.created("c1", NOW + 60, NOW)  # type: ignore[attr-defined]
    assert created.metadata == Metadata("fp2", 2, "c1", NOW + 60, 1, NOW)
    reused = _decide(
        CacheInfo(Metadata("fp2", 2, "c1", NOW + 60, 2, NOW), 5000),
        ["user", "model", "user", "model", "user"],
    )
    assert reused.action is Action.REUSE  # type: ignore[attr-defined]
    assert reused.metadata.invocations_used == 2  # type: ignore[attr-defined]
    exhausted = _decide(
        CacheInfo(Metadata("fp2", 2, "c1", NOW + 60, 3, NOW), 5000),
        ["user", "model"] * 3 + ["user"],
    )
    assert exhausted.action is Action.CREATE  # type: ignore[attr-defined]
    assert exhausted.invalidated_cache_name == "c1"  # type: ignore[attr-defined]
    assert exhausted.metadata.contents_count == 6  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("expire_time", "used", "action"),
    [
        (NOW + 0.001, 2, Action.REUSE),
        (NOW, 2, Action.CREATE),  # now >= expire_time: expired
        (NOW + 10, 3, Action.CREATE),  # used > cache_intervals
    ],
)
def test_validity_boundaries(expire_time: float, used: int, action: Action) -> None:
    info = CacheInfo(Metadata("fp2", 2, "c1", expire_time, used, NOW - 5), 5000)
    assert _decide(info, ["user", "model", "user"]).action is action  # type: ignore[attr-defined]


def test_changed_prefix_falls_back_to_the_current_prefix() -> None:
    info = CacheInfo(Metadata("other", 2, "c1", NOW + 10, 1, NOW), 5000)
    decision = _decide(info, ["user", "model", "user", "model", "user"])
    assert decision.action is Action.FINGERPRINT_ONLY  # type: ignore[attr-defined]
    assert decision.invalidated_cache_name == "c1"  # type: ignore[attr-defined]
    assert decision.metadata == Metadata("fp4", 4)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("previous", "kwargs", "reason"),
    [
        (None, {}, NO_PREVIOUS_PROMPT),
        (99, {"settings": CacheSettings(min_tokens=100)}, BELOW_MIN_TOKENS),
        (3000, {"model": "gemini-2.5-flash"}, BELOW_MODEL_MINIMUM),
        (5000, {"model": "models/gemini-3-pro-preview"}, BELOW_MODEL_MINIMUM),
    ],
)
def test_creation_gates(previous: int | None, kwargs: dict[str, object], reason: str) -> None:
    # the prefix is half of the text: the estimate is half the previous prompt
    decision = _decide(
        CacheInfo(Metadata("fp2", 2), previous),
        ["user", "model", "user"],
        content_chars=lambda: [100, 100, 200],
        **kwargs,
    )
    assert decision.action is Action.FINGERPRINT_ONLY  # type: ignore[attr-defined]
    assert decision.not_created_reason == reason  # type: ignore[attr-defined]
    assert decision.metadata == Metadata("fp2", 2)  # type: ignore[attr-defined]


def test_model_floors_and_estimate() -> None:
    assert minimum_cache_tokens("gemini-2.5-flash") == 2048
    assert minimum_cache_tokens("projects/p/locations/l/models/gemini-2.5-pro") == 2048
    assert minimum_cache_tokens("gemini-3-flash") == 4096
    assert minimum_cache_tokens("gemini-2.0-flash") is None
    assert minimum_cache_tokens("gemini-2.5") is None
    # (400 + 400) // 4 = 200 of (400 + 800 + 109) // 4 = 327 estimated: 8000 * 200 / 327
    assert (
        estimate_prefix_tokens(
            8000, fixed_chars=400, content_chars=[400, 400], appended=109, contents_count=1
        )
        == 4892
    )
    assert (
        estimate_prefix_tokens(8000, fixed_chars=0, content_chars=[0], appended=0, contents_count=1)
        == 8000
    )
    assert (
        estimate_prefix_tokens(0, fixed_chars=10, content_chars=[10], appended=0, contents_count=1)
        == 0
    )


def _event(
    author: str, invocation: str, metadata: Metadata | None, tokens: int | None
) -> event_pb2.Event:
    event = event_pb2.Event(author=author, invocation_id=invocation)
    if metadata is not None:
        event.cache_metadata.CopyFrom(metadata.to_proto())
    if tokens is not None:
        event.usage_metadata.prompt_token_count = tokens
    return event


def test_scan_counts_invocations_only_across_invocations() -> None:
    active = Metadata("f", 2, "c1", NOW + 10, 1, NOW)
    log = [
        _event("agent", "i1", active, 100),
        _event("other", "i2", Metadata("g", 1), 999),
        _event("agent", "i2", None, None),
    ]
    assert find_cache_info(log, "agent", "i2").metadata.invocations_used == 2  # type: ignore[union-attr]
    assert find_cache_info(log, "agent", "i1").metadata.invocations_used == 1  # type: ignore[union-attr]
    info = find_cache_info(log, "agent", "i2")
    assert info.previous_prompt_tokens == 100
    # fingerprint-only metadata is copied as it is; an empty invocation id never increments
    log.append(_event("agent", "", active, 7))
    assert find_cache_info(log, "agent", "i3").metadata.invocations_used == 1  # type: ignore[union-attr]
    assert find_cache_info(log, "agent", "i3").previous_prompt_tokens == 7
    assert find_cache_info(log, "nobody", "i3") == CacheInfo(None, None)
