"""google-adk objects <-> ``contextengine.v1`` messages, on the client side.

The proto ``Event`` mirrors ADK's ``Event`` field for field, so an event converts through its
JSON form: ``Event.model_dump(mode="json", exclude_none=True)`` parsed strictly into the proto
(a key the proto does not know is an error, never dropped), and back through
``json_format.MessageToDict`` with the proto field names (ADK's), loaded by
``Event.model_validate_json`` (JSON mode, so bytes travel as base64 both ways). On the way back:

- the engine's own fields (``Event.sequence``, ``Event.pinned``,
  ``EventCompaction.start_sequence`` / ``end_sequence``) are removed: ADK's models forbid
  unknown keys;
- numbers inside JSON-valued fields (``Struct``, ``Value``, ``ListValue``: state deltas,
  function-call arguments and responses, custom metadata) are doubles in protobuf; an integral
  one below 2**53 comes back as an ``int`` (``-0.0`` stays a float), as ADK produced it. A float
  that happened to be integral (``2.0``) therefore comes back as ``2``, the one loss of the
  conversion (ADK's sqlite service keeps ``2.0``).

- ``long_running_tool_ids``: a repeated field has no presence in protobuf, so an empty set and
  an unset one are one value. ADK's flows give every event with function calls the set of its
  long-running ones (often empty), so such an event comes back with an empty set, any other
  event with none (ADK treats both alike: ``if event.long_running_tool_ids``).

State dicts (``Struct``) follow the same number rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from google.adk.events.event import Event
from google.genai import types
from google.protobuf import json_format, struct_pb2
from google.protobuf.descriptor import Descriptor
from pydantic_core import to_jsonable_python

from contextengine.client import json_number
from contextengine.v1 import content_pb2, event_pb2

__all__ = ["event_from_proto", "event_to_proto", "state_from_struct", "state_to_struct"]

_JSON_VALUES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)


def event_to_proto(event: Event) -> event_pb2.Event:
    """The proto of an ADK event. Raises ValueError if the event has a field or a value the
    proto cannot hold (nothing is dropped silently)."""
    data = event.model_dump(mode="json", exclude_none=True)
    message = event_pb2.Event()
    try:
        json_format.ParseDict(data, message, ignore_unknown_fields=False)
    except json_format.ParseError as err:
        raise ValueError(f"the event {event.id!r} does not fit the engine's Event: {err}") from err
    return message


def event_from_proto(message: event_pb2.Event) -> Event:
    """The ADK event of a proto event (the engine's own fields left out)."""
    data: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    data.pop("sequence", None)
    data.pop("pinned", None)
    data.pop("context_edits", None)
    compaction = data.get("actions", {}).get("compaction")
    if isinstance(compaction, dict):
        compaction.pop("start_sequence", None)
        compaction.pop("end_sequence", None)
    _integers_in_message(event_pb2.Event.DESCRIPTOR, data)
    event = Event.model_validate_json(json.dumps(data))
    if event.long_running_tool_ids is None and event.get_function_calls():
        event.long_running_tool_ids = set()
    return event


def state_from_struct(state: struct_pb2.Struct) -> dict[str, Any]:
    """A state ``Struct`` as a dict (integral numbers as ``int``)."""
    plain = _integers(json_format.MessageToDict(state))
    assert isinstance(plain, dict)
    return plain


def state_to_struct(state: Mapping[str, Any]) -> struct_pb2.Struct:
    """A state dict as a ``Struct``; values are made JSON first as ADK's persistent services do
    (datetimes, pydantic models...)."""
    out = struct_pb2.Struct()
    out.update(to_jsonable_python(dict(state)))
    return out


def content_to_genai(content: content_pb2.Content) -> types.Content:
    """A proto ``Content`` as google-genai's ``Content`` (integral numbers inside function-call
    arguments and responses as ``int``, as ADK and google-genai produce them)."""
    data: dict[str, Any] = json_format.MessageToDict(content, preserving_proto_field_name=True)
    _integers_in_message(content_pb2.Content.DESCRIPTOR, data)
    return types.Content.model_validate(data)


def content_to_proto(content: types.Content) -> content_pb2.Content:
    """google-genai's ``Content`` as the proto ``Content``."""
    out = content_pb2.Content()
    json_format.ParseDict(content.model_dump(mode="json", exclude_none=True), out)
    return out


def _integers_in_message(descriptor: Descriptor, data: dict[str, Any]) -> None:
    """Restores integers, in place, inside the JSON-valued fields of ``data`` (a
    ``MessageToDict`` of a ``descriptor`` message with proto field names)."""
    for name, value in list(data.items()):
        field = descriptor.fields_by_name.get(name)
        if field is None or field.message_type is None:
            continue
        kind = field.message_type
        if kind.GetOptions().map_entry:
            value_kind = kind.fields_by_name["value"].message_type
            if value_kind is not None:
                data[name] = {key: _restored(value_kind, item) for key, item in value.items()}
        elif field.is_repeated:
            data[name] = [_restored(kind, item) for item in value]
        else:
            data[name] = _restored(kind, value)


def _restored(descriptor: Descriptor, value: Any) -> Any:
    if descriptor.full_name in _JSON_VALUES:
        return _integers(value)
    if isinstance(value, dict):
        _integers_in_message(descriptor, value)
    return value


def _integers(value: Any) -> Any:
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, dict):
        return {key: _integers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integers(item) for item in value]
    return value
