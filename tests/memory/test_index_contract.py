"""The ``MemoryIndex`` contract, run against every backend (in-memory, SQLite with and without
FTS5): storage by session and sequence, isolation, matching, limits, ties and deletion."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from contextengine.memory import Hit, MemoryIndex, PythonMemoryIndex
from contextengine.memory.text import query_terms
from contextengine.store import SessionKey
from tests.memory.conftest import Memory, close_memory, open_memory
from tests.memory.helpers import entry

pytestmark = pytest.mark.unit

S1 = SessionKey("app", "alice", "s1")
S2 = SessionKey("app", "alice", "s2")


async def search(
    index: MemoryIndex, query: str, *, user: str = "alice", app: str = "app", limit: int = 50
) -> list[tuple[str, int]]:
    hits = await index.search(app, user, query_terms(query), limit)
    return [(hit.session_id, hit.entry.sequence) for hit in hits]


async def test_apply_remembered_and_upsert(index: MemoryIndex) -> None:
    assert await index.remembered(S1) == {}
    await index.apply(S1, [], [entry("alpha one", 1), entry("beta two", 2)])
    assert await index.remembered(S1) == {1: "e1", 2: "e2"}
    # An upsert replaces the entry with the same sequence; a removal removes it.
    await index.apply(S1, [2], [entry("gamma three", 1)])
    assert await index.remembered(S1) == {1: "e1"}
    assert await search(index, "alpha") == []
    assert await search(index, "gamma") == [("s1", 1)]
    assert await search(index, "beta") == []
    # Removing what is not there is harmless.
    await index.apply(S1, [7, 8], [])
    assert await index.remembered(S1) == {1: "e1"}


async def test_search_never_crosses_users_or_apps(index: MemoryIndex) -> None:
    await index.apply(SessionKey("app", "alice", "s"), [], [entry("secret plan zebra")])
    await index.apply(SessionKey("app", "bob", "s"), [], [entry("zebra crossing")])
    await index.apply(SessionKey("other", "alice", "s"), [], [entry("zebra stripes")])
    hits = await index.search("app", "alice", query_terms("zebra"), 10)
    assert [hit.entry.content.parts[0].text for hit in hits] == ["secret plan zebra"]
    assert await search(index, "zebra", user="bob") == [("s", 1)]
    assert await search(index, "zebra", user="carol") == []
    assert await search(index, "zebra", app="other") == [("s", 1)]


@pytest.mark.parametrize(
    ("text", "query", "found"),
    [
        ("Python is great", "python", True),  # case folded
        ("Python is great", "PYTHON", True),
        ("I love python", "thon", False),  # whole words only
        ("hello, world!", "world", True),  # punctuation is not part of a word
        ("snake_case names", "snake", False),  # `_` is a word character
        ("snake_case names", "snake_case", True),
        ("in 2024 we met", "2024", True),
        ("私はPythonを使う", "python", True),  # the Latin run of a mixed word
        ("私はPythonを使う", "使う", True),  # text inside a non-Latin run
        ("東京都に行きました", "東京", True),
        ("東京都に行きました", "京", True),  # one character
        ("東京都に行きました", "大阪", False),
        ("東京 都", "東京都", False),  # never across words
        ("ソウルは서울", "서울", True),  # Korean run inside a Japanese word
        ("我们明天去北京开会", "北京", True),  # Chinese
        ("我们明天去北京开会", "开会", True),
        ("我们明天去北京开会", "上海", False),
        ("我们明天去北京开会", "北京开会吗", False),  # the whole term must occur
        ("the cafés are open", "café", True),  # a non-ASCII term matches inside a word
        ("the cafe is open", "café", False),  # no accent folding
        ("the café is open", "cafe", False),
        ("cafe\u0301 au lait", "café", True),  # NFC: decomposed text, composed query
        ("café au lait", "cafe\u0301", True),  # and the other way round
        ("Ünïcödé ÜBER alles", "über", True),
        ("Москва большая", "москва", True),  # Cyrillic is matched inside words too
        ("Москва большая", "моск", True),
    ],
)
async def test_matching(index: MemoryIndex, text: str, query: str, found: bool) -> None:
    await index.apply(S1, [], [entry(text)])
    assert (await search(index, query) == [("s1", 1)]) is found


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced',
        "NEAR(alpha beta)",
        "alpha NEAR beta",
        "alpha*",
        "(alpha OR beta",
        "alpha AND NOT beta",
        "words:alpha",
        "grams:xx chars:y",
        "{words}: alpha",
        "^alpha",
        "alpha + beta",
        "'; DROP TABLE memory_entries; --",
        "%",
        "_",
        "\\",
    ],
)
async def test_query_syntax_is_text(index: MemoryIndex, query: str) -> None:
    """FTS5 operators, column filters and SQL are words or punctuation, never syntax."""
    await index.apply(S1, [], [entry("alpha and beta near the words column", 1)])
    await index.apply(S1, [], [entry("unrelated text", 2)])
    hits = await search(index, query)
    expected = [
        term.text
        for term in query_terms(query)
        if term.text in {"alpha", "and", "beta", "near", "the", "words", "column"}
    ]
    assert (hits == [("s1", 1)]) == bool(expected), (query, hits)
    assert await index.remembered(S1) == {1: "e1", 2: "e2"}


async def test_no_terms_match_nothing(index: MemoryIndex) -> None:
    await index.apply(S1, [], [entry("anything at all")])
    assert await index.search("app", "alice", [], 10) == []
    assert await search(index, "?!...") == []


async def test_limit_and_ties_newest_first(index: MemoryIndex) -> None:
    # Equal texts score the same: newer timestamp first, then session id, then sequence.
    await index.apply(S2, [], [entry("same words", 1, timestamp=50.0)])
    await index.apply(
        S1,
        [],
        [
            entry("same words", 1, timestamp=10.0),
            entry("same words", 2, timestamp=50.0),
            entry("same words", 3, timestamp=30.0),
        ],
    )
    assert await search(index, "words") == [("s1", 2), ("s2", 1), ("s1", 3), ("s1", 1)]
    assert await search(index, "words", limit=2) == [("s1", 2), ("s2", 1)]


async def test_more_matching_terms_rank_first(index: MemoryIndex) -> None:
    filler = [entry(f"filler number {n}", n) for n in range(10, 30)]
    await index.apply(S2, [], filler)
    await index.apply(
        S1, [], [entry("red apples", 1), entry("red apples and green pears", 2), entry("pears", 3)]
    )
    hits = await search(index, "green pears apples")
    assert hits[0] == ("s1", 2)
    assert set(hits) == {("s1", 1), ("s1", 2), ("s1", 3)}


async def test_delete_session_and_user(index: MemoryIndex) -> None:
    await index.apply(S1, [], [entry("kiwi one", 1), entry("kiwi two", 2)])
    await index.apply(S2, [], [entry("kiwi three", 1)])
    bob = SessionKey("app", "bob", "s1")
    await index.apply(bob, [], [entry("kiwi four", 1)])
    assert await index.delete_session(S1) == 2
    assert await index.delete_session(S1) == 0
    assert await search(index, "kiwi") == [("s2", 1)]
    assert await index.delete_user("app", "alice") == 1
    assert await index.delete_user("app", "alice") == 0
    assert await search(index, "kiwi") == []
    assert await search(index, "kiwi", user="bob") == [("s1", 1)]
    assert await index.remembered(S1) == {}


async def test_returned_entries_are_copies(index: MemoryIndex) -> None:
    await index.apply(S1, [], [entry("mango lassi")])
    first = await index.search("app", "alice", query_terms("mango"), 5)
    first[0].entry.content.parts[0].text = "changed"
    again = await index.search("app", "alice", query_terms("mango"), 5)
    assert again[0].entry.content.parts[0].text == "mango lassi"
    assert again[0].entry.author == "user"
    assert again[0].entry.timestamp == 1_001.0


async def test_bm25_rarer_terms_weigh_more(memory: Memory) -> None:
    """BM25 backends: an entry with the rare term beats entries with a common one."""
    if memory.index.ranking != "bm25":
        pytest.skip("ranks by matched terms")
    index = memory.index
    common = [entry(f"the weather report number {n}", n) for n in range(1, 9)]
    await index.apply(S1, [], [*common, entry("a note about zanzibar", 20)])
    await index.apply(S2, [], [entry(f"other text {n}", n) for n in range(1, 15)])
    hits = await index.search("app", "alice", query_terms("weather zanzibar"), 20)
    assert hits[0].entry.sequence == 20
    assert hits[0].score > hits[1].score > 0
    # Shorter entries with the same term rank higher (length normalisation).
    await index.apply(S2, [], [entry("zanzibar", 100), entry("zanzibar " + "padding " * 30, 101)])
    hits = await index.search("app", "alice", query_terms("zanzibar"), 3)
    assert [hit.entry.sequence for hit in hits[:2]] == [100, 20]


async def test_matched_terms_ranking(memory: Memory) -> None:
    """Without FTS5: more distinct query terms first, then newer."""
    if memory.index.ranking != "matched_terms":
        pytest.skip("ranks by BM25")
    index = memory.index
    await index.apply(
        S1,
        [],
        [
            entry("red apples", 1, timestamp=5.0),
            entry("red apples and green pears", 2, timestamp=1.0),
            entry("green", 3, timestamp=9.0),
            entry("nothing", 4),
        ],
    )
    hits = await index.search("app", "alice", query_terms("green red apples"), 10)
    assert [(hit.entry.sequence, hit.score) for hit in hits] == [(2, 3.0), (1, 2.0), (3, 1.0)]


def _corpus(seed: int) -> list[tuple[SessionKey, str]]:
    rng = random.Random(seed)
    vocabulary = [
        "paris",
        "rome",
        "weather",
        "rain",
        "sun",
        "trip",
        "hotel",
        "train",
        "museum",
        "pizza",
        "東京",
        "京都",
        "大阪",
        "天気",
        "雨",
        "ラーメン",
        "café",
        "crème",
        "über",
        "naïve",
        "the",
        "a",
        "is",
        "and",
        "to",
        "snake_case",
        "2024",
    ]
    corpus = []
    for n in range(120):
        words = rng.choices(vocabulary, k=rng.randint(1, 12))
        text = " ".join(words) if rng.random() < 0.7 else "".join(words)
        user = rng.choice(["alice", "bob"])
        corpus.append((SessionKey("app", user, f"s{n % 7}"), text))
    return corpus


def ids(hits: list[Hit]) -> list[tuple[str, int]]:
    return [(h.session_id, h.entry.sequence) for h in hits]


async def test_backends_rank_identically(tmp_path: Path) -> None:
    """The in-memory backend's BM25 is FTS5's: same entries, same order, same scores."""
    python = await open_memory("python", tmp_path / "unused.db")
    sqlite = await open_memory("sqlite-fts5", tmp_path / "fts.db")
    no_fts = await open_memory("sqlite-no-fts", tmp_path / "instr.db")
    try:
        sequences: dict[SessionKey, int] = {}
        for key, text in _corpus(7):
            sequences[key] = sequences.get(key, 0) + 1
            item = entry(
                text, sequences[key], timestamp=float(len(sequences) * 1000 + sequences[key])
            )
            for memory in (python, sqlite, no_fts):
                await memory.index.apply(key, [], [item])
        queries = [
            "paris weather",
            "東京の天気",
            "京",
            "café crème",
            "the",
            "rain in rome",
            "ラーメン 東京",
            "snake_case",
            "nothing here",
            "über naïve 2024",
            "a is to",
        ]
        for query in queries:
            for user in ("alice", "bob"):
                terms = query_terms(query)
                ours = await python.index.search("app", user, terms, 1000)
                theirs = await sqlite.index.search("app", user, terms, 1000)
                fallback = await no_fts.index.search("app", user, terms, 1000)
                assert ids(ours) == ids(theirs), query
                assert [h.score for h in ours] == pytest.approx([h.score for h in theirs], rel=1e-9)
                # Without FTS5 the same entries match, in another order.
                assert sorted(ids(fallback)) == sorted(ids(ours)), query
    finally:
        for memory in (python, sqlite, no_fts):
            await close_memory(memory)


async def test_cjk_queries_rank_entries_with_more_of_the_query_first(index: MemoryIndex) -> None:
    await index.apply(
        S1,
        [],
        [
            entry("今天北京的天气很好", 1),
            entry("北京有很多博物馆", 2),
            entry("明日の東京の天気は雨です", 3),
            entry("東京駅で会いましょう", 4),
            entry("上海的菜很好吃", 5),
        ],
    )
    await index.apply(S2, [], [entry(f"无关的句子{n}", n) for n in range(1, 8)])
    chinese = await search(index, "北京 天气")
    assert chinese[0] == ("s1", 1)
    assert set(chinese) == {("s1", 1), ("s1", 2)}
    japanese = await search(index, "東京 天気")
    assert japanese[0] == ("s1", 3)
    assert set(japanese) == {("s1", 3), ("s1", 4)}


async def test_python_index_forgets_the_words_of_removed_entries() -> None:
    index = PythonMemoryIndex()
    await index.apply(S1, [], [entry("kiwi one", 1), entry("kiwi two", 2)])
    await index.apply(S1, [1], [])
    assert await index.delete_session(S1) == 1
    assert not index._word_rows  # document frequencies of words no entry holds are dropped
    assert await search(index, "kiwi") == []
