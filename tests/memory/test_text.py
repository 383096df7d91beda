"""Tokenization of entries and queries (``contextengine.memory.text``)."""

from __future__ import annotations

import pytest

from contextengine.memory.text import (
    GRAM_SEPARATOR,
    Document,
    QueryTerm,
    TermKind,
    count_in,
    document,
    query_terms,
    script_runs,
    token_count,
)

pytestmark = pytest.mark.unit

W, S = TermKind.WORD, TermKind.SUBSTRING


def test_script_runs_follow_adk() -> None:
    assert script_runs("plain") == ["plain"]
    assert script_runs("私はPythonを使う") == ["私は", "Python", "を使う"]
    assert script_runs("café東京") == ["café", "東京"]
    assert script_runs("x_1") == ["x_1"]


def test_document_terms() -> None:
    doc = document("Hello, World! 私はPythonを使う. Café au lait, café.")
    assert doc.words == ("hello", "world", "python", "au", "lait")
    assert doc.tokens == ("私はpythonを使う", "café", "café")
    grams = doc.grams()
    assert grams[:3] == ["私は", "はp", "py"]
    assert grams.count(GRAM_SEPARATOR) == 2
    assert doc.chars() == ["私", "は", "を", "使", "う", "é", "é"]
    assert token_count(doc) == len(doc.words) + len(grams) + len(doc.chars())


def test_document_is_nfc_and_bounded() -> None:
    assert document("cafe\u0301").tokens == ("café",)
    assert document("").empty
    assert document("?! ...").empty
    big = document("word " * 100 + "東" * 10, max_bytes=50)
    assert big.words == ("word",) * 10
    assert big.tokens == ()
    # A cut never splits a character: 東 needs three more bytes.
    assert document("ab東京", max_bytes=4) == Document(words=("ab",), tokens=())
    assert document("ab東京", max_bytes=5).tokens == ("ab東",)


def test_query_terms() -> None:
    assert query_terms("Paris paris PARIS") == [QueryTerm(W, "paris")]
    assert query_terms("東京の天気 in Tokyo") == [
        QueryTerm(S, "東京の天気"),
        QueryTerm(W, "in"),
        QueryTerm(W, "tokyo"),
    ]
    assert query_terms("pythonを使う") == [QueryTerm(W, "python"), QueryTerm(S, "を使う")]
    assert query_terms('"NEAR(a* b)" AND x:y') == [
        QueryTerm(W, "near"),
        QueryTerm(W, "a"),
        QueryTerm(W, "b"),
        QueryTerm(W, "and"),
        QueryTerm(W, "x"),
        QueryTerm(W, "y"),
    ]
    assert query_terms("?!") == []
    assert len(query_terms(" ".join(f"w{n}" for n in range(100)))) == 64
    assert query_terms(" ".join(f"w{n}" for n in range(100)), max_terms=3)[-1].text == "w2"


def test_counts_are_fts5_phrase_instances() -> None:
    doc = Document(words=("a", "b", "a"), tokens=("ああああ", "東京都", "東京"))
    assert count_in(QueryTerm(W, "a"), doc) == 2
    assert count_in(QueryTerm(S, "ああ"), doc) == 3  # overlapping occurrences
    assert count_in(QueryTerm(S, "東京"), doc) == 2
    assert count_in(QueryTerm(S, "京"), doc) == 2
    assert count_in(QueryTerm(S, "京東"), doc) == 0  # never across words
