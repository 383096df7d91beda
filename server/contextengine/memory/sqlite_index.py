"""``SqliteMemoryIndex``: memory in the engine's SQLite file, searched with FTS5 and BM25.

Tables: ``memory_users``, ``memory_entries`` and ``memory_meta`` come from the store's numbered
migrations; the FTS5
table ``memory_fts`` (columns ``words``, ``grams``, ``chars``; ``rowid`` = ``memory_entries.id``)
is created here at startup because a migration cannot depend on how SQLite was compiled. Writes go
through the store's single writer (``SqliteStore.write``), one transaction per operation, so an
ingestion is atomic and never contends with the event log for SQLite's write lock. Searches run
on a read-only connection of their own, beside the store's reader (docs/adr/0006).

``fts``: ``"auto"`` uses FTS5 when this SQLite build has it, ``"on"`` requires it, ``"off"``
forces the search without it (``instr`` over the stored terms, ranked by the number of distinct
query terms an entry contains, then newer first: ADK's LIKE fallback). The entries that match are
the same either way. Entries written while FTS5 is not used mark the index stale; the next
startup that uses FTS5 rebuilds it from ``memory_entries``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, get_args

import aiosqlite

from contextengine.core.errors import ContextEngineError
from contextengine.memory.documents import Entry, content_document, joined_terms, stored_columns
from contextengine.memory.index import Hit, Ranking
from contextengine.memory.text import TOKENIZER_VERSION, Document, QueryTerm, TermKind
from contextengine.store import SessionKey, WriteTx, connect_sqlite, run_sqlite
from contextengine.store.sqlite import SqliteStore
from contextengine.v1 import content_pb2

__all__ = ["FtsMode", "SqliteMemoryIndex", "fts5_available"]

FtsMode = Literal["auto", "on", "off"]

_CREATE_FTS = (
    "CREATE VIRTUAL TABLE memory_fts USING fts5("
    "words, grams, chars, tokenize = \"ascii tokenchars '_'\")"
)

_COLUMNS = (
    "e.session_id, e.sequence, e.event_id, e.invocation_id, e.author, e.timestamp, e.content,"
    " e.words, e.tokens"
)

_REBUILD_PAGE = 1000
#: a user's entry ids are ``(slot << _SLOT_BITS) + n``
_SLOT_BITS = 32


def fts5_available() -> bool:
    """Whether the sqlite3 library this process uses has FTS5."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()
    return True


def _fts_texts(doc: Document) -> tuple[str, str, str]:
    """The ``memory_fts`` columns of an entry."""
    return " ".join(doc.words), " ".join(doc.grams()), " ".join(doc.chars())


def _stored_document(words: str, tokens: str) -> Document:
    """The document of a ``memory_entries`` row, from its ``words`` and ``tokens``."""
    return Document(tuple(words.split()), tuple(tokens.split()))


@dataclass(frozen=True)
class _Row:
    """A ``memory_entries`` row without its id, and its ``memory_fts`` columns."""

    entry: tuple[object, ...]
    fts: tuple[str, str, str]


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def fts_query(terms: Sequence[QueryTerm]) -> str:
    """The FTS5 expression: one column-filtered phrase per term, joined by OR. Terms hold only
    word characters and every phrase is quoted, so nothing in a query is FTS5 syntax."""
    phrases: list[str] = []
    for term in terms:
        if term.kind is TermKind.WORD:
            phrases.append(f"words : {_quoted(term.text)}")
        elif len(term.text) == 1:
            phrases.append(f"chars : {_quoted(term.text)}")
        else:
            phrases.append(f"grams : {_quoted(' '.join(term.bigrams()))}")
    return " OR ".join(phrases)


def _instr_needle(term: QueryTerm) -> tuple[str, str]:
    """(column, needle) of the search without FTS5."""
    if term.kind is TermKind.WORD:
        return "words", f" {term.text} "
    return "tokens", term.text


