"""Keyword memory against google-adk 2.13 (spec section 9.2/9.3), on the same events.

* Which entries match: ADK's ``InMemoryMemoryService`` (whole words for ASCII query words, text
  inside a word for the others, with Latin / non-Latin runs), on the spec's cases and on
  generated ones.
* In which order: ADK's ``SqliteMemoryService`` ranks with FTS5's BM25 too; on text where both
  tokenize alike (ASCII without ``_``) the order is the same, ties included.
* Where the engine deliberately differs (thoughts, rewinds, mixed-script query words), a test
  shows ADK's behaviour and ours.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from google.adk.events.event import Event
from google.adk.memory import in_memory_memory_service

from contextengine.memory.documents import live_entries
from contextengine.store import SessionKey
from tests.memory.adk import APP, USER, adk_event, in_memory_ids, session, sqlite_ids, to_proto
from tests.memory.conftest import Memory

pytestmark = pytest.mark.parity


@pytest.fixture(autouse=True)
def _no_adk_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADK's in-memory service returns ten memories; compare whole result sets."""
    monkeypatch.setattr(in_memory_memory_service, "_MAX_SEARCH_RESULTS", 10_000)


async def ingest(memory: Memory, session_id: str, events: Sequence[Event]) -> None:
    key = SessionKey(APP, USER, session_id)
    _, entries = live_entries(to_proto(events))
    await memory.index.apply(key, [], entries)


async def engine_ids(memory: Memory, query: str) -> list[str]:
    result = await memory.service.search(APP, USER, query, 1000)
    return [hit.entry.event_id for hit in result.hits]


SPEC_TEXTS = [
    "Python is great",
    "I love python",
    "hello, world!",
    "snake_case names",
    "in 2024 we met",
    "私はPythonを使う",
    "東京都に行きました",
    "東京 都",
    "ソウルは서울",
    "the cafés are open",
    "the cafe is open",
    "the café is open",
    "cafe\u0301 au lait",
    "Ünïcödé ÜBER alles",
    "Москва большая",
    "İstanbul trip",
    "ＰＹＴＨＯＮ fullwidth",
    "Straße und Strasse",
    "ﬁne ligature",
    "numbers ①②③ and ٣",
    "ぱいそん と パイソン",
    "한국어 텍스트와 English words",
]

SPEC_QUERIES = [
    "python",
    "PYTHON",
    "thon",
    "world",
    "snake",
    "snake_case",
    "2024",
    "使う",
    "東京",
    "京",
    "東京都",
    "大阪",
    "서울",
    "café",
    "cafe",
    "cafe\u0301",
    "über",
    "москва",
    "моск",
    "istanbul",
    "İstanbul",
    "ｐｙｔｈｏｎ",
    "straße",
    "fine",
    "ﬁne",
    "②",
    "パイソン",
    "english 텍스트",
    "what did I say about python and 東京?",
    'NEAR(python) OR "world" AND *',
    "?!",
]


async def test_spec_cases_match_the_same_entries_as_adk(memory: Memory) -> None:
    events = [adk_event(f"e{n}", text, timestamp=1_000.0 + n) for n, text in enumerate(SPEC_TEXTS)]
    await ingest(memory, "s1", events)
    adk = await in_memory_ids([session("s1", events)], SPEC_QUERIES)
    for query in SPEC_QUERIES:
        assert sorted(await engine_ids(memory, query)) == sorted(adk[query]), query


