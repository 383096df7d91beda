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

The scheme itself is Trail of Bits' ``rfc8785`` (PyPI), which passes the shared golden vectors
(tests/golden/fingerprints/vectors.json, checked by every client). What is ours is the edge the
fingerprint needs around it: Python ints beyond the doubles' exact range (2**53) are read as the
nearest double, as ``JSON.parse`` reads them (``rfc8785`` refuses them), any ``Mapping`` and
``Sequence`` is an object and an array (``rfc8785`` takes ``dict``, ``list`` and ``tuple``), and
every refusal is a :class:`CanonicalizationError`.

The output is text; encode it as UTF-8 for hashing. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import rfc8785

__all__ = ["CanonicalizationError", "canonicalize", "number_to_string", "utf16_key"]


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


def _dumps(value: Any) -> str:
    try:
        return rfc8785.dumps(value).decode("utf-8")
    except (rfc8785.CanonicalizationError, UnicodeError) as error:
        raise CanonicalizationError(str(error)) from error


def number_to_string(value: float) -> str:
    """ECMAScript ``Number.prototype.toString(value)`` for a finite double (ECMA-262 7.1.12.1)."""
    return _dumps(float(value))


def _as_json(value: Any) -> Any:
    """``value`` in the types ``rfc8785`` takes: ints as doubles (the nearest, as ``JSON.parse``
    reads them), mappings as dicts, sequences as lists."""
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError as error:
            raise CanonicalizationError(f"integer {value} is beyond the doubles") from error
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r} is not a string")
        return {key: _as_json(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [_as_json(item) for item in value]
    raise CanonicalizationError(f"{type(value).__name__} is not a JSON value")


def canonicalize(value: Any) -> str:
    """The JCS text of ``value`` (dicts, lists/tuples, str, int, float, bool, None)."""
    try:
        # The common case (dicts, lists, ints within 2**53) as it is: no copy.
        return rfc8785.dumps(value).decode("utf-8")
    except (rfc8785.CanonicalizationError, UnicodeError):
        # A big int, another Mapping or Sequence, or no JSON at all: convert, or say why not.
        return _dumps(_as_json(value))