class SqliteMemoryIndex:
    """A ``MemoryIndex`` in the ``SqliteStore``'s file."""

    def __init__(self, store: SqliteStore, *, fts: FtsMode = "auto") -> None:
        if fts not in get_args(FtsMode):
            raise ValueError(f"fts must be 'auto', 'on' or 'off', not {fts!r}")
        self._store = store
        self._mode: FtsMode = fts
        self._fts = False
        #: the file has an FTS5 table that this process does not maintain
        self._mark_stale = False
        self._reader: aiosqlite.Connection | None = None

    @property
    def ranking(self) -> Ranking:
        return "bm25" if self._fts else "matched_terms"

    async def open(self) -> None:
        if self._reader is not None:
            return
        available = self._mode != "off" and fts5_available()
        if self._mode == "on" and not available:
            raise RuntimeError("memory search needs FTS5, which this SQLite build does not have")
        has_table = await self._store.write(partial(_prepare, use_fts=available))
        self._fts = available
        self._mark_stale = has_table and not available
        self._reader = await connect_sqlite(
            self._store.path, durability=self._store.durability, read_only=True
        )

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.close()

    def _open_reader(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise ContextEngineError("SHUTTING_DOWN", "the memory index is closed")
        return self._reader

    async def remembered(self, key: SessionKey) -> dict[int, str]:
        def query(db: sqlite3.Connection) -> dict[int, str]:
            rows = db.execute(
                "SELECT sequence, event_id FROM memory_entries"
                " WHERE app_name = ? AND user_id = ? AND session_id = ?",
                (key.app_name, key.user_id, key.session_id),
            )
            return {int(sequence): str(event_id) for sequence, event_id in rows}

        return await run_sqlite(self._open_reader(), query)

    async def apply(self, key: SessionKey, remove: Sequence[int], upsert: Sequence[Entry]) -> None:
        rows = [
            _Row(
                stored_columns(key, entry),
                _fts_texts(entry.doc) if self._fts else ("", "", ""),
            )
            for entry in upsert
        ]
        doomed = sorted({*remove, *(entry.sequence for entry in upsert)})
        await self._store.write(
            partial(
                _apply,
                key=key,
                doomed=doomed,
                rows=rows,
                fts=self._fts,
                mark_stale=self._mark_stale,
            )
        )

    async def search(
        self, app_name: str, user_id: str, terms: Sequence[QueryTerm], limit: int
    ) -> list[Hit]:
        if not terms:
            return []
        find = _search_fts if self._fts else _search_instr
        return await run_sqlite(
            self._open_reader(),
            partial(find, app_name=app_name, user_id=user_id, terms=terms, limit=limit),
        )

    async def delete_session(self, key: SessionKey) -> int:
        return await self._store.write(
            partial(
                _delete,
                where="app_name = ? AND user_id = ? AND session_id = ?",
                params=(key.app_name, key.user_id, key.session_id),
                fts=self._fts,
                mark_stale=self._mark_stale,
            )
        )

    async def delete_user(self, app_name: str, user_id: str) -> int:
        return await self._store.write(
            partial(
                _delete,
                where="app_name = ? AND user_id = ?",
                params=(app_name, user_id),
                fts=self._fts,
                mark_stale=self._mark_stale,
            )
        )


# On the writer's thread ------------------------------------------------------------------------


def _has_fts_table(db: sqlite3.Connection) -> bool:
    row = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_fts'"
    ).fetchone()
    return row is not None


def _retokenize(db: sqlite3.Connection) -> bool:
    """Re-derives every entry's terms from its content when they were written by another
    tokenizer version (``memory_meta.tokenizer``; a file without the stamp predates it and was
    written by version 1), dropping entries left without a term, and stamps the current version.
    Whether the terms were re-derived."""
    row = db.execute("SELECT value FROM memory_meta WHERE key = 'tokenizer'").fetchone()
    current = str(TOKENIZER_VERSION)
    if row is not None and row[0] == current:
        return False
    outdated = (row[0] if row is not None else "1") != current
    last = 0
    while outdated:
        page = db.execute(
            "SELECT id, content FROM memory_entries WHERE id > ? ORDER BY id LIMIT ?",
            (last, _REBUILD_PAGE),
        ).fetchall()
        if not page:
            break
        updates: list[tuple[str, str, int]] = []
        dropped: list[tuple[int]] = []
        for row_id, content in page:
            doc = content_document(content_pb2.Content.FromString(content))
            if doc.empty:
                dropped.append((row_id,))
            else:
                updates.append((joined_terms(doc.words), joined_terms(doc.tokens), row_id))
        db.executemany("UPDATE memory_entries SET words = ?, tokens = ? WHERE id = ?", updates)
        db.executemany("DELETE FROM memory_entries WHERE id = ?", dropped)
        last = page[-1][0]
    db.execute(
        "INSERT INTO memory_meta (key, value) VALUES ('tokenizer', ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (current,),
    )
    return outdated


