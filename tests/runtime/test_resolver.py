"""ConfigResolver: the configuration in effect (preamble default, a session's compaction
configuration over its app's, the summarizer configuration and its prompt template)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contextengine.core.context import DEFAULT_OTHER_AGENT_PREAMBLE
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.resolver import ConfigResolver
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import MemoryStore, SessionKey
from contextengine.v1 import config_pb2

pytestmark = pytest.mark.unit

APP = "app"
KEY = SessionKey(APP, "user", "s1")
APP_WINDOW = config_pb2.EventsCompactionConfig(compaction_interval=4, overlap_size=1)
OWN_WINDOW = config_pb2.EventsCompactionConfig(compaction_interval=2, overlap_size=0)


@pytest.fixture
async def parts() -> AsyncIterator[tuple[AppConfigs, SessionConfigs, ConfigResolver]]:
    store = MemoryStore()
    await store.open()
    await store.create_session(KEY, {}, 1.0)
    apps = AppConfigs(store)
    sessions = SessionConfigs(store)
    sessions.start()
    yield apps, sessions, ConfigResolver(apps, sessions)
    sessions.close()
    await store.close()


async def test_an_unconfigured_app_gets_the_defaults(
    parts: tuple[AppConfigs, SessionConfigs, ConfigResolver],
) -> None:
    _, _, resolver = parts
    assert await resolver.app(APP) is None
    assert await resolver.preamble(APP) == DEFAULT_OTHER_AGENT_PREAMBLE
    assert await resolver.compaction(KEY) is None
    assert await resolver.summarizer(APP) is None
    assert await resolver.prompt_template(APP) is None


async def test_the_app_configuration_applies(
    parts: tuple[AppConfigs, SessionConfigs, ConfigResolver],
) -> None:
    apps, _, resolver = parts
    app = config_pb2.AppConfig(
        app_name=APP, other_agent_preamble="Others said:", events_compaction_config=APP_WINDOW
    )
    app.summarizer.gemini.model = "m"
    app.summarizer.gemini.prompt_template = "Sum up: {conversation_history}"
    stored = await apps.put(app)
    assert await resolver.app(APP) == stored
    assert await resolver.preamble(APP) == "Others said:"
    assert await resolver.compaction(KEY) == APP_WINDOW
    assert await resolver.summarizer(APP) == app.summarizer
    assert await resolver.prompt_template(APP) == "Sum up: {conversation_history}"


async def test_an_empty_preamble_is_kept_and_a_gemini_summarizer_may_omit_the_template(
    parts: tuple[AppConfigs, SessionConfigs, ConfigResolver],
) -> None:
    apps, _, resolver = parts
    app = config_pb2.AppConfig(app_name=APP, other_agent_preamble="")
    app.summarizer.gemini.model = "m"
    await apps.put(app)
    assert await resolver.preamble(APP) == ""
    assert await resolver.prompt_template(APP) is None


async def test_the_session_configuration_replaces_the_app_one(
    parts: tuple[AppConfigs, SessionConfigs, ConfigResolver],
) -> None:
    apps, sessions, resolver = parts
    await apps.put(config_pb2.AppConfig(app_name=APP, events_compaction_config=APP_WINDOW))
    await sessions.put(KEY, config_pb2.SessionConfig(events_compaction_config=OWN_WINDOW))
    assert await resolver.compaction(KEY) == OWN_WINDOW
    other = SessionKey(APP, "user", "s2")
    assert await resolver.compaction(other) == APP_WINDOW  # missing session: its app's
    await sessions.put(KEY, config_pb2.SessionConfig())
    assert await resolver.compaction(KEY) == APP_WINDOW
