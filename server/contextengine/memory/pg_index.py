"""``PostgresMemoryIndex``: memory in the engine's PostgreSQL database, searched with its
built-in full-text search (a ``tsvector`` per entry, a GIN index, ``ts_rank``).

The terms are those of every backend (``contextengine.memory.text``), and the ``tsvector`` is
built here from them, pre-tokenized, without PostgreSQL's parser or dictionaries (which would cut
``snake_case`` in two and treat CJK by locale): ASCII words get weight A, the character bigrams of
non-ASCII words weight B, their non-ASCII characters weight C, so a query term is looked up in
its own column, as in SQLite's FTS5 table. Matching is exact and the same as SQLite's:

* an ASCII term: the entry has the lexeme with weight A (a whole word);
* a one-character non-ASCII term: the lexeme with weight C;
* a longer non-ASCII term: every one of its bigrams with weight B (the GIN index finds the
  candidates), and the term inside one of the entry's non-ASCII words (``strpos`` over
  ``tokens``, whose words are separated by spaces, which no term contains).

Ranking ``"ts_rank"``: ``ts_rank`` with the weights {D 0.1, C 1, B 1, A 1} (the three columns
weigh the same, as in FTS5's BM25 here) and normalization 1 (divided by 1 + log of the entry's
length). It differs from BM25: no inverse document frequency (a rare term weighs as much as a
common one), term frequency saturates differently, and it knows nothing of the other entries;
scores are comparable within one search only. Ties: newer, then session id, then sequence.

Long words: a lexeme is at most 2047 bytes, so a word longer than ``_MAX_LEXEME_BYTES`` is
indexed (and searched) by its SHA-256 instead; positions above 16383 are stored as 16383 (they
only feed the ranking). Writes are transactions on the store's pool (``PostgresStore.run``):
atomic, retried after a race with another sidecar, STORAGE_UNAVAILABLE while the database is
down.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import asyncpg

from contextengine.memory.documents import Entry, content_document, joined_terms, stored_columns
from contextengine.memory.index import Hit, Ranking
from contextengine.memory.text import TOKENIZER_VERSION, Document, QueryTerm, TermKind
from contextengine.store import SessionKey
from contextengine.store.postgres import PostgresStore
from contextengine.v1 import content_pb2

__all__ = ["PostgresMemoryIndex", "terms_query", "terms_vector"]

#: longest lexeme kept as it is (PostgreSQL's limit is 2047 bytes)
_MAX_LEXEME_BYTES = 1024
#: the highest position a tsvector holds
_MAX_POSITION = 16383
#: ts_rank weights {D, C, B, A}: the three term columns weigh the same
_WEIGHTS = [0.1, 1.0, 1.0, 1.0]
_RETOKENIZE_PAGE = 1000

_COLUMNS = (
    "session_id, sequence, event_id, invocation_id, author, timestamp, content, words, tokens"
)


def _lexeme(token: str) -> str:
    """The token as a quoted tsvector/tsquery lexeme (hashed when too long)."""
    if len(token.encode("utf-8")) > _MAX_LEXEME_BYTES:
        token = "#" + hashlib.sha256(token.encode("utf-8")).hexdigest()
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def terms_vector(doc: Document) -> str:
    """The ``tsvector`` literal of an entry: its words (A), bigrams (B) and characters (C),
    each at its position in its column (columns one after the other)."""
    items: list[str] = []
    position = 0

    def add(tokens: Sequence[str], weight: str) -> None:
        nonlocal position
        for token in tokens:
            position += 1
            items.append(f"{_lexeme(token)}:{min(position, _MAX_POSITION)}{weight}")

    add(doc.words, "A")
    add([gram for gram in doc.grams() if gram != "_"], "B")
    add(doc.chars(), "C")
    return " ".join(items)


def _term_query(term: QueryTerm) -> str:
    if term.kind is TermKind.WORD:
        return f"{_lexeme(term.text)}:A"
    if len(term.text) == 1:
        return f"{_lexeme(term.text)}:C"
    return "(" + " & ".join(f"{_lexeme(gram)}:B" for gram in term.bigrams()) + ")"


def terms_query(terms: Sequence[QueryTerm]) -> str:
    """The ``tsquery`` literal finding the candidates of ``terms`` (any of them)."""
    return " | ".join(_term_query(term) for term in terms)


def _stored_document(words: str, tokens: str) -> Document:
    return Document(tuple(words.split()), tuple(tokens.split()))


def _match_condition(terms: Sequence[QueryTerm], params: list[Any]) -> str:
    """SQL true for an entry matching any term exactly (``params`` receives the values)."""
    clauses: list[str] = []
    for term in terms:
        params.append(_term_query(term))
        lookup = f"terms @@ ${len(params)}::tsquery"
        if term.kind is TermKind.SUBSTRING and len(term.text) > 1:
            params.append(term.text)
            lookup = f"({lookup} AND strpos(tokens, ${len(params)}) > 0)"
        clauses.append(lookup)
    return " OR ".join(clauses)


class PostgresMemoryIndex:
    """A ``MemoryIndex`` in the ``PostgresStore``'s database (migration ``0002_memory.sql``)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    @property
    def ranking(self) -> Ranking:
        return "ts_rank"

    async def open(self) -> None:
        await self._store.run(_retokenize)

    async def close(self) -> None:
        """The pool is the store's: nothing of its own to release."""

    async def remembered(self, key: SessionKey) -> dict[int, str]:
        async def query(conn: asyncpg.Connection) -> dict[int, str]:
            rows = await conn.fetch(
                "SELECT sequence, event_id FROM memory_entries"
                " WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
                key.app_name,
                key.user_id,
                key.session_id,
            )
            return {int(sequence): str(event_id) for sequence, event_id in rows}

        return await self._store.run(query, write=False)

    async def apply(self, key: SessionKey, remove: Sequence[int], upsert: Sequence[Entry]) -> None:
        doomed = sorted({*remove, *(entry.sequence for entry in upsert)})
        rows = [(*stored_columns(key, entry), terms_vector(entry.doc)) for entry in upsert]

        async def write(conn: asyncpg.Connection) -> None:
            async with conn.transaction():
                if doomed:
                    await conn.execute(
                        "DELETE FROM memory_entries WHERE app_name = $1 AND user_id = $2"
                        " AND session_id = $3 AND sequence = ANY($4::bigint[])",
                        key.app_name,
                        key.user_id,
                        key.session_id,
                        doomed,
                    )
                if rows:
                    await conn.executemany(
                        "INSERT INTO memory_entries (app_name, user_id, session_id, sequence,"
                        " event_id, invocation_id, author, timestamp, content, words, tokens,"
                        " terms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
                        " $12::tsvector)",
                        rows,
                    )

        await self._store.run(write)

    async def search(
        self, app_name: str, user_id: str, terms: Sequence[QueryTerm], limit: int
    ) -> list[Hit]:
        if not terms or limit <= 0:
            return []
        params: list[Any] = [app_name, user_id, terms_query(terms), _WEIGHTS]
        matched = _match_condition(terms, params)
        params.append(limit)
        sql = (
            f"SELECT {_COLUMNS}, ts_rank($4::float4[], terms, $3::tsquery, 1) AS rank"
            " FROM memory_entries WHERE app_name = $1 AND user_id = $2"
            f" AND terms @@ $3::tsquery AND ({matched})"
            f" ORDER BY rank DESC, timestamp DESC, session_id, sequence LIMIT ${len(params)}"
        )

        async def query(conn: asyncpg.Connection) -> list[Hit]:
            return [_hit(row) for row in await conn.fetch(sql, *params)]

        return await self._store.run(query, write=False)

    async def delete_session(self, key: SessionKey) -> int:
        async def delete(conn: asyncpg.Connection) -> int:
            status = await conn.execute(
                "DELETE FROM memory_entries WHERE app_name = $1 AND user_id = $2"
                " AND session_id = $3",
                key.app_name,
                key.user_id,
                key.session_id,
            )
            return int(status.split()[-1])

        return await self._store.run(delete)

    async def delete_user(self, app_name: str, user_id: str) -> int:
        async def delete(conn: asyncpg.Connection) -> int:
            status = await conn.execute(
                "DELETE FROM memory_entries WHERE app_name = $1 AND user_id = $2",
                app_name,
                user_id,
            )
            return int(status.split()[-1])

        return await self._store.run(delete)


