"""End to end: one scripted multi-agent conversation (transfers both ways, parallel tool calls, a
long-running call answered in a later turn, a tool confirmation, a rewind, enough invocations
to compact) through a real google-adk ``Runner``, twice:

* plain ADK: ``InMemorySessionService``, ADK's own compaction with a deterministic summarizer;
* ADK with the three drop-ins (``ContextEngineSessionService``, ``ContextEnginePlugin``,
  ``ContextEngineMemoryService``) on one backend, embedded and against a real sidecar out of
  process; no compaction in ADK, the engine compacting with a Gemini summarizer (the fake
  Gemini server, answering what the ADK side's summarizer answers for the same prompt).

Every model request's contents must be identical, and the two session logs equal event by event
(a summary event's id, invocation id and timestamp are its writer's: ADK's clock or the
engine's). The fixed script and hypothesis-drawn conversations. ADK's own
``SqliteSessionService`` against ``InMemorySessionService`` checks the harness itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from google.adk.apps.app import EventsCompactionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from hypothesis import HealthCheck, given, settings

from .differential import Outcome, normalized, quiet_adk, run_reference
from .scripted import Turn, deterministic_adk, fixed_script, turns


def _sliding_window() -> EventsCompactionConfig:
    with quiet_adk():
        return EventsCompactionConfig(compaction_interval=3, overlap_size=1)


def assert_same(expected: Outcome, actual: Outcome) -> None:
    assert len(actual.requests) == len(expected.requests)
    for n, (want, got) in enumerate(zip(expected.requests, actual.requests, strict=True), 1):
        assert got == want, f"model request {n} differs"
    want_events, got_events = normalized(expected.events), normalized(actual.events)
    for n, (event, other) in enumerate(zip(want_events, got_events, strict=False), 1):
        assert other == event, f"event {n} differs"
    assert len(got_events) == len(want_events)


async def _reference(
    conversation: Sequence[Turn],
    compaction: EventsCompactionConfig | None,
    monkeypatch: pytest.MonkeyPatch,
) -> Outcome:
    with deterministic_adk():
        return await run_reference(conversation, compaction, InMemorySessionService(), monkeypatch)


async def test_adk_sqlite_matches_in_memory_on_the_fixed_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness itself: ADK against ADK, every request and event equal. Without the
    confirmation: ADK stamps the confirmation request after the tool's response but appends it
    first, and ``SqliteSessionService`` returns events in timestamp order, the in-memory service
    in append order (an ADK divergence, not the harness's)."""
    conversation = fixed_script(without=["confirm"])
    expected = await _reference(conversation, _sliding_window(), monkeypatch)
    assert any(e.actions.compaction for e in expected.events), "the script must compact"
    assert any(e.actions.rewind_before_invocation_id for e in expected.events)
    with deterministic_adk():
        actual = await run_reference(
            conversation,
            _sliding_window(),
            SqliteSessionService(str(tmp_path / "adk.db")),
            monkeypatch,
        )
    assert_same(expected, actual)


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(conversation=turns(max_size=8))
async def test_adk_reference_is_deterministic(
    conversation: list[Turn], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two plain runs of one drawn conversation are equal (what the comparison relies on)."""
    first = await _reference(conversation, _sliding_window(), monkeypatch)
    second = await _reference(conversation, _sliding_window(), monkeypatch)
    assert_same(first, second)
