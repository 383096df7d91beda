"""Emitting contents (section 6.8).

Every remaining event with a content yields one ``Content`` with its role (when set) and parts,
with 'adk-' function call/response ids removed unless they are preserved. For an isolated agent
(an isolation scope is set) a user turn is put first: the arguments (as JSON) of the call whose
id is the scope, found anywhere in the given events, else the parts of the fallback user content.

A content is built only when it differs from one that already exists: an unchanged event's
content is returned as is (the very message of the input event or summary), so callers must
treat the returned messages as read-only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from contextengine.core.context._fencing import sorted_keys
from contextengine.core.context._model import Item, PartView
from contextengine.core.structs import struct_to_dict
from contextengine.v1 import content_pb2, event_pb2

__all__ = ["emit_contents", "task_input_content"]


def _without_adk_id(view: PartView) -> content_pb2.Part:
    part = content_pb2.Part()
    part.CopyFrom(view.part)
    if view.call is not None:
        part.function_call.ClearField("id")
    else:
        part.function_response.ClearField("id")
    return part


def emit_contents(
    items: Sequence[Item], *, preserve_function_call_ids: bool
) -> list[content_pb2.Content]:
    strip_ids = not preserve_function_call_ids
    contents: list[content_pb2.Content] = []
    for item in items:
        if not item.has_content:
            continue
        parts = item.parts
        needs_strip = False
        if strip_ids:
            for view in parts:
                if view.adk_id:
                    needs_strip = True
                    break
        original = item.content
        if original is not None and not needs_strip:
            contents.append(original)
            continue
        content = content_pb2.Content()
        if original is not None:
            # copy the whole message at once, then remove the ids in the copy
            content.CopyFrom(original)
            for index, view in enumerate(parts):
                if view.adk_id:
                    copied = content.parts[index]
                    if view.call is not None:
                        copied.function_call.ClearField("id")
                    else:
                        copied.function_response.ClearField("id")
        else:
            if item.role is not None:
                content.role = item.role
            content.parts.extend(
                [
                    _without_adk_id(view) if needs_strip and view.adk_id else view.part
                    for view in parts
                ]
            )
        contents.append(content)
    return contents


def task_input_content(
    events: Sequence[event_pb2.Event],
    isolation_scope: str,
    user_content: content_pb2.Content | None,
) -> content_pb2.Content | None:
    """The first user turn of an isolated agent: the JSON arguments of the call whose id equals
    the scope (the first such call with non-empty arguments), else ``user_content``'s parts.

    The JSON is ``json.dumps(args, ensure_ascii=False)`` with keys sorted at every level (the
    protobuf ``Struct`` has no key order; ADK keeps the order the arguments were written in)."""
    for event in events:
        if not event.HasField("content"):
            continue
        for part in event.content.parts:
            if not part.HasField("function_call"):
                continue
            call = part.function_call
            if call.id == isolation_scope and call.HasField("id") and len(call.args.fields):
                args = sorted_keys(struct_to_dict(call.args, "function_call.args"))
                text = json.dumps(args, ensure_ascii=False)
                return content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)])
    if user_content is not None and len(user_content.parts):
        return content_pb2.Content(role="user", parts=user_content.parts)
    return None
