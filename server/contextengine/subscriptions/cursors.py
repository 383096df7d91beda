"""Subscription cursors: decimal strings of a sequence (session scope) or of a global position
(user and app scope). Pure."""

from __future__ import annotations

from contextengine.core.echo import echo
from contextengine.core.errors import invalid

#: the largest value an int64 cursor can hold
MAX_CURSOR = 2**63 - 1
_MAX_CURSOR_DIGITS = len(str(MAX_CURSOR))


def parse_position(text: str, field: str = "after_cursor") -> int:
    """The position a cursor string stands for; "" is 0 (from the start). Only canonical
    decimal digits are accepted: no sign, no spaces, no leading zeros."""
    if text == "":
        return 0
    if not (text.isascii() and text.isdigit()) or (len(text) > 1 and text[0] == "0"):
        raise invalid("INVALID_CURSOR", field, f"{field} {echo(text)} is not a cursor")
    # Checked before int(): Python refuses to parse more than 4,300 digits (ValueError).
    if len(text) > _MAX_CURSOR_DIGITS or int(text) > MAX_CURSOR:
        raise invalid("INVALID_CURSOR", field, f"{field} {echo(text)} is out of range")
    return int(text)


def check_within(cursor: int, end: int, field: str) -> None:
    """Raises INVALID_CURSOR unless ``0 <= cursor <= end`` (the end of the log)."""
    if cursor < 0:
        raise invalid("INVALID_CURSOR", field, f"{field} must not be negative")
    if cursor > end:
        raise invalid(
            "INVALID_CURSOR",
            field,
            f"{field} {cursor} is beyond the end of the log ({end}); it may come from another "
            "store, or from an in-memory store that has restarted",
        )
