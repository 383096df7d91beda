"""Protobuf doubles as the JSON numbers a Python caller had (one rule for the client package)."""

from __future__ import annotations

import math

#: Doubles below this magnitude hold every integer exactly.
MAX_EXACT_INTEGER = 2**53


def json_number(number: float) -> int | float:
    """A protobuf double (every ``Struct`` number is one) as the JSON number a Python caller had:
    an ``int`` when integral and exact (below 2**53), else the float; ``-0.0`` stays a float
    (``int`` would print ``0``). The server's ``contextengine.core.structs.json_number`` has the
    same rule; the client does not import the server."""
    if (
        number.is_integer()
        and abs(number) < MAX_EXACT_INTEGER
        and not (number == 0.0 and math.copysign(1.0, number) < 0.0)
    ):
        return int(number)
    return number
