"""Run the same events through google-adk 2.13 and through ``build_contents``, and compare.

ADK's side calls its own functions (``_get_contents`` for ``IncludeContents.DEFAULT``,
``_get_current_turn_contents`` for ``NONE``, with other agents' thoughts off as ADK's contents
processor does) on ADK ``Event`` objects; ours converts the same events to
``contextengine.v1.Event`` with ``json_format`` and calls ``build_contents`` with ADK's own
other-agent preamble. Contents are compared as JSON, normalising only what the two encoders
spell differently for equal values: integral numbers (``1`` vs ``1.0``) and base64 flavours.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence
from typing import Any

from google.adk.events.event import Event
from google.adk.flows.llm_flows.context import _contents as adk_contents_module
from google.adk.flows.llm_flows.context._fencing import OTHER_AGENT_CONTEXT_PREAMBLE
from google.genai import types
from google.protobuf import json_format

from contextengine.core.context import ContextOptions, IncludeContents, build_contents
from contextengine.v1 import content_pb2, event_pb2

__all__ = [
    "ADK_PREAMBLE",
    "adk_options",
    "assert_matches_adk",
    "normalise",
    "ours",
    "run_adk",
    "to_proto",
]

#: ADK's own preamble, read from the installed package (never copied into this project).
ADK_PREAMBLE: str = OTHER_AGENT_CONTEXT_PREAMBLE


def adk_options(**kwargs: Any) -> ContextOptions:
    """``ContextOptions`` with ADK's preamble (for byte-for-byte comparison)."""
    kwargs.setdefault("other_agent_preamble", ADK_PREAMBLE)
    return ContextOptions(**kwargs)


def to_proto(events: Sequence[Event]) -> list[event_pb2.Event]:
    out = []
    for sequence, event in enumerate(events, start=1):
        message = json_format.Parse(event.model_dump_json(exclude_none=True), event_pb2.Event())
        message.sequence = sequence
        out.append(message)
    return out


def _adk_user_content(content: content_pb2.Content | None) -> types.Content | None:
    if content is None:
        return None
    return types.Content.model_validate(
        json_format.MessageToDict(content, preserving_proto_field_name=True)
    )


def run_adk(events: Sequence[Event], options: ContextOptions) -> list[types.Content]:
    common: dict[str, Any] = {
        "preserve_function_call_ids": options.preserve_function_call_ids,
        "isolation_scope": options.isolation_scope,
        "user_content": _adk_user_content(options.user_content),
    }
    if options.include_contents is IncludeContents.NONE:
        return adk_contents_module._get_current_turn_contents(
            options.branch,
            list(events),
            options.agent_name,
            include_thoughts_from_other_agents=False,
            **common,
        )
    return adk_contents_module._get_contents(
        options.branch,
        list(events),
        options.agent_name,
        include_thoughts_from_other_agents=options.include_thoughts_from_other_agents,
        **common,
    )


def _decode_base64(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    return base64.b64decode(padded.replace("-", "+").replace("_", "/"))


def normalise(value: Any, key: str | None = None) -> Any:
    """JSON ``value`` with integral floats as ints, base64 ``bytes`` fields decoded and empty
    lists dropped (a proto repeated field cannot tell ``[]`` from unset)."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items() if v != []}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if key in ("thought_signature", "data") and isinstance(value, str):
        return _decode_base64(value)
    return value


def ours(events: Sequence[event_pb2.Event], options: ContextOptions) -> list[content_pb2.Content]:
    return build_contents(events, options)


def as_json(contents: Sequence[content_pb2.Content]) -> list[Any]:
    return [
        normalise(json_format.MessageToDict(c, preserving_proto_field_name=True)) for c in contents
    ]


def adk_as_json(contents: Sequence[types.Content]) -> list[Any]:
    return [normalise(c.model_dump(mode="json", exclude_none=True)) for c in contents]


def assert_matches_adk(
    events: Sequence[Event], options: ContextOptions | None = None
) -> list[content_pb2.Content]:
    """Our contents for ``events``, after asserting they equal ADK's (as JSON)."""
    options = options or adk_options()
    protos = to_proto(events)
    snapshot = [event.SerializeToString(deterministic=True) for event in protos]
    mine = ours(protos, options)
    theirs = run_adk(events, options)
    assert as_json(mine) == adk_as_json(theirs)
    # the input events are never modified
    assert [event.SerializeToString(deterministic=True) for event in protos] == snapshot
    return mine


def with_options(options: ContextOptions, **changes: Any) -> ContextOptions:
    return dataclasses.replace(options, **changes)