def _prepare(tx: WriteTx, *, use_fts: bool) -> bool:
    """Re-tokenizes the entries if their tokenizer version is not this one, and creates or
    rebuilds the FTS5 table when FTS5 is used; whether the file had one before."""
    db = tx.db
    retokenized = _retokenize(db)
    existed = _has_fts_table(db)
    if retokenized and existed:
        # Its rows hold the old terms: rebuilt now, or at the next startup that uses FTS5.
        _stale(db)
    if not use_fts:
        return existed
    stale = db.execute("SELECT value FROM memory_meta WHERE key = 'fts_stale'").fetchone()
    if existed and stale is None:
        return True
    if not existed:
        db.execute(_CREATE_FTS)
    else:
        db.execute("DELETE FROM memory_fts")
    last = 0
    while True:
        page = db.execute(
            "SELECT id, words, tokens FROM memory_entries WHERE id > ? ORDER BY id LIMIT ?",
            (last, _REBUILD_PAGE),
        ).fetchall()
        if not page:
            break
        db.executemany(
            "INSERT INTO memory_fts (rowid, words, grams, chars) VALUES (?, ?, ?, ?)",
            [
                (row_id, *_fts_texts(_stored_document(words, tokens)))
                for row_id, words, tokens in page
            ],
        )
        last = page[-1][0]
    db.execute("DELETE FROM memory_meta WHERE key = 'fts_stale'")
    return existed


def _slot(db: sqlite3.Connection, app_name: str, user_id: str) -> int:
    """The user's slot, taken on first use."""
    db.execute(
        "INSERT OR IGNORE INTO memory_users (app_name, user_id) VALUES (?, ?)", (app_name, user_id)
    )
    (slot,) = db.execute(
        "SELECT slot FROM memory_users WHERE app_name = ? AND user_id = ?", (app_name, user_id)
    ).fetchone()
    return int(slot)


def _id_range(slot: int) -> tuple[int, int]:
    """The ids of a slot's entries (0 is never an id)."""
    return slot << _SLOT_BITS, ((slot + 1) << _SLOT_BITS) - 1


def _stale(db: sqlite3.Connection) -> None:
    db.execute("INSERT OR REPLACE INTO memory_meta (key, value) VALUES ('fts_stale', '1')")


def _apply(
    tx: WriteTx,
    *,
    key: SessionKey,
    doomed: Sequence[int],
    rows: Sequence[_Row],
    fts: bool,
    mark_stale: bool,
) -> None:
    db = tx.db
    if doomed:
        deleted = db.execute(
            "DELETE FROM memory_entries WHERE app_name = ? AND user_id = ?"
            " AND session_id = ? AND sequence IN (SELECT value FROM json_each(?))"
            " RETURNING id",
            (key.app_name, key.user_id, key.session_id, json.dumps(list(doomed))),
        ).fetchall()
        if fts and deleted:
            # One statement per row: FTS5 finds a rowid by equality, not with IN (a full scan).
            db.executemany("DELETE FROM memory_fts WHERE rowid = ?", deleted)
    if rows:
        # Ids are allocated here (this is the file's only writer), inside the user's range, so
        # that both tables are filled with one statement each.
        low, high = _id_range(_slot(db, key.app_name, key.user_id))
        (last,) = db.execute(
            "SELECT MAX(id) FROM memory_entries WHERE id BETWEEN ? AND ?", (low, high)
        ).fetchone()
        first = (low if last is None else int(last)) + 1
        if first + len(rows) - 1 > high:
            raise ContextEngineError(
                "INTERNAL", "this user's memory is full (2**32 - 1 entries were added)"
            )
        db.executemany(
            "INSERT INTO memory_entries (id, app_name, user_id, session_id, sequence, event_id,"
            " invocation_id, author, timestamp, content, words, tokens)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(first + n, *row.entry) for n, row in enumerate(rows)],
        )
        if fts:
            db.executemany(
                "INSERT INTO memory_fts (rowid, words, grams, chars) VALUES (?, ?, ?, ?)",
                [(first + n, *row.fts) for n, row in enumerate(rows)],
            )
    if mark_stale and (doomed or rows):
        _stale(db)


