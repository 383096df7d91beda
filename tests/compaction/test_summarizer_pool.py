"""SummarizerPool: one summarizer per distinct summarizer configuration (built on first use,
from the configuration the resolver gives), closed once with the compactor; a summarizer that
fails to close does not stop the others."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contextengine.compaction.summarizer_pool import SummarizerPool
from contextengine.compaction.summarizers.summarizer import Summarizer, Summary, SummaryInput
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.resolver import ConfigResolver
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import MemoryStore
from contextengine.v1 import config_pb2

pytestmark = pytest.mark.unit


class Closing:
    """A summarizer that records being closed (and can fail to)."""

    def __init__(self, name: str, fails: bool = False) -> None:
        self.name = name
        self.fails = fails
        self.closed = 0

    async def summarize(self, request: SummaryInput) -> Summary | None:
        return None

    async def aclose(self) -> None:
        self.closed += 1
        if self.fails:
            raise RuntimeError("cannot close")


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    store = MemoryStore()
    await store.open()
    yield store
    await store.close()


async def test_one_summarizer_per_configuration_and_each_closed_once(store: MemoryStore) -> None:
    built: list[Closing] = []

    def factory(config: config_pb2.SummarizerConfig | None) -> Summarizer | None:
        if config is not None and config.WhichOneof("kind") == "client":
            return None
        summarizer = Closing(f"s{len(built)}", fails=not built)
        built.append(summarizer)
        return summarizer

    short = config_pb2.AppConfig(app_name="short")
    short.summarizer.extractive.max_chars = 100
    same = config_pb2.AppConfig(app_name="same")
    same.summarizer.CopyFrom(short.summarizer)
    client = config_pb2.AppConfig(app_name="client")
    client.summarizer.client.SetInParent()
    apps = AppConfigs(store)
    for app in (short, same, client):
        await apps.put(app)
    pool = SummarizerPool(ConfigResolver(apps, SessionConfigs(store)), factory)

    default = await pool.get("unconfigured")
    assert default is built[0]
    assert await pool.get("other-unconfigured") is default
    assert await pool.get("short") is built[1]
    assert await pool.get("same") is built[1]  # an equal configuration shares it
    assert await pool.get("client") is None
    assert await pool.get("client") is None
    assert len(built) == 2

    await pool.close()  # the first fails to close: logged, the second is still closed
    assert [summarizer.closed for summarizer in built] == [1, 1]
    await pool.close()
    assert [summarizer.closed for summarizer in built] == [1, 1]