def _hit(row: asyncpg.Record) -> Hit:
    (
        session_id,
        sequence,
        event_id,
        invocation_id,
        author,
        timestamp,
        content,
        words,
        tokens,
        rank,
    ) = row
    entry = Entry(
        sequence=int(sequence),
        event_id=str(event_id),
        invocation_id=str(invocation_id),
        author=str(author),
        timestamp=float(timestamp),
        content=content_pb2.Content.FromString(content),
        doc=_stored_document(str(words), str(tokens)),
    )
    return Hit(str(session_id), entry, float(rank))


async def _retokenize(conn: asyncpg.Connection) -> None:
    """Re-derives every entry's terms when they were made by another tokenizer version
    (``memory_meta.tokenizer``), dropping entries left without a term, and stamps the current
    version; one transaction under a transaction-level advisory lock, so that sidecars starting
    together do it once."""
    current = str(TOKENIZER_VERSION)
    stamp = await conn.fetchval("SELECT value FROM memory_meta WHERE key = 'tokenizer'")
    if stamp == current:
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('contextengine.memory'))")
        stamp = await conn.fetchval("SELECT value FROM memory_meta WHERE key = 'tokenizer'")
        if stamp == current:
            return
        if stamp is not None:
            last = 0
            while True:
                page = await conn.fetch(
                    "SELECT id, content FROM memory_entries WHERE id > $1 ORDER BY id LIMIT $2",
                    last,
                    _RETOKENIZE_PAGE,
                )
                if not page:
                    break
                for row_id, content in page:
                    doc = content_document(content_pb2.Content.FromString(content))
                    if doc.empty:
                        await conn.execute("DELETE FROM memory_entries WHERE id = $1", row_id)
                    else:
                        await conn.execute(
                            "UPDATE memory_entries SET words = $1, tokens = $2,"
                            " terms = $3::tsvector WHERE id = $4",
                            joined_terms(doc.words),
                            joined_terms(doc.tokens),
                            terms_vector(doc),
                            row_id,
                        )
                last = page[-1][0]
        await conn.execute(
            "INSERT INTO memory_meta (key, value) VALUES ('tokenizer', $1)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            current,
        )