def _delete(
    tx: WriteTx, *, where: str, params: tuple[str, ...], fts: bool, mark_stale: bool
) -> int:
    db = tx.db
    deleted = db.execute(
        f"DELETE FROM memory_entries WHERE {where} RETURNING id", params
    ).fetchall()
    if not deleted:
        return 0
    if fts:
        db.executemany("DELETE FROM memory_fts WHERE rowid = ?", deleted)
    if mark_stale:
        _stale(db)
    return len(deleted)


# On the reader's thread ------------------------------------------------------------------------


def _hit(row: Sequence[Any], score: float) -> Hit:
    session_id, sequence, event_id, invocation_id, author, timestamp, content, words, tokens = row
    parsed = content_pb2.Content()
    parsed.ParseFromString(content)
    entry = Entry(
        sequence=int(sequence),
        event_id=str(event_id),
        invocation_id=str(invocation_id),
        author=str(author),
        timestamp=float(timestamp),
        content=parsed,
        doc=_stored_document(str(words), str(tokens)),
    )
    return Hit(str(session_id), entry, score)


def _user_range(db: sqlite3.Connection, app_name: str, user_id: str) -> tuple[int, int] | None:
    row = db.execute(
        "SELECT slot FROM memory_users WHERE app_name = ? AND user_id = ?", (app_name, user_id)
    ).fetchone()
    return None if row is None else _id_range(int(row[0]))


def _search_fts(
    db: sqlite3.Connection,
    *,
    app_name: str,
    user_id: str,
    terms: Sequence[QueryTerm],
    limit: int,
) -> list[Hit]:
    ids = _user_range(db, app_name, user_id)
    if ids is None:
        return []
    # The rowid range makes FTS5 read only this user's part of each doclist; BM25's statistics
    # stay those of the whole index.
    rows = db.execute(
        f"SELECT {_COLUMNS}, bm25(memory_fts) AS rank"
        " FROM memory_fts JOIN memory_entries AS e ON e.id = memory_fts.rowid"
        " WHERE memory_fts MATCH ? AND memory_fts.rowid BETWEEN ? AND ?"
        " AND e.app_name = ? AND e.user_id = ?"
        " ORDER BY rank, e.timestamp DESC, e.session_id, e.sequence LIMIT ?",
        (fts_query(terms), *ids, app_name, user_id, limit),
    ).fetchall()
    return [_hit(row[:-1], -float(row[-1])) for row in rows]


def _search_instr(
    db: sqlite3.Connection,
    *,
    app_name: str,
    user_id: str,
    terms: Sequence[QueryTerm],
    limit: int,
) -> list[Hit]:
    ids = _user_range(db, app_name, user_id)
    if ids is None:
        return []
    needles = [_instr_needle(term) for term in terms]
    matched = " + ".join(f"(instr(e.{column}, ?) > 0)" for column, _ in needles)
    rows = db.execute(
        f"SELECT * FROM (SELECT {_COLUMNS}, {matched} AS matched"
        " FROM memory_entries AS e WHERE e.id BETWEEN ? AND ?"
        " AND e.app_name = ? AND e.user_id = ?)"
        " WHERE matched > 0 ORDER BY matched DESC, timestamp DESC, session_id, sequence LIMIT ?",
        (*(needle for _, needle in needles), *ids, app_name, user_id, limit),
    ).fetchall()
    return [_hit(row[:-1], float(row[-1])) for row in rows]
