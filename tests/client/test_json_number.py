"""The client package's one rule for a protobuf double as a JSON number, the server's rule."""

from __future__ import annotations

import math

import pytest
from google.protobuf import struct_pb2

from contextengine.client import json_number, struct_json
from contextengine.console.render import plain
from contextengine.core.structs import json_number as server_json_number

pytestmark = pytest.mark.unit

CASES = [0.0, -0.0, 1.0, -3.0, 2.5, 1e20, 2.0**53 - 1, 2.0**53, -(2.0**53), math.inf, math.nan]


@pytest.mark.parametrize("number", CASES)
def test_the_client_rule_is_the_servers(number: float) -> None:
    ours, theirs = json_number(number), server_json_number(number)
    assert type(ours) is type(theirs)
    assert repr(ours) == repr(theirs)


def test_integral_exact_numbers_become_ints_and_the_rest_stay_floats() -> None:
    assert json_number(12.0) == 12
    assert isinstance(json_number(12.0), int)
    assert json_number(2.0**53 - 1) == 2**53 - 1
    assert isinstance(json_number(2.0**53), float)
    assert isinstance(json_number(2.5), float)
    negative_zero = json_number(-0.0)
    assert isinstance(negative_zero, float)
    assert math.copysign(1.0, negative_zero) < 0.0


def test_the_context_tools_and_the_console_use_it() -> None:
    struct = struct_pb2.Struct()
    struct.update({"n": 12.0, "big": 2.0**60, "zero": -0.0, "list": [1.0, 0.5]})
    expected = {"n": 12, "big": 2.0**60, "zero": -0.0, "list": [1, 0.5]}
    for converted in (struct_json(struct), plain(struct)):
        assert converted == expected
        assert isinstance(converted["big"], float)
        assert isinstance(converted["n"], int)
        assert repr(converted["zero"]) == "-0.0"
