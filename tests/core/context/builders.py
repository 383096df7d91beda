"""Terse constructors for ADK events (fixed ids and timestamps) and a readable rendering of
contents, for the context tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.adk.events.event import Event, NodeInfo
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types

from contextengine.core.structs import struct_to_dict
from contextengine.v1 import content_pb2

__all__ = ["call", "compaction", "describe", "event", "response", "text"]


def event(
    ts: float,
    author: str = "user",
    *parts: types.Part,
    role: str | None = None,
    inv: str = "",
    id: str | None = None,
    **fields: Any,
) -> Event:
    """An event at ``ts`` (id ``e<ts>``) with ``parts``; the role is 'user' for the user and
    for function responses, else 'model', unless given. Extra keyword fields go to ``Event``."""
    if parts:
        if role is None:
            responses_only = all(part.function_response for part in parts)
            role = "user" if author == "user" or responses_only else "model"
        fields["content"] = types.Content(role=role, parts=list(parts))
    if "node_path" in fields:
        fields["node_info"] = NodeInfo(path=fields.pop("node_path"))
    return Event(
        id=id or f"e{ts:g}",
        timestamp=ts,
        author=author,
        invocation_id=inv,
        **fields,
    )


def text(value: str, **kwargs: Any) -> types.Part:
    return types.Part(text=value, **kwargs)


def call(name: str, call_id: str | None = None, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, id=call_id, args=args))


def response(name: str, call_id: str | None = None, **result: Any) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(name=name, id=call_id, response=result)
    )


def compaction(ts: float, start: float, end: float, summary: str, **fields: Any) -> Event:
    """A summary event (author 'user', no content) covering ``[start, end]``."""
    return Event(
        id=f"c{ts:g}",
        timestamp=ts,
        author="user",
        invocation_id=fields.pop("inv", f"cinv{ts:g}"),
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=start,
                end_timestamp=end,
                compacted_content=types.Content(role="model", parts=[types.Part(text=summary)]),
            )
        ),
        **fields,
    )


def _part(part: content_pb2.Part) -> str:
    if part.HasField("function_call"):
        fc = part.function_call
        args = struct_to_dict(fc.args, "args") if fc.HasField("args") else None
        return f"FC {fc.name}({args})" + (f"#{fc.id}" if fc.HasField("id") else "")
    if part.HasField("function_response"):
        fr = part.function_response
        result = struct_to_dict(fr.response, "r") if fr.HasField("response") else None
        return f"FR {fr.name}={result}" + (f"#{fr.id}" if fr.HasField("id") else "")
    prefix = "(thought) " if part.thought else ""
    return prefix + part.text


def describe(contents: Sequence[content_pb2.Content]) -> list[str]:
    """``role: part | part`` per content."""
    return [f"{c.role}: " + " | ".join(_part(p) for p in c.parts) for c in contents]
