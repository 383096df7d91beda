"""Refcounted per-key asyncio locks.

Several components serialise work per key (a session, a session and agent) with one lock each.
Keeping one lock per key ever seen would grow without bound, so a key's lock exists only while
a call holds or awaits it: :class:`KeyedLocks` counts the calls using each lock and drops it when
the last one leaves, also when that call fails or is cancelled while waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Generic, TypeVar

__all__ = ["KeyedLocks"]

K = TypeVar("K", bound=Hashable)


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        #: calls holding or awaiting ``lock``
        self.users = 0


class KeyedLocks(Generic[K]):
    """One lock per key, kept only while held or awaited."""

    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}

    def hold(self, key: K) -> AbstractAsyncContextManager[None]:
        """Holds ``key``'s lock for the block (waits for its current holder first)."""
        return self._hold(key)

    @asynccontextmanager
    async def _hold(self, key: K) -> AsyncIterator[None]:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]

    def locked(self, key: K) -> bool:
        """Whether a call holds ``key``'s lock now."""
        entry = self._entries.get(key)
        return entry is not None and entry.lock.locked()

    def __len__(self) -> int:
        """How many keys have a lock now (held or awaited)."""
        return len(self._entries)
