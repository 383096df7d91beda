"""This engine's side of the compaction parity tests: the pure planner, the summarizer prompt and
the summary event, on the log converted to ``contextengine.v1.Event`` protos.

* :func:`engine_post_invocation` mirrors ADK after an invocation with
  :func:`~contextengine.core.compaction.plan_after_invocation` (token threshold first over the
  root scope; when it plans nothing, the sliding window);
* :func:`engine_token_threshold` mirrors the in-flow check before an agent's model call with
  :func:`~contextengine.core.compaction.plan_token_threshold`.

When there is a plan, the prompt is ``fill_template(ADK_TEMPLATE, render_events(plan.window))``
with ADK's own default template (read from the installed package, never copied), the fake model's
answer is ``reply(prompt)`` (the same function the ADK side's fake model uses), and the summary
event is :func:`~contextengine.core.compaction.summary_event` with the same :class:`Stamp` as the
ADK side. The cold-start token estimate frames other agents' messages with ADK's own preamble.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.peers.adk_compaction import Reply, Stamp, adk_config
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context._fencing import OTHER_AGENT_CONTEXT_PREAMBLE
from google.genai import types
from google.protobuf import json_format

from contextengine.compaction.summarizers.summarizer import fill_template
from contextengine.core.compaction import (
    PlanResult,
    plan_after_invocation,
    plan_token_threshold,
    render_events,
    summary_event,
)
from contextengine.v1 import config_pb2, content_pb2, event_pb2

__all__ = [
    "ADK_TEMPLATE",
    "EngineCompaction",
    "engine_post_invocation",
    "engine_token_threshold",
    "one_key_payloads",
    "to_adk_config",
    "to_proto_config",
    "to_proto_event",
]

#: ADK's default summarization prompt template, from the installed google-adk.
ADK_TEMPLATE: str = LlmEventSummarizer._DEFAULT_PROMPT_TEMPLATE


def to_proto_config(config: EventsCompactionConfig) -> config_pb2.EventsCompactionConfig:
    """The same configuration as this engine's proto (unset fields stay unset)."""
    message = config_pb2.EventsCompactionConfig()
    if config.compaction_interval is not None:
        message.compaction_interval = config.compaction_interval
    if config.overlap_size is not None:
        message.overlap_size = config.overlap_size
    if config.token_threshold is not None:
        message.token_threshold = config.token_threshold
    if config.event_retention_size is not None:
        message.event_retention_size = config.event_retention_size
    return message


def to_adk_config(config: config_pb2.EventsCompactionConfig) -> EventsCompactionConfig:
    """The same configuration as ADK's (unset fields stay None)."""

    def value(field: int, present: bool) -> int | None:
        return field if present else None

    return adk_config(
        compaction_interval=value(
            config.compaction_interval, config.HasField("compaction_interval")
        ),
        overlap_size=value(config.overlap_size, config.HasField("overlap_size")),
        token_threshold=value(config.token_threshold, config.HasField("token_threshold")),
        event_retention_size=value(
            config.event_retention_size, config.HasField("event_retention_size")
        ),
    )


def to_proto_event(event: Event, sequence: int) -> event_pb2.Event:
    """An ADK event as ``contextengine.v1.Event`` (the documented JSON conversion)."""
    message = json_format.Parse(event.model_dump_json(exclude_none=True), event_pb2.Event())
    message.sequence = sequence
    return message


def _one_key(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _one_key(item) for key, item in list(value.items())[:1]}
    if isinstance(value, list):
        return [_one_key(item) for item in value]
    return value


def one_key_payloads(content: types.Content) -> types.Content:
    """``content`` with every dict of its call arguments and responses (at any depth) cut to its
    first key: the known deviation. A ``google.protobuf.Struct`` keeps no key order, and ADK's
    summarizer prints payloads with ``str(dict)``, in insertion order, so the prompts of
    multi-key payloads differ in key order only."""
    parts = []
    for part in content.parts or []:
        update: dict[str, Any] = {}
        call = part.function_call
        if call is not None and call.args is not None:
            update["function_call"] = call.model_copy(update={"args": _one_key(call.args)})
        response = part.function_response
        if response is not None and response.response is not None:
            update["function_response"] = response.model_copy(
                update={"response": _one_key(response.response)}
            )
        parts.append(part.model_copy(update=update) if update else part)
    return content.model_copy(update={"parts": parts}) if content.parts is not None else content


@dataclass(frozen=True)
class EngineCompaction:
    """What the engine decided, and what it would append."""

    result: PlanResult
    #: the summarizer prompt (None without a plan)
    prompt: str | None
    #: the summary event, with the next sequence of the log (None without a plan)
    event: event_pb2.Event | None


def _summarise(
    log: Sequence[event_pb2.Event], result: PlanResult, reply: Reply, stamp: Stamp
) -> EngineCompaction:
    plan = result.plan
    if plan is None:
        return EngineCompaction(result, None, None)
    prompt = fill_template(ADK_TEMPLATE, render_events(plan.window))
    summary = content_pb2.Content(parts=[content_pb2.Part(text=reply(prompt))])
    event = summary_event(
        plan,
        summary,
        event_id=stamp.event_id,
        invocation_id=stamp.invocation_id,
        timestamp=stamp.timestamp,
    )
    event.sequence = (log[-1].sequence if log else 0) + 1
    return EngineCompaction(result, prompt, event)


def engine_post_invocation(
    log: Sequence[event_pb2.Event],
    config: config_pb2.EventsCompactionConfig,
    *,
    reply: Reply,
    stamp: Stamp,
    memo: MutableMapping[int, int] | None = None,
) -> EngineCompaction:
    """The engine's post-invocation compaction of ``log`` (not modified)."""
    result = plan_after_invocation(
        log, config, other_agent_preamble=OTHER_AGENT_CONTEXT_PREAMBLE, memo=memo
    )
    return _summarise(log, result, reply, stamp)


def engine_token_threshold(
    log: Sequence[event_pb2.Event],
    config: config_pb2.EventsCompactionConfig,
    *,
    agent_name: str,
    branch: str | None,
    isolation_scope: str | None,
    reply: Reply,
    stamp: Stamp,
    memo: MutableMapping[int, int] | None = None,
) -> EngineCompaction:
    """The engine's token-threshold compaction before a model call of ``agent_name``."""
    result = plan_token_threshold(
        log,
        config,
        agent_name=agent_name,
        branch=branch,
        isolation_scope=isolation_scope,
        other_agent_preamble=OTHER_AGENT_CONTEXT_PREAMBLE,
        memo=memo,
    )
    return _summarise(log, result, reply, stamp)
