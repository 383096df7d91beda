"""Which plan a trigger makes over a session's log, and whether the configuration in effect
allows that trigger at all.

The planners themselves are pure (``contextengine.core.compaction``); this module picks the one
a trigger names and feeds it the session's size memo and the view's preamble.
"""

from __future__ import annotations

from collections.abc import Callable

from contextengine.compaction.types import View
from contextengine.core.compaction import (
    SLIDING_WINDOW,
    TOKEN_THRESHOLD,
    PlanResult,
    TokenReading,
    plan_after_invocation,
    plan_sliding_window,
    plan_token_threshold,
)
from contextengine.core.errors import ContextEngineError
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.runtime.resolver import ConfigResolver
from contextengine.store import SessionKey
from contextengine.v1 import config_pb2, event_pb2

__all__ = ["configures", "make_plan", "require_config"]


def configures(config: config_pb2.EventsCompactionConfig, trigger: str) -> bool:
    """Whether ``config`` sets the pair ``trigger`` needs (any pair for after_invocation)."""
    if trigger == SLIDING_WINDOW:
        return config.HasField("compaction_interval") and config.HasField("overlap_size")
    if trigger == TOKEN_THRESHOLD:
        return config.HasField("token_threshold") and config.HasField("event_retention_size")
    return True


async def require_config(
    events: SessionEventCache, resolver: ConfigResolver, key: SessionKey, trigger: str
) -> config_pb2.EventsCompactionConfig:
    """The configuration in effect for the session; SESSION_NOT_FOUND first, then
    COMPACTION_NOT_CONFIGURED when there is none or it does not configure ``trigger``."""
    await events.log(key)  # NOT_FOUND first
    config = await resolver.compaction(key)
    if config is None:
        raise ContextEngineError(
            "COMPACTION_NOT_CONFIGURED",
            f"neither session {key.session_id!r} nor its app {key.app_name!r} has an "
            "events_compaction_config",
            app_name=key.app_name,
        )
    if not configures(config, trigger):
        raise ContextEngineError(
            "COMPACTION_NOT_CONFIGURED",
            f"the compaction configuration of session {key.session_id!r} (app "
            f"{key.app_name!r}) does not configure the {trigger} trigger",
            app_name=key.app_name,
        )
    return config


def make_plan(
    log: list[event_pb2.Event],
    config: config_pb2.EventsCompactionConfig,
    trigger: str,
    view: View,
    preamble: str,
    sizes: dict[int, int],
    ignore_trigger: bool = False,
    reading: Callable[[], TokenReading] | None = None,
) -> PlanResult:
    """The plan ``trigger`` makes over ``log``. ``sizes``: the session's size memo;
    ``reading`` (token threshold): the token reading, when the caller has a cheaper way to it
    than the planner's own."""
    if trigger == SLIDING_WINDOW:
        return plan_sliding_window(log, config, ignore_trigger=ignore_trigger, memo=sizes)
    if trigger == TOKEN_THRESHOLD:
        return plan_token_threshold(
            log,
            config,
            agent_name=view.agent_name,
            memo=sizes,
            branch=view.branch,
            reading=reading,
            isolation_scope=view.isolation_scope,
            ignore_trigger=ignore_trigger,
            other_agent_preamble=preamble,
        )
    return plan_after_invocation(
        log, config, other_agent_preamble=preamble, ignore_trigger=ignore_trigger, memo=sizes
    )
