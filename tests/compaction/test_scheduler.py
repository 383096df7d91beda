"""The Compactor in process (no server): the post-invocation pass runs in the background one at
a time per session, a trigger arriving meanwhile runs once after it, and close cancels a
running pass without appending anything."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from contextengine.compaction.compactor import Compactor
from contextengine.compaction.summarizers.summarizer import Summarizer, Summary, SummaryInput
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.runtime.resolver import ConfigResolver
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import MemoryStore, SessionKey
from contextengine.v1 import config_pb2, content_pb2, event_pb2
from tests.service.helpers import text_event

pytestmark = pytest.mark.unit

APP = "app"
KEY = SessionKey(APP, "user", "s1")
EVERY_INVOCATION = config_pb2.EventsCompactionConfig(compaction_interval=1, overlap_size=0)


class GatedSummarizer:
    """Answers once ``gate`` is set; counts its calls and how many ran at once."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.calls = 0
        self.active = 0
        self.max_active = 0

    async def summarize(self, request: SummaryInput) -> Summary | None:
        self.calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        self.entered.set()
        try:
            await self.gate.wait()
        finally:
            self.active -= 1
        return Summary(content_pb2.Content(parts=[content_pb2.Part(text=f"Summary {self.calls}.")]))


@dataclass
class Parts:
    store: MemoryStore
    compactor: Compactor
    summarizer: GatedSummarizer
    clock: float = 1000.0

    async def turn(self, n: int) -> None:
        for event in (
            text_event(f"Question {n}?", invocation_id=f"i{n}", event_id=f"q{n}"),
            text_event(f"Answer {n}.", author="agent", invocation_id=f"i{n}", event_id=f"a{n}"),
        ):
            self.clock += 1.0
            event.timestamp = self.clock
            await self.store.append_events(KEY, [event], None)

    async def summaries(self) -> list[event_pb2.Event]:
        events, _ = await self.store.list_events(KEY, 0, 1000)
        return [event for event in events if event.actions.HasField("compaction")]


@pytest.fixture
async def parts() -> AsyncIterator[Parts]:
    store = MemoryStore()
    await store.open()
    await store.create_session(KEY, {}, 1.0)
    apps = AppConfigs(store)
    await apps.put(config_pb2.AppConfig(app_name=APP, events_compaction_config=EVERY_INVOCATION))
    sessions = SessionConfigs(store)
    sessions.start()
    summarizer = GatedSummarizer()

    def factory(config: config_pb2.SummarizerConfig | None) -> Summarizer | None:
        return summarizer

    compactor = Compactor(store, SessionEventCache(store), ConfigResolver(apps, sessions), factory)
    yield Parts(store, compactor, summarizer)
    await compactor.close()
    sessions.close()
    await store.close()


async def test_one_pass_at_a_time_and_a_trigger_meanwhile_runs_once_after(parts: Parts) -> None:
    await parts.turn(1)
    assert await parts.compactor.end_invocation(KEY)
    async with asyncio.timeout(10):
        await parts.summarizer.entered.wait()
    await parts.turn(2)
    # Two more triggers while the pass runs: remembered once.
    assert await parts.compactor.end_invocation(KEY)
    assert await parts.compactor.end_invocation(KEY)
    assert parts.compactor.status(KEY).running
    parts.summarizer.gate.set()
    async with asyncio.timeout(10):
        await parts.compactor.idle(KEY)
    assert parts.summarizer.calls == 2
    assert parts.summarizer.max_active == 1
    assert len(await parts.summaries()) == 2
    status = parts.compactor.status(KEY)
    assert (status.running, status.attempts, status.summaries) == (False, 2, 2)


async def test_close_cancels_a_running_pass_and_appends_nothing(parts: Parts) -> None:
    await parts.turn(1)
    assert await parts.compactor.end_invocation(KEY)
    async with asyncio.timeout(10):
        await parts.summarizer.entered.wait()
    await parts.compactor.close()
    assert not parts.compactor.status(KEY).running
    assert await parts.summaries() == []
    assert not await parts.compactor.end_invocation(KEY)  # closed: nothing is scheduled


async def test_a_session_without_configuration_is_not_scheduled(parts: Parts) -> None:
    other = SessionKey("other-app", "user", "s1")
    await parts.store.create_session(other, {}, 1.0)
    assert not await parts.compactor.end_invocation(other)
    assert parts.compactor.tracked_sessions() == 0
