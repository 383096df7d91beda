"""``open_engine``: THE one wiring of the engine (the sidecar, the test harnesses and the
benchmarks all build it here, so no component is optional and no default is resolved twice)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from contextengine.compaction.compactor import Compactor, SummarizerFactory
from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.engine._engine import Engine
from contextengine.engine._settings import MEMORY_DB, EngineSettings
from contextengine.memory import open_memory_index
from contextengine.memory.service import MemoryService
from contextengine.prompt_cache.compaction_policy import CacheAwarePolicy
from contextengine.prompt_cache.service import PromptCache
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.runtime.resolver import ConfigResolver
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import EventStore, is_postgres_dsn
from contextengine.subscriptions.broadcaster import Broadcaster
from contextengine.subscriptions.event_stream import StreamSettings

if TYPE_CHECKING:
    from contextengine.compaction.summarizers.gemini import GeminiSettings

Clock = Callable[[], float]


def open_store(
    db: str,
    durability: Literal["normal", "full"] = "normal",
    telemetry: Telemetry = NO_TELEMETRY,
    *,
    pool_size: int = 10,
    settings: EngineSettings | None = None,
) -> EventStore:
    """The store for ``db``: in-memory for ``:memory:``, else a SQLite file (not opened yet),
    telling ``telemetry`` of its commits. A ``postgresql://`` / ``postgres://`` URL chooses the
    PostgreSQL store (at most ``pool_size`` connections; its timeouts from ``settings``, else
    the defaults)."""
    if db == MEMORY_DB:
        from contextengine.store.memory import MemoryStore

        return MemoryStore()
    if is_postgres_dsn(db):
        # A PostgreSQL database (durability is the server's: see store.postgres).
        from contextengine.store.postgres import PostgresStore, Timeouts

        timeouts = Timeouts()
        if settings is not None:
            timeouts = Timeouts(
                lock_seconds=settings.postgres_lock_timeout_seconds,
                statement_seconds=settings.postgres_statement_timeout_seconds,
                idle_in_transaction_seconds=settings.postgres_idle_tx_timeout_seconds,
            )
        return PostgresStore(
            db,
            durability=durability,
            pool_size=pool_size,
            timeouts=timeouts,
            telemetry=telemetry,
        )
    from contextengine.store.sqlite import SqliteStore

    return SqliteStore(db, durability=durability, telemetry=telemetry)


def _gemini(settings: EngineSettings) -> GeminiSettings:
    """The Gemini key from the environment, the endpoint from the settings or else it."""
    from contextengine.compaction.summarizers.gemini import GeminiSettings

    env = GeminiSettings.from_env()
    return GeminiSettings(env.api_key, settings.gemini_base_url or env.base_url)


def _default_summarizers(settings: EngineSettings) -> SummarizerFactory:
    from contextengine.compaction.summarizers.factory import summarizer_from_config

    gemini = _gemini(settings)
    return lambda config: summarizer_from_config(config, gemini)


def _prompt_cache(settings: EngineSettings, clock: Clock, telemetry: Telemetry) -> PromptCache:
    from contextengine.prompt_cache.gemini_caches import GeminiCaches, ManagedCaches

    caches = GeminiCaches(
        _gemini(settings),
        timeout_seconds=settings.gemini_cache_timeout_seconds,
        telemetry=telemetry,
    )
    return PromptCache(clock=clock, managed=ManagedCaches(caches, clock=clock))


def build_engine(
    settings: EngineSettings,
    *,
    store: EventStore | None = None,
    summarizers: SummarizerFactory | None = None,
    clock: Clock = time.time,
    telemetry: Telemetry = NO_TELEMETRY,
) -> Engine:
    """The engine's components, wired, nothing opened yet (``open_engine`` opens them)."""
    if store is None:
        store = open_store(
            settings.db,
            settings.durability,
            telemetry,
            pool_size=settings.postgres_pool_size,
            settings=settings,
        )
    events = SessionEventCache(store)
    app_configs = AppConfigs(store)
    session_configs = SessionConfigs(store)
    resolver = ConfigResolver(app_configs, session_configs)
    broadcaster = Broadcaster(store, settings.pacer())
    prompt_cache = _prompt_cache(settings, clock, telemetry)
    compactor = Compactor(
        store,
        events,
        resolver,
        summarizers if summarizers is not None else _default_summarizers(settings),
        clock=clock,
        backoff_seconds=settings.compaction_backoff_seconds,
        policy=CacheAwarePolicy(resolver, prompt_cache, clock=clock),
        telemetry=telemetry,
    )
    memory = MemoryService(
        open_memory_index(store, settings.memory_fts), events, app_configs, telemetry=telemetry
    )
    return Engine(
        store=store,
        events=events,
        app_configs=app_configs,
        session_configs=session_configs,
        resolver=resolver,
        compactor=compactor,
        prompt_cache=prompt_cache,
        memory=memory,
        broadcaster=broadcaster,
        streams=StreamSettings(
            buffer=settings.subscriber_buffer,
            buffer_bytes=settings.subscriber_buffer_bytes,
            heartbeat_seconds=settings.heartbeat_seconds,
        ),
        clock=clock,
        telemetry=telemetry,
    )


async def open_engine(
    settings: EngineSettings | None = None,
    *,
    store: EventStore | None = None,
    summarizers: SummarizerFactory | None = None,
    clock: Clock = time.time,
    telemetry: Telemetry = NO_TELEMETRY,
) -> Engine:
    """An open engine: ``async with await open_engine(EngineSettings(db=...)) as engine: ...``.

    ``store`` replaces the store made from ``settings.db`` (it is opened and closed by the
    engine); ``summarizers`` replaces how summarizers are made from app configurations;
    ``clock`` is the engine's time (tests and simulations move it); ``telemetry`` is told of the
    components' work (``core.telemetry``; the sidecar's metrics and traces). If opening fails,
    what was opened is closed again and the error raised."""
    engine = build_engine(
        settings if settings is not None else EngineSettings(),
        store=store,
        summarizers=summarizers,
        clock=clock,
        telemetry=telemetry,
    )
    try:
        await engine.open()
    except BaseException:
        await engine.close()
        raise
    return engine
