"""BoundedLru: at most max_entries entries, the least recently used (read or written) dropped
first."""

from __future__ import annotations

import pytest

from contextengine.runtime.lru import BoundedLru

pytestmark = pytest.mark.unit


def test_the_oldest_entry_is_dropped_beyond_the_bound() -> None:
    lru: BoundedLru[str, int] = BoundedLru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    lru.put("c", 3)
    assert len(lru) == 2
    assert "a" not in lru
    assert lru.get("b") == 2
    assert lru.get("c") == 3


def test_get_marks_an_entry_recently_used() -> None:
    lru: BoundedLru[str, int] = BoundedLru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1
    lru.put("c", 3)
    assert "a" in lru
    assert "b" not in lru


def test_put_again_replaces_and_refreshes() -> None:
    lru: BoundedLru[str, int] = BoundedLru(2)
    for key, value in [("a", 1), ("b", 2), ("a", 10), ("c", 3)]:
        lru.put(key, value)
    assert (lru.get("a"), lru.get("c"), len(lru)) == (10, 3, 2)
    assert "b" not in lru


def test_pop_and_missing_keys() -> None:
    lru: BoundedLru[str, int] = BoundedLru(3)
    assert lru.get("x") is None
    assert lru.pop("x") is None
    lru.put("x", 0)
    assert lru.pop("x") == 0
    assert "x" not in lru
    assert len(lru) == 0


def test_contains_does_not_refresh() -> None:
    lru: BoundedLru[str, int] = BoundedLru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert "a" in lru
    lru.put("c", 3)
    assert "a" not in lru


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        BoundedLru[str, int](0)
