"""``PythonMemoryIndex``: the memory backend in process memory (used with the in-memory store).

Scores with FTS5's BM25 (``contextengine.memory.bm25``) over the same three index columns as the
SQLite backend, so both return the same entries in the same order. Every operation runs without
awaiting, so each is atomic under asyncio. Searches scan the user's entries (and, for terms with
non-ASCII characters, every entry's words, for the statistics): fine for tests and ephemeral
sidecars, which is what the in-memory store is for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from contextengine.memory import bm25
from contextengine.memory.documents import Entry
from contextengine.memory.index import Hit, Ranking
from contextengine.memory.text import QueryTerm, TermKind, count_in, token_count
from contextengine.store import SessionKey
from contextengine.v1 import content_pb2

__all__ = ["PythonMemoryIndex"]


@dataclass(frozen=True)
class _Row:
    entry: Entry
    length: int


def _copy(entry: Entry) -> Entry:
    content = content_pb2.Content()
    content.CopyFrom(entry.content)
    return replace(entry, content=content)


class PythonMemoryIndex:
    """A ``MemoryIndex`` kept in dictionaries."""

    def __init__(self) -> None:
        self._sessions: dict[SessionKey, dict[int, _Row]] = {}
        self._users: dict[tuple[str, str], set[SessionKey]] = {}
        #: entries per ASCII word (document frequency of WORD terms)
        self._word_rows: Counter[str] = Counter()
        self._rows = 0
        self._tokens = 0

    @property
    def ranking(self) -> Ranking:
        return "bm25"

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def remembered(self, key: SessionKey) -> dict[int, str]:
        rows = self._sessions.get(key, {})
        return {sequence: row.entry.event_id for sequence, row in rows.items()}

    async def apply(self, key: SessionKey, remove: Sequence[int], upsert: Sequence[Entry]) -> None:
        rows = self._sessions.setdefault(key, {})
        self._users.setdefault((key.app_name, key.user_id), set()).add(key)
        for sequence in remove:
            self._drop(rows, sequence)
        for entry in upsert:
            self._drop(rows, entry.sequence)
            row = _Row(_copy(entry), token_count(entry.doc))
            rows[entry.sequence] = row
            self._rows += 1
            self._tokens += row.length
            self._word_rows.update(set(entry.doc.words))
        if not rows:
            self._forget(key)

    def _drop(self, rows: dict[int, _Row], sequence: int) -> int:
        row = rows.pop(sequence, None)
        if row is None:
            return 0
        self._rows -= 1
        self._tokens -= row.length
        for word in set(row.entry.doc.words):
            self._word_rows[word] -= 1
            if not self._word_rows[word]:
                del self._word_rows[word]  # a forgotten word leaves no key behind
        return 1

    def _forget(self, key: SessionKey) -> None:
        self._sessions.pop(key, None)
        user = (key.app_name, key.user_id)
        keys = self._users.get(user)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._users[user]

    async def search(
        self, app_name: str, user_id: str, terms: Sequence[QueryTerm], limit: int
    ) -> list[Hit]:
        keys = self._users.get((app_name, user_id))
        if not terms or not keys or self._rows == 0:
            return []
        idfs = [bm25.idf(self._rows, self._hits(term)) for term in terms]
        average = float(self._tokens) / float(self._rows)
        ranked: list[tuple[tuple[float, float, str, int], Hit]] = []
        for key in keys:
            for row in self._sessions[key].values():
                frequencies = [count_in(term, row.entry.doc) for term in terms]
                if not any(frequencies):
                    continue
                rank = bm25.rank(idfs, frequencies, row.length, average)
                entry = row.entry
                order = (rank, -entry.timestamp, key.session_id, entry.sequence)
                ranked.append((order, Hit(key.session_id, entry, -rank)))
        ranked.sort(key=lambda item: item[0])
        return [replace(hit, entry=_copy(hit.entry)) for _, hit in ranked[:limit]]

    def _hits(self, term: QueryTerm) -> int:
        """Entries of the whole index containing ``term`` (BM25's n(t))."""
        if term.kind is TermKind.WORD:
            return self._word_rows[term.text]
        return sum(
            1
            for rows in self._sessions.values()
            for row in rows.values()
            if row.entry.doc.tokens and count_in(term, row.entry.doc)
        )

    async def delete_session(self, key: SessionKey) -> int:
        rows = self._sessions.get(key)
        if rows is None:
            return 0
        deleted = sum(self._drop(rows, sequence) for sequence in list(rows))
        self._forget(key)
        return deleted

    async def delete_user(self, app_name: str, user_id: str) -> int:
        keys = list(self._users.get((app_name, user_id), ()))
        deleted = 0
        for key in keys:
            deleted += await self.delete_session(key)
        return deleted