def _generated(seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    latin = ["paris", "rome", "weather", "rain", "trip", "hotel", "café", "über", "naïve", "2024"]
    other = ["東京", "京都", "天気", "雨", "ラーメン", "서울", "москва", "は", "に", "の"]
    texts = []
    for _ in range(60):
        words = rng.choices(latin + other, k=rng.randint(1, 8))
        # Glue some words together: mixed-script words like ADK's 私はPythonを使う.
        glued: list[str] = []
        for word in words:
            if glued and rng.random() < 0.4:
                glued[-1] += word
            else:
                glued.append(word)
        texts.append(rng.choice([" ", ", ", "  "]).join(glued))
    queries = []
    for _ in range(150):
        # Query words are single-script (mixed ones are a documented difference).
        words = rng.choices(latin + other + ["ris", "京", "ー", "ナ"], k=rng.randint(1, 3))
        queries.append(" ".join(words))
    return texts, queries


async def test_generated_cases_match_the_same_entries_as_adk(memory: Memory) -> None:
    texts, queries = _generated(11)
    events = [adk_event(f"g{n}", text, timestamp=1_000.0 + n) for n, text in enumerate(texts)]
    await ingest(memory, "s1", events)
    adk = await in_memory_ids([session("s1", events)], queries)
    for query in queries:
        assert sorted(await engine_ids(memory, query)) == sorted(adk[query]), query


ASCII_TEXTS = [
    "The weather in Paris is rainy today",
    "Paris hotels are expensive in summer",
    "I booked a train from Paris to Rome",
    "Rome has great pizza and gelato",
    "The museum in Rome opens at nine",
    "Rainy weather again, bring an umbrella",
    "Umbrella sales go up when it rains",
    "Pizza in Naples is even better than in Rome",
    "The train was late by twenty minutes",
    "My trip: Paris, Rome, Naples. Weather was fine!",
    "Don't forget the museum tickets",
    "weather weather weather",
    "A short note",
    "Gelato, gelato and more gelato in Florence",
]

ASCII_QUERIES = [
    "weather",
    "paris weather",
    "rome pizza",
    "train to Rome",
    "museum tickets",
    "gelato",
    "umbrella rainy",
    "what was the weather like in Paris?",
    "don't",
    "florence naples",
    "nothing matches",
]


async def test_ascii_ranking_matches_adk_sqlite(memory: Memory, tmp_path: Path) -> None:
    if memory.index.ranking != "bm25":
        pytest.skip("ADK's SqliteMemoryService ranks with BM25")
    events = [
        adk_event(f"a{n}", text, timestamp=1_000.0 + 7 * n) for n, text in enumerate(ASCII_TEXTS)
    ]
    await ingest(memory, "s1", events)
    adk = await sqlite_ids(str(tmp_path / "adk.db"), [session("s1", events)], ASCII_QUERIES)
    for query in ASCII_QUERIES:
        assert await engine_ids(memory, query) == adk[query], query


async def test_ties_rank_like_adk_sqlite(memory: Memory, tmp_path: Path) -> None:
    """Equal scores: the newer event first, as ADK's ``ORDER BY bm25(...), timestamp DESC``."""
    if memory.index.ranking != "bm25":
        pytest.skip("ADK's SqliteMemoryService ranks with BM25")
    events = [
        adk_event(f"t{n}", "same words here", timestamp=float(n % 3 * 10 + n)) for n in range(6)
    ]
    events += [adk_event(f"f{n}", f"filler {n}", timestamp=5.0) for n in range(10)]
    await ingest(memory, "s1", events)
    adk = await sqlite_ids(str(tmp_path / "adk.db"), [session("s1", events)], ["words"])
    assert await engine_ids(memory, "words") == adk["words"]


async def test_deliberate_differences_from_adk(memory: Memory) -> None:
    events = [
        adk_event("thought", "visible answer", thought="hidden chain of reasoning"),
        adk_event("mixed", "Python is fun", timestamp=1_001.0),
        adk_event("kept", "booked the green room", invocation_id="inv-1", timestamp=1_002.0),
        adk_event("gone", "cancel the red room", invocation_id="inv-2", timestamp=1_003.0),
    ]
    rewind = adk_event("rw", "", invocation_id="inv-3", timestamp=1_004.0)
    rewind.actions.rewind_before_invocation_id = "inv-2"
    rewind.content = None
    events.append(rewind)
    await ingest(memory, "s1", events)
    queries = ["reasoning", "pythonを使う", "room"]
    adk = await in_memory_ids([session("s1", events)], queries)
    # A model's thought text: ADK's in-memory service finds it, the engine never does.
    assert adk["reasoning"] == ["thought"]
    assert await engine_ids(memory, "reasoning") == []
    # A query word mixing scripts: ADK's in-memory service looks for the whole word; the engine
    # (like ADK's SqliteMemoryService) looks for each run, so Python is found.
    assert adk["pythonを使う"] == []
    assert await engine_ids(memory, "pythonを使う") == ["mixed"]
    # Rewound turns: ADK remembers them, the engine does not.
    assert sorted(adk["room"]) == ["gone", "kept"]
    assert await engine_ids(memory, "room") == ["kept"]
