"""The commit listeners of a store: registration and a notification that never fails the writer."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from contextengine.store._base import Change, CommitListener

_LOG = logging.getLogger("contextengine.store")


class CommitListeners:
    """Registered listeners, called in registration order."""

    def __init__(self) -> None:
        self._listeners: dict[int, CommitListener] = {}
        self._next_id = 0

    def add(self, listener: CommitListener) -> Callable[[], None]:
        """Registers ``listener``; the returned function unregisters it (idempotent)."""
        token = self._next_id
        self._next_id += 1
        self._listeners[token] = listener

        def remove() -> None:
            self._listeners.pop(token, None)

        return remove

    def notify(self, changes: Sequence[Change]) -> None:
        """Calls every listener with ``changes``; a listener's error is logged, never raised: the
        changes are committed, and the writer must still be answered."""
        if not changes:
            return
        for listener in list(self._listeners.values()):
            try:
                listener(changes)
            except Exception:
                _LOG.exception("a commit listener failed")
