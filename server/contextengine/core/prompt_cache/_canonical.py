"""RFC 8785 JSON Canonicalization Scheme (JCS): one byte sequence per JSON value, in any language.

* objects: members sorted by their names compared as UTF-16 code unit sequences (what
  ``Array.prototype.sort`` and ``String.compareTo`` do), no whitespace;
* strings: ECMAScript ``JSON.stringify`` escaping: ``\\"``, ``\\\\``, ``\\b``, ``\\f``, ``\\n``,
  ``\\r``, ``\\t``, other code points below U+0020 as ``\\u00xx`` (lowercase hex), everything else
  (including U+007F, U+2028 and non-ASCII) as itself; lone surrogates are not JSON text and are
  rejected;
* numbers: IEEE 754 doubles printed as ECMAScript ``Number.prototype.toString`` does (shortest
  round-trip digits; integral values below 1e21 without a fraction or exponent; exponent form
  from 1e21 up and below 1e-6; ``-0`` as ``0``); NaN and infinities are rejected; Python ints
  are read as the nearest double (as ``JSON.parse`` does);
* ``true``, ``false``, ``null``.

The output is text; encode it as UTF-8 for hashing. Pure, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

__all__ = ["CanonicalizationError", "canonicalize", "number_to_string", "utf16_key"]

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


class CanonicalizationError(ValueError):
    """The value is not canonicalizable JSON (NaN, infinity, a lone surrogate, a non-JSON type,
    an integer beyond the doubles' range)."""


def utf16_key(text: str) -> bytes:
    """A sort key ordering strings by their UTF-16 code units (big-endian bytes compare the same
    way as the code units)."""
    try:
        return text.encode("utf-16-be")
    except UnicodeEncodeError as error:
        raise CanonicalizationError(f"string {text!r} holds a lone surrogate") from error


_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    escaped = _ESCAPES.get(char)
    if escaped is not None:
        return escaped
    if char < " ":
        return f"\\u{ord(char):04x}"
    raise CanonicalizationError("a string holds a lone surrogate")


def _string(text: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(_escape, text) + '"'


def number_to_string(value: float) -> str:
    """ECMAScript ``Number.prototype.toString(value)`` for a finite double (ECMA-262 7.1.12.1)."""
    if not math.isfinite(value):
        raise CanonicalizationError(f"{value} is not a JSON number")
    if value == 0:
        return "0"  # also -0
    if value < 0:
        return "-" + number_to_string(-value)
    # repr() is the shortest string that round-trips (closest to the value when several are
    # equally short), the same digits ECMAScript chooses.
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    assert sign == 0
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    k = len(digits)
    n = exponent + k  # value = 0.digits * 10**n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    sign_char = "+" if n - 1 >= 0 else "-"
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{sign_char}{abs(n - 1)}"


def _number(value: int | float) -> str:
    if isinstance(value, int):
        try:
            value = float(value)  # the nearest double, as JSON.parse reads it
        except OverflowError as error:
            raise CanonicalizationError(f"integer {value} is beyond the doubles") from error
    return number_to_string(value)


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, (int, float)):
        out.append(_number(value))
    elif isinstance(value, Mapping):
        keys = list(value)
        for key in keys:
            if not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r} is not a string")
        out.append("{")
        for index, key in enumerate(sorted(keys, key=utf16_key)):
            if index:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise CanonicalizationError(f"{type(value).__name__} is not a JSON value")


def canonicalize(value: Any) -> str:
    """The JCS text of ``value`` (dicts, lists/tuples, str, int, float, bool, None)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)
