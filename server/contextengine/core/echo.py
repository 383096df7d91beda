"""Bounded echoes of client input in error messages and ``ErrorInfo`` metadata.

An error that quotes what the client sent (an id, a cursor, a list of values) must stay small: a
status travels in the response's trailing metadata, and a status larger than the peer's metadata
limit (8 KiB by default) never arrives as such (the client sees a transport error without
ErrorInfo). :func:`echo` quotes a value for a message, shortened when long; :func:`shorten` cuts
any text to a number of UTF-8 bytes. Both say how long the original was, so the cut is visible.
"""

from __future__ import annotations

from collections.abc import Iterable

#: the default number of characters of a value quoted in a message
ECHO_CHARS = 80

_ELLIPSIS = "…"


def shorten(text: str, max_bytes: int) -> str:
    """``text`` if its UTF-8 encoding has at most ``max_bytes`` bytes, else its longest prefix
    that fits followed by "… (N characters)" (N: the length of ``text``), the whole within
    ``max_bytes`` bytes. The cut falls between characters; a lone surrogate (not valid UTF-8, so
    not settable in a protobuf string) becomes "?"."""
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return data.decode("utf-8")
    suffix = f"{_ELLIPSIS} ({len(text)} characters)"
    room = max_bytes - len(suffix.encode())
    if room <= 0:
        return suffix.encode()[: max(max_bytes, 0)].decode("utf-8", "ignore")
    return data[:room].decode("utf-8", "ignore") + suffix


def echo(value: object, max_chars: int = ECHO_CHARS) -> str:
    """``repr(value)`` for a message, at most about ``max_chars`` characters: a longer one keeps
    its beginning and says how long the value was ("'abc…' (10000 characters)"); for a
    sequence, how many items it had."""
    if isinstance(value, str):
        if len(value) <= max_chars:
            return repr(value)
        return f"{value[:max_chars]!r}{_ELLIPSIS} ({len(value)} characters)"
    if isinstance(value, (list, tuple)):
        return _echo_items(value, max_chars)
    text = repr(value)
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}{_ELLIPSIS} ({len(text)} characters)"


def _echo_items(items: Iterable[object], max_chars: int) -> str:
    values = list(items)
    parts: list[str] = []
    used = 0
    for item in values:
        part = echo(item, max_chars)
        if parts and used + len(part) > max_chars:
            break
        parts.append(part)
        used += len(part) + 2
    text = "[" + ", ".join(parts)
    if len(parts) < len(values):
        return f"{text}, {_ELLIPSIS}] ({len(values)} items)"
    return text + "]"
