"""RFC 8785 canonical JSON: what the golden vectors do not show (errors, types, the fixed point
on random values, agreement with ECMAScript on random doubles is in the vector generator)."""

from __future__ import annotations

import json
import math
import random

import pytest

from contextengine.core.prompt_cache import CanonicalizationError, canonicalize, number_to_string

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "\ud800", {"\udc00": 1}, b"x"])
def test_rejects_what_is_not_json(value: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize(value)


def test_rejects_non_string_keys() -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize({1: "one"})


def test_integers_are_doubles() -> None:
    assert canonicalize([1, 1.0, -0.0, 2**53 + 1, True, False]) == (
        "[1,1,0,9007199254740992,true,false]"
    )
    with pytest.raises(CanonicalizationError):
        canonicalize(10**400)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (123.456, "123.456"),
        (-5e-324, "-5e-324"),
        (1.5e300, "1.5e+300"),
    ],
)
def test_number_forms(value: float, text: str) -> None:
    assert number_to_string(value) == text


def test_canonical_text_is_a_fixed_point_and_parses_back() -> None:
    rng = random.Random(7)

    def value(depth: int) -> object:
        kind = rng.randrange(7 if depth < 3 else 4)
        if kind == 0:
            return rng.choice([None, True, False])
        if kind == 1:
            return rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-30, 30)
        if kind == 2:
            return "".join(
                chr(rng.choice([0x1, 0x22, 0x5C, 0x41, 0xE9, 0x2028, 0x1F600])) for _ in range(4)
            )
        if kind == 3:
            return rng.randint(-(2**40), 2**40)
        if kind in (4, 5):
            return {
                "".join(chr(rng.choice([0x61, 0xFF5E, 0x1F600, 0xE9])) for _ in range(2)): value(
                    depth + 1
                )
                for _ in range(3)
            }
        return [value(depth + 1) for _ in range(3)]

    for _ in range(300):
        data = value(0)
        text = canonicalize(data)
        assert canonicalize(json.loads(text)) == text
        # the same JSON value (numbers as doubles)
        assert json.loads(text, parse_int=float) == json.loads(json.dumps(data), parse_int=float)
