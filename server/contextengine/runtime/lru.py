"""A bounded least-recently-used map.

Memos keyed by sessions or agents (created caches, deleted cache names, sessions'
configurations, token scans) must not grow with every key ever seen: :class:`BoundedLru` keeps
at most ``max_entries`` and drops the least recently used beyond that. Reading an entry with
:meth:`BoundedLru.get` or writing it with :meth:`BoundedLru.put` makes it the most recently used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["BoundedLru"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLru(Generic[K, V]):
    """At most ``max_entries`` entries; the least recently used is dropped first."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value (None if absent); marks it the most recently used."""
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key]

    def pop(self, key: K) -> V | None:
        """Removes and returns the value (None if absent)."""
        return self._entries.pop(key, None)

    def put(self, key: K, value: V) -> None:
        """Stores the value as the most recently used, dropping the oldest beyond the bound."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Removes every entry."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is stored (does not mark it used)."""
        return key in self._entries
