"""Cursor strings."""

from __future__ import annotations

import pytest

from contextengine.core.errors import ContextEngineError
from contextengine.subscriptions.cursors import MAX_CURSOR, check_within, parse_position

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "value"), [("", 0), ("0", 0), ("7", 7), ("1234", 1234)])
def test_valid_cursors(text: str, value: int) -> None:
    assert parse_position(text) == value


@pytest.mark.parametrize(
    "text", ["abc", "-1", "+1", " 1", "1 ", "01", "1.0", "1e3", "٣", str(MAX_CURSOR + 1), "0x10"]
)
def test_malformed_cursors(text: str) -> None:
    with pytest.raises(ContextEngineError) as info:
        parse_position(text, "after_cursor")
    assert info.value.reason == "INVALID_CURSOR"
    assert info.value.metadata == {"field": "after_cursor"}


def test_bounds() -> None:
    check_within(0, 0, "c")
    check_within(5, 5, "c")
    for cursor, end in [(6, 5), (-1, 5), (1, 0)]:
        with pytest.raises(ContextEngineError) as info:
            check_within(cursor, end, "c")
        assert info.value.reason == "INVALID_CURSOR"
