"""Memory on PostgreSQL beyond the index contract (which runs on it in test_index_contract.py):
the same entries as SQLite FTS5 for every query of a mixed-script corpus, ts_rank's ordering,
words too long for a lexeme, and entries longer than a tsvector's positions."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextengine.memory.text import query_terms
from contextengine.store import SessionKey
from tests.memory.conftest import Memory, close_memory, open_memory
from tests.memory.helpers import entry
from tests.memory.test_index_contract import _corpus, ids, search

pytestmark = pytest.mark.unit

S1 = SessionKey("app", "alice", "s1")
S2 = SessionKey("app", "alice", "s2")


async def test_postgres_finds_what_sqlite_fts5_finds(tmp_path: Path, postgres_dsn: str) -> None:
    postgres = await open_memory("postgres", postgres_dsn)
    sqlite = await open_memory("sqlite-fts5", tmp_path / "fts.db")
    try:
        sequences: dict[SessionKey, int] = {}
        for key, text in _corpus(11):
            sequences[key] = sequences.get(key, 0) + 1
            item = entry(text, sequences[key], timestamp=float(len(sequences) * 100))
            for memory in (postgres, sqlite):
                await memory.index.apply(key, [], [item])
        queries = [
            "paris weather",
            "東京の天気",
            "京",
            "京都",
            "café crème",
            "the",
            "ラーメン 東京",
            "snake_case",
            "snake",
            "über naïve 2024",
            "天気雨",
            "nothing here",
        ]
        for query in queries:
            for user in ("alice", "bob"):
                terms = query_terms(query)
                ours = await postgres.index.search("app", user, terms, 1000)
                theirs = await sqlite.index.search("app", user, terms, 1000)
                assert sorted(ids(ours)) == sorted(ids(theirs)), (query, user)
                assert [hit.score for hit in ours] == sorted(
                    (hit.score for hit in ours), reverse=True
                )
    finally:
        await close_memory(postgres)
        await close_memory(sqlite)


async def test_ts_rank_prefers_shorter_entries_and_more_terms(memory: Memory) -> None:
    if memory.index.ranking != "ts_rank":
        return  # the BM25 and matched-terms orders are checked in test_index_contract.py
    index = memory.index
    await index.apply(
        S1,
        [],
        [
            entry("zanzibar " + "padding " * 40, 1),
            entry("zanzibar", 2),
            entry("zanzibar spice market", 3),
            entry("spice old market", 4),
            entry("zanzibar old market", 5),
        ],
    )
    assert (await search(index, "zanzibar"))[0] == ("s1", 2)
    # Of entries of one length, the one with both terms first; normalization by length can
    # put a shorter entry with one term above a longer one with both (docs/design/memory.md).
    both = await search(index, "zanzibar spice")
    assert both.index(("s1", 3)) < min(both.index(("s1", 4)), both.index(("s1", 5)))
    assert set(both) == {("s1", n) for n in (1, 2, 3, 4, 5)}


async def test_words_longer_than_a_lexeme_are_found_whole(memory: Memory) -> None:
    long_word = "x" * 3000
    await memory.index.apply(S1, [], [entry(f"start {long_word} end", 1)])
    await memory.index.apply(S2, [], [entry(f"{long_word}y", 1), entry("東" * 2000 + "京都", 2)])
    assert await search(memory.index, long_word) == [("s1", 1)]
    assert await search(memory.index, long_word + "y") == [("s2", 1)]
    assert await search(memory.index, "x" * 2999) == []
    assert await search(memory.index, "東京都") == [("s2", 2)]


async def test_terms_past_the_last_position_still_match(memory: Memory) -> None:
    """A tsvector stores positions up to 16383; matching never depends on them."""
    filler = " ".join(f"w{n}" for n in range(20_000))
    await memory.index.apply(S1, [], [entry(f"{filler} 北京开会 needle", 1)])
    assert await search(memory.index, "needle") == [("s1", 1)]
    assert await search(memory.index, "开会") == [("s1", 1)]
    assert await search(memory.index, "北京开会") == [("s1", 1)]
    assert await search(memory.index, "会北") == []
