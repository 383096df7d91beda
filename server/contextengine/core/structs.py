"""Conversions between ``google.protobuf.Struct``/``Value`` and plain JSON values.

Strict: a ``Value`` without a kind or with a non-finite number is not JSON and is rejected with
INVALID_STATE, naming the offending path. Integral numbers come back as ``int`` (JSON has one
number type; protobuf stores doubles, so integers beyond 2**53 lose precision), except ``-0.0``,
which stays a float: an ``int`` has no negative zero, and google-adk prints ``-0.0`` where the
model sent it (:func:`json_number`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from contextengine.core.errors import invalid

#: Doubles below this magnitude hold every integer exactly.
MAX_EXACT_INTEGER = 2**53


def json_number(number: float) -> int | float:
    """A protobuf double as the JSON number a Python caller had: an ``int`` when integral and
    exact (below 2**53), else the float; ``-0.0`` stays a float (``int`` would print ``0``)."""
    if (
        number.is_integer()
        and abs(number) < MAX_EXACT_INTEGER
        and not (number == 0.0 and math.copysign(1.0, number) < 0.0)
    ):
        return int(number)
    return number


def struct_to_dict(struct: struct_pb2.Struct, field_name: str) -> dict[str, Any]:
    return {
        key: value_to_python(value, f"{field_name}.{key}") for key, value in struct.fields.items()
    }


def value_to_python(value: struct_pb2.Value, path: str) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "null_value":
        return None
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            raise invalid("INVALID_STATE", path, f"{path} is {number}, which is not valid JSON")
        return json_number(number)
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return struct_to_dict(value.struct_value, path)
    if kind == "list_value":
        return [value_to_python(v, f"{path}[{i}]") for i, v in enumerate(value.list_value.values)]
    raise invalid("INVALID_STATE", path, f"{path} has no value (not valid JSON)")


def dict_to_struct(data: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    for key, value in data.items():
        python_to_value(value, out.fields[key])
    return out


def python_to_value(data: Any, out: struct_pb2.Value) -> None:
    if data is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(data, bool):
        out.bool_value = data
    elif isinstance(data, (int, float)):
        out.number_value = float(data)
    elif isinstance(data, str):
        out.string_value = data
    elif isinstance(data, Mapping):
        out.struct_value.SetInParent()
        for key, value in data.items():
            python_to_value(value, out.struct_value.fields[str(key)])
    elif isinstance(data, (list, tuple)):
        out.list_value.SetInParent()
        for item in data:
            python_to_value(item, out.list_value.values.add())
    else:
        raise TypeError(f"not a JSON value: {type(data).__name__}")


def sorted_keys(value: Any) -> Any:
    """``value`` (JSON-like data) with its mappings' keys sorted at every depth, for stable text
    (a Struct does not keep the order its keys were written in)."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value
