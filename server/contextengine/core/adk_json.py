"""google-adk event JSON <-> ``contextengine.v1.Event``, with no hand-written field mapping.

The proto mirrors ADK's ``Event`` field for field (ADR 0001), so the conversion is
``google.protobuf.json_format`` with proto field names preserved. This module adds only what the
generic converter cannot know:

* parsing is strict (an unknown key is an error, reported as ``INVALID_EVENT``);
* the engine-only fields (``Event.sequence``, ``Event.pinned``, ``Event.context_edits``,
  ``EventCompaction.start_sequence`` / ``end_sequence``) are dropped on the way out, because
  ADK's ``EventCompaction`` forbids keys it does not know;
* numbers inside JSON-valued fields (``google.protobuf.Struct`` / ``Value`` / ``ListValue``, such
  as ``state_delta``, function-call ``args`` or ``output``) come back as ``int`` when they are
  integral and below 2**53. Protobuf stores them as doubles and ``json_format`` prints ``1.0``;
  ADK (and google-genai) produce ``1``, and prompt renderings, fingerprints and JSON sizes depend
  on the difference. Typed ``double`` fields (``timestamp``...) are left as they are.

This module must not import google-adk or google-genai: it runs in the server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor

from contextengine.core.errors import ContextEngineError
from contextengine.core.structs import json_number
from contextengine.v1 import content_pb2, event_pb2

__all__ = [
    "content_to_adk_dict",
    "event_from_adk_json",
    "event_to_adk_dict",
    "event_to_adk_json",
]

#: Messages whose JSON form is an arbitrary JSON value.
_JSON_VALUE_MESSAGES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)


def event_from_adk_json(data: str | bytes | Mapping[str, Any]) -> event_pb2.Event:
    """Parses an ADK event into the proto ``Event``.

    ``data`` is ADK's ``event.model_dump_json(exclude_none=True)`` (text or UTF-8 bytes) or the
    JSON-mode dict of ``event.model_dump(mode="json", exclude_none=True)``; a dict from a
    Python-mode dump (raw ``bytes``, enum members) is not JSON and is rejected or misread.
    camelCase keys (``by_alias=True`` dumps) are accepted too, since they are the proto JSON names.

    Raises:
        ContextEngineError: ``INVALID_EVENT`` (field ``event``) when ``data`` is not a JSON object
            (duplicate keys and NaN/Infinity literals included), has a key that is not a proto
            field, or has a value of the wrong type or range (for example a count above int32).
    """
    event = event_pb2.Event()
    try:
        if isinstance(data, (str, bytes)):
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            parsed: Any = json.loads(
                text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant
            )
        else:
            parsed = dict(data)
        if not isinstance(parsed, dict):
            raise ValueError(f"expected a JSON object, got {type(parsed).__name__}")
        json_format.ParseDict(parsed, event)
    except (json_format.ParseError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise ContextEngineError(
            "INVALID_EVENT", f"not a valid ADK event: {exc}", field="event"
        ) from exc
    return event


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def event_to_adk_dict(event: event_pb2.Event) -> dict[str, Any]:
    """The event as a JSON-compatible dict that ``google.adk.events.Event.model_validate`` loads.

    Keys are the proto (= ADK snake_case) field names, engine-only fields are removed, integral
    numbers in JSON-valued fields are ``int``. ``event`` is not modified.

    Raises:
        ValueError: if a JSON-valued field holds NaN or an infinity (not representable in JSON;
            the engine rejects such values on append).
    """
    data: dict[str, Any] = json_format.MessageToDict(event, preserving_proto_field_name=True)
    data.pop("sequence", None)
    data.pop("pinned", None)
    data.pop("context_edits", None)
    actions = data.get("actions")
    compaction = actions.get("compaction") if actions is not None else None
    if compaction is not None:
        compaction.pop("start_sequence", None)
        compaction.pop("end_sequence", None)
    _restore_integers(event_pb2.Event.DESCRIPTOR, data)
    return data


def content_to_adk_dict(content: content_pb2.Content) -> dict[str, Any]:
    """The content as google-genai's ``Content`` JSON dict (snake_case keys, integral numbers in
    function-call arguments and responses as ``int``). ``content`` is not modified."""
    data: dict[str, Any] = json_format.MessageToDict(content, preserving_proto_field_name=True)
    _restore_integers(content_pb2.Content.DESCRIPTOR, data)
    return data


def event_to_adk_json(event: event_pb2.Event) -> str:
    """:func:`event_to_adk_dict` as compact JSON text (non-ASCII characters kept as they are)."""
    return json.dumps(event_to_adk_dict(event), ensure_ascii=False, separators=(",", ":"))


def _restore_integers(descriptor: Descriptor, message: dict[str, Any]) -> None:
    """Turns integral doubles back into ints inside the JSON-valued fields of a message dict, in
    place. ``message`` is ``MessageToDict`` output for a message of type ``descriptor``."""
    for name, value in list(message.items()):
        field = descriptor.fields_by_name.get(name)
        if field is None or field.message_type is None:
            continue
        field_type = field.message_type
        if field_type.GetOptions().map_entry:
            value_type = field_type.fields_by_name["value"].message_type
            if value_type is not None:
                message[name] = {key: _restore_in(value_type, item) for key, item in value.items()}
        elif field.is_repeated:
            message[name] = [_restore_in(field_type, item) for item in value]
        else:
            message[name] = _restore_in(field_type, value)


def _restore_in(descriptor: Descriptor, value: Any) -> Any:
    if descriptor.full_name in _JSON_VALUE_MESSAGES:
        return _integral_to_int(value)
    if isinstance(value, dict):
        _restore_integers(descriptor, value)
    return value


def _integral_to_int(value: Any) -> Any:
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, dict):
        return {key: _integral_to_int(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral_to_int(item) for item in value]
    return value
