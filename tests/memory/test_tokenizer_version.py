"""The SQLite memory index keeps its entries' terms; a file written by another tokenizer version
(``memory_meta.tokenizer``) is re-tokenized from the stored contents when it is opened, and its
FTS5 index rebuilt, so a search finds what the current rules say it should."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from contextengine.memory import sqlite_index
from contextengine.memory.documents import content_document
from contextengine.memory.text import TOKENIZER_VERSION, Document
from contextengine.store import SessionKey
from contextengine.v1 import content_pb2
from tests.memory.conftest import close_memory, open_memory
from tests.memory.helpers import event

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "alice", "s1")


async def _remember(db: Path, backend: str, *texts: str) -> None:
    memory = await open_memory(backend, db)
    try:
        await memory.store.create_session(KEY, {}, 1.0)
        await memory.store.append_events(
            KEY,
            [event(text, event_id=f"e{n}", timestamp=10.0 + n) for n, text in enumerate(texts)],
            None,
        )
        await memory.service.add_session(KEY)
    finally:
        await close_memory(memory)


async def _found(db: Path, backend: str, query: str) -> list[str]:
    memory = await open_memory(backend, db)
    try:
        result = await memory.service.search(KEY.app_name, KEY.user_id, query, 100)
        return [hit.entry.content.parts[-1].text for hit in result.hits]
    finally:
        await close_memory(memory)


def _tamper(db: Path, *, stamp: str | None) -> None:
    """Terms (and FTS rows) that the current tokenizer would not write, under ``stamp``."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE memory_entries SET words = ' stale ', tokens = ' '")
        has_fts = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_fts'").fetchone()
        if has_fts:
            conn.execute("DELETE FROM memory_fts")
            conn.execute(
                "INSERT INTO memory_fts (rowid, words) SELECT id, ' stale ' FROM memory_entries"
            )
        conn.execute("DELETE FROM memory_meta WHERE key = 'tokenizer'")
        if stamp is not None:
            conn.execute("INSERT INTO memory_meta VALUES ('tokenizer', ?)", (stamp,))


def _stamp(db: Path) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT value FROM memory_meta WHERE key = 'tokenizer'").fetchone()
    return None if row is None else str(row[0])


@pytest.mark.parametrize("backend", ["sqlite-fts5", "sqlite-no-fts"])
async def test_a_new_file_is_stamped_with_this_version(tmp_path: Path, backend: str) -> None:
    db = tmp_path / "m.db"
    await _remember(db, backend, "apple pie")
    assert _stamp(db) == str(TOKENIZER_VERSION)


@pytest.mark.parametrize("backend", ["sqlite-fts5", "sqlite-no-fts"])
async def test_terms_of_another_version_are_derived_again(tmp_path: Path, backend: str) -> None:
    db = tmp_path / "m.db"
    await _remember(db, backend, "apple pie", "banana bread")
    _tamper(db, stamp=str(TOKENIZER_VERSION + 1))
    assert await _found(db, backend, "apple") == ["apple pie"]
    assert await _found(db, backend, "stale") == []
    assert _stamp(db) == str(TOKENIZER_VERSION)


async def test_fts_rows_left_stale_without_fts5_are_rebuilt_later(tmp_path: Path) -> None:
    """Re-tokenized while FTS5 is off: the FTS5 table (if any) is rebuilt when it is used."""
    db = tmp_path / "m.db"
    await _remember(db, "sqlite-fts5", "apple pie")
    _tamper(db, stamp="0")
    assert await _found(db, "sqlite-no-fts", "apple") == ["apple pie"]
    assert await _found(db, "sqlite-fts5", "apple") == ["apple pie"]
    assert await _found(db, "sqlite-fts5", "stale") == []


async def test_a_file_without_a_stamp_was_written_by_version_1(tmp_path: Path) -> None:
    """Files from before the stamp hold version 1's terms: they are stamped, not re-derived."""
    db = tmp_path / "m.db"
    await _remember(db, "sqlite-no-fts", "apple pie")
    _tamper(db, stamp=None)
    assert await _found(db, "sqlite-no-fts", "stale") == (
        ["apple pie"] if TOKENIZER_VERSION == 1 else []
    )
    assert _stamp(db) == str(TOKENIZER_VERSION)


async def test_entries_without_terms_under_the_new_rules_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    await _remember(db, "sqlite-no-fts", "apple pie", "banana bread")
    _tamper(db, stamp="0")

    def rules(content: content_pb2.Content) -> Document:
        return Document((), ()) if "banana" in content.parts[0].text else content_document(content)

    monkeypatch.setattr(sqlite_index, "content_document", rules)
    assert await _found(db, "sqlite-no-fts", "apple") == ["apple pie"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM memory_entries").fetchone() == (1,)
