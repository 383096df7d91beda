"""The ``MemoryIndex`` interface every memory backend implements, and what it returns.

Contract (checked by ``tests/memory/test_index_contract.py`` against every backend):

* Entries are keyed by (app, user, session, sequence). ``apply`` is atomic: it removes the given
  sequences of one session and upserts the given entries (an entry with a remembered sequence
  replaces it). ``remembered`` lists a session's (sequence, event id) pairs.
* ``search`` sees only the entries of one (app, user): never another user's or app's. An entry
  matches when at least one query term occurs in it (``contextengine.memory.text``). Results are
  ordered best first and at most ``limit``; ties are broken by newer timestamp, then session id,
  then sequence. A query without terms matches nothing.
* Ranking ``"bm25"``: the score is FTS5's BM25 (k1 = 1.2, b = 0.75, over the three index columns
  with weight 1, statistics of the whole index) negated, so higher is better; a term that fewer
  entries contain weighs more. Ranking ``"matched_terms"`` (SQLite without FTS5): the score is the
  number of distinct query terms the entry contains. Ranking ``"ts_rank"`` (PostgreSQL): the
  score is PostgreSQL's ``ts_rank`` (``contextengine.memory.pg_index``: no inverse document
  frequency). Which entries match never depends on it.
* ``delete_session`` / ``delete_user`` remove entries and return how many.
* Returned entries are copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from contextengine.memory.documents import Entry
from contextengine.memory.text import QueryTerm
from contextengine.store import SessionKey

__all__ = ["Hit", "MemoryIndex", "Ranking"]

Ranking = Literal["bm25", "matched_terms", "ts_rank"]


@dataclass(frozen=True)
class Hit:
    """One search result."""

    session_id: str
    entry: Entry
    #: higher is better; comparable within one search only
    score: float


class MemoryIndex(Protocol):
    """Storage and search of remembered entries."""

    @property
    def ranking(self) -> Ranking:
        """How ``search`` scores (fixed once opened)."""

    async def open(self) -> None:
        """Prepares the index. Called once, after the event store is open."""

    async def close(self) -> None:
        """Releases resources. Idempotent."""

    async def remembered(self, key: SessionKey) -> dict[int, str]:
        """The session's remembered sequences and their event ids."""

    async def apply(self, key: SessionKey, remove: Sequence[int], upsert: Sequence[Entry]) -> None:
        """Atomically removes ``remove`` and upserts ``upsert`` (by sequence) for one session."""

    async def search(
        self, app_name: str, user_id: str, terms: Sequence[QueryTerm], limit: int
    ) -> list[Hit]:
        """The best ``limit`` entries of (app, user) matching any of ``terms``."""

    async def delete_session(self, key: SessionKey) -> int:
        """Removes the session's entries; how many there were."""

    async def delete_user(self, app_name: str, user_id: str) -> int:
        """Removes every entry of the user in the app; how many there were."""
