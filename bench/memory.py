"""Long-term memory: ingestion throughput and search latency, against google-adk's
``SqliteMemoryService`` on the same data.

Workload (seeded, deterministic): ``sessions`` sessions with ``events_per_session`` events each
(100,000 events of 1,000 sessions by default; ``--quick``: 5,000 of 100), alternating user and
agent turns of 8-40 words, in two layouts run one after the other on fresh databases: every
session belongs to one user (the worst case for a search: all entries are that user's), or the
sessions are spread evenly over 100 users (a search reads one user's entries; BM25's statistics
are still those of all entries). Words follow a Zipf law over a vocabulary of 60 English
function words and 8,000 invented content words, so some terms are in most entries and most are
rare; one event in ten is Japanese or Chinese (words of 2-3 CJK characters, no spaces).

* ``engine ingest``: ``AddSessionToMemory`` for every session, 8 concurrent callers, the sidecar
  as a separate process (``python -m contextengine serve``, SQLite file, FTS5). Events per second
  of the whole run; the latency column is per call (one session).
* ``engine re-ingest, unchanged``: the same calls again; nothing is new, nothing is written.
* ``ADK ingest``: ``SqliteMemoryService.add_session_to_memory`` for the same sessions as ADK
  ``Session`` objects, in this process, one after the other (its FTS5 mode, its defaults).
* ``search: <kind>``: ``SearchMemory`` (limit 10) over gRPC, one query at a time, for four kinds
  of queries: one rare word; two or three content words; a 10-15 word question with function
  words (what a preload sends); one CJK word. ``ADK search``: ``search_memory`` on the same
  queries (``max_results=10``), in this process.

Data checks: the engine remembered exactly the events with text; every result of every search
contains one of the query's terms; for the ASCII queries, the engine and ADK agree on whether
anything matches.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench import DataCheckError, Measurement, Options, Report
from bench.sidecar import Sidecar
from contextengine.client import ContextEngineClient
from contextengine.memory.text import document, query_terms
from contextengine.v1 import content_pb2, event_pb2

APP = "bench-memory"
USER = "user-1"
START_TIMEOUT_SECONDS = 60.0
CONCURRENCY = 8
LIMIT = 10

FUNCTION_WORDS = (
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "if",
    "then",
    "to",
    "of",
    "in",
    "on",
    "at",
    "by",
    "for",
    "with",
    "from",
    "about",
    "as",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "it",
    "this",
    "that",
    "these",
    "those",
    "i",
    "you",
    "he",
    "she",
    "we",
    "they",
    "me",
    "my",
    "your",
    "our",
    "their",
    "what",
    "which",
    "who",
    "when",
    "where",
    "why",
    "how",
    "do",
    "did",
    "not",
    "no",
    "yes",
    "can",
    "will",
    "would",
    "should",
)
CJK_CHARS = "東京都大阪京会議天気雨晴明日今週予約旅行電車駅店料理水茶家族友達仕事時間新古高安"


@dataclass(frozen=True)
class Sizes:
    sessions: int
    events_per_session: int
    queries_per_kind: int


FULL = Sizes(sessions=1000, events_per_session=100, queries_per_kind=100)
QUICK = Sizes(sessions=100, events_per_session=50, queries_per_kind=50)
LAYOUTS = (1, 100)


@dataclass(frozen=True)
class Turn:
    event_id: str
    author: str
    invocation_id: str
    timestamp: float
    text: str


class Corpus:
    """The seeded words, turns and queries."""

    def __init__(self, seed: int = 20260501) -> None:
        self.rng = random.Random(seed)
        syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
        content: set[str] = set()
        while len(content) < 8000:
            content.add("".join(self.rng.choices(syllables, k=self.rng.randint(2, 4))))
        self.content = sorted(content)
        self.rng.shuffle(self.content)
        # Zipf weights: rank r has weight 1 / r.
        self.weights = [1.0 / (rank + 1) for rank in range(len(self.content))]
        self.cjk_words = sorted(
            {"".join(self.rng.choices(CJK_CHARS, k=self.rng.randint(2, 3))) for _ in range(400)}
        )

    def sentence(self, words: int) -> str:
        out = []
        for _ in range(words):
            if self.rng.random() < 0.45:
                out.append(self.rng.choice(FUNCTION_WORDS))
            else:
                out.append(self.rng.choices(self.content, self.weights)[0])
        return " ".join(out).capitalize() + "."

    def cjk_sentence(self, words: int) -> str:
        return "".join(self.rng.choices(self.cjk_words, k=words)) + "。"

    def session(self, index: int, size: int, start: float) -> list[Turn]:
        turns = []
        for n in range(size):
            cjk = self.rng.random() < 0.1
            length = self.rng.randint(8, 40)
            text = self.cjk_sentence(length // 3) if cjk else self.sentence(length)
            turns.append(
                Turn(
                    event_id=f"s{index}-e{n}",
                    author="user" if n % 2 == 0 else "assistant",
                    invocation_id=f"s{index}-i{n // 2}",
                    timestamp=start + n,
                    text=text,
                )
            )
        return turns

    def queries(self, kind: str, count: int) -> list[str]:
        out = []
        for _ in range(count):
            if kind == "rare word":
                out.append(self.rng.choice(self.content[2000:]))
            elif kind == "2-3 words":
                out.append(
                    " ".join(self.rng.choices(self.content[:3000], k=self.rng.randint(2, 3)))
                )
            elif kind == "question":
                out.append(self.sentence(self.rng.randint(10, 15)).rstrip(".") + "?")
            else:
                out.append(self.rng.choice(self.cjk_words))
        return out


QUERY_KINDS = ("rare word", "2-3 words", "question", "CJK word")


def to_proto(turn: Turn) -> event_pb2.Event:
    return event_pb2.Event(
        id=turn.event_id,
        author=turn.author,
        invocation_id=turn.invocation_id,
        timestamp=turn.timestamp,
        content=content_pb2.Content(
            role="user" if turn.author == "user" else "model",
            parts=[content_pb2.Part(text=turn.text)],
        ),
    )


# Workloads -------------------------------------------------------------------------------------


def user_of(session: int, users: int) -> str:
    return f"user-{session % users}"


async def _load_log(client: ContextEngineClient, sessions: list[list[Turn]], users: int) -> None:
    for index, turns in enumerate(sessions):
        user = user_of(index, users)
        await client.create_session(APP, user, f"s{index}")
        for start in range(0, len(turns), 100):
            batch = [to_proto(turn) for turn in turns[start : start + 100]]
            await client.append_events(APP, user, f"s{index}", batch)


async def _ingest(
    client: ContextEngineClient, count: int, users: int, server: Sidecar
) -> tuple[float, list[float], int, float | None]:
    """(seconds, per-call ms, entries remembered, sidecar CPU seconds)."""
    latencies: list[float] = []
    remembered = 0
    queue = list(range(count))

    async def worker() -> None:
        nonlocal remembered
        while queue:
            index = queue.pop()
            start = time.perf_counter()
            response = await client.add_session_to_memory(APP, user_of(index, users), f"s{index}")
            latencies.append((time.perf_counter() - start) * 1000)
            remembered += response.entry_count

    cpu_before = server.cpu_seconds()
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    seconds = time.perf_counter() - start
    cpu_after = server.cpu_seconds()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return seconds, latencies, remembered, cpu


def _contains_a_term(query: str, text: str) -> bool:
    doc = document(text)
    for term in query_terms(query):
        if term.kind.value == "word" and term.text in doc.words:
            return True
        if term.kind.value == "substring" and any(term.text in token for token in doc.tokens):
            return True
    return False


async def _search_engine(
    client: ContextEngineClient, queries: Sequence[str], users: int, server: Sidecar
) -> tuple[Measurement, list[int]]:
    latencies: list[float] = []
    counts: list[int] = []
    cpu_before = server.cpu_seconds()
    start = time.perf_counter()
    for n, query in enumerate(queries):
        began = time.perf_counter()
        response = await client.search_memory(APP, user_of(n, users), query, limit=LIMIT)
        latencies.append((time.perf_counter() - began) * 1000)
        counts.append(len(response.memories))
        for memory in response.memories:
            if not _contains_a_term(query, memory.content.parts[0].text):
                raise DataCheckError(f"{query!r} returned {memory.content.parts[0].text!r}")
    seconds = time.perf_counter() - start
    cpu_after = server.cpu_seconds()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return Measurement("", len(queries), seconds, tuple(latencies), server_cpu_seconds=cpu), counts


@dataclass
class Layout:
    ingest: Measurement
    again: Measurement
    searches: dict[str, Measurement]
    counts: dict[str, list[int]]


async def _engine(
    workdir: Path, sessions: list[list[Turn]], users: int, queries: dict[str, list[str]]
) -> Layout:
    events = sum(len(turns) for turns in sessions)
    async with (
        Sidecar(
            workdir, "memory", start_timeout=START_TIMEOUT_SECONDS, stop_timeout=30.0
        ) as server,
        ContextEngineClient(server.target, timeout=120.0) as client,
    ):
        await _load_log(client, sessions, users)
        seconds, latencies, remembered, cpu = await _ingest(client, len(sessions), users, server)
        if remembered != events:
            raise DataCheckError(f"remembered {remembered} entries of {events} events")
        ingest = Measurement(
            "engine ingest", events, seconds, tuple(latencies), server_cpu_seconds=cpu
        )
        seconds, latencies, _, cpu = await _ingest(client, len(sessions), users, server)
        again = Measurement(
            "engine re-ingest, unchanged",
            events,
            seconds,
            tuple(latencies),
            server_cpu_seconds=cpu,
        )
        searches: dict[str, Measurement] = {}
        counts: dict[str, list[int]] = {}
        for kind, batch in queries.items():
            searches[kind], counts[kind] = await _search_engine(client, batch, users, server)
    return Layout(ingest, again, searches, counts)


async def _adk(
    workdir: Path, sessions: list[list[Turn]], users: int, queries: dict[str, list[str]]
) -> Layout:
    from google.adk.events.event import Event
    from google.adk.memory import SqliteMemoryService
    from google.adk.sessions.session import Session
    from google.genai import types

    adk_sessions = [
        Session(
            id=f"s{index}",
            app_name=APP,
            user_id=user_of(index, users),
            events=[
                Event(
                    id=turn.event_id,
                    author=turn.author,
                    invocation_id=turn.invocation_id,
                    timestamp=turn.timestamp,
                    content=types.Content(
                        role="user" if turn.author == "user" else "model",
                        parts=[types.Part(text=turn.text)],
                    ),
                )
                for turn in turns
            ],
        )
        for index, turns in enumerate(sessions)
    ]
    events = sum(len(turns) for turns in sessions)
    service = SqliteMemoryService(str(workdir / "adk-memory.db"), max_results=LIMIT)
    latencies = []
    cpu = time.process_time()
    start = time.perf_counter()
    for session in adk_sessions:
        began = time.perf_counter()
        await service.add_session_to_memory(session)
        latencies.append((time.perf_counter() - began) * 1000)
    ingest = Measurement(
        "ADK ingest",
        events,
        time.perf_counter() - start,
        tuple(latencies),
        client_cpu_seconds=time.process_time() - cpu,
    )
    searches: dict[str, Measurement] = {}
    counts: dict[str, list[int]] = {}
    for kind, batch in queries.items():
        latencies = []
        counts[kind] = []
        cpu = time.process_time()
        start = time.perf_counter()
        for n, query in enumerate(batch):
            began = time.perf_counter()
            response = await service.search_memory(
                app_name=APP, user_id=user_of(n, users), query=query
            )
            latencies.append((time.perf_counter() - began) * 1000)
            counts[kind].append(len(response.memories))
        searches[kind] = Measurement(
            "",
            len(batch),
            time.perf_counter() - start,
            tuple(latencies),
            client_cpu_seconds=time.process_time() - cpu,
        )
    await service.close()
    return Layout(ingest, ingest, searches, counts)


def _named(m: Measurement, name: str, baseline: Measurement | None = None) -> Measurement:
    return replace(
        m,
        name=name,
        baseline_events_per_second=None if baseline is None else baseline.events_per_second,
    )


async def run(options: Options) -> Report:
    sizes = QUICK if options.quick else FULL
    corpus = Corpus()
    sessions = [
        corpus.session(index, sizes.events_per_session, 1_700_000_000.0 + index * 1_000)
        for index in range(sizes.sessions)
    ]
    queries = {kind: corpus.queries(kind, sizes.queries_per_kind) for kind in QUERY_KINDS}
    events = sum(len(turns) for turns in sessions)
    report = Report(
        "memory",
        {
            "sessions": sizes.sessions,
            "events_per_session": sizes.events_per_session,
            "events": events,
            "layouts_users": list(LAYOUTS),
            "queries_per_kind": sizes.queries_per_kind,
            "limit": LIMIT,
            "ingest_concurrency": CONCURRENCY,
            "quick": options.quick,
        },
    )
    for users in LAYOUTS:
        label = f"{users} user{'s' if users > 1 else ''}"
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
            ours = await _engine(Path(tmp), sessions, users, queries)
            theirs = await _adk(Path(tmp), sessions, users, queries)
        for kind in ("rare word", "2-3 words", "question"):
            for query, found, adk_found in zip(
                queries[kind], ours.counts[kind], theirs.counts[kind], strict=True
            ):
                if (found > 0) != (adk_found > 0):
                    raise DataCheckError(f"{query!r}: engine found {found}, ADK {adk_found}")
        report.measurements.append(_named(ours.ingest, f"{label}: engine ingest", theirs.ingest))
        report.measurements.append(_named(ours.again, f"{label}: engine re-ingest, unchanged"))
        report.measurements.append(_named(theirs.ingest, f"{label}: ADK ingest"))
        for kind in QUERY_KINDS:
            report.measurements.append(
                _named(
                    ours.searches[kind], f"{label}: engine search, {kind}", theirs.searches[kind]
                )
            )
            report.measurements.append(
                _named(theirs.searches[kind], f"{label}: ADK search, {kind}")
            )
        with_results = {kind: sum(1 for c in ours.counts[kind] if c) for kind in QUERY_KINDS}
        adk_with_results = {kind: sum(1 for c in theirs.counts[kind] if c) for kind in QUERY_KINDS}
        report.notes.append(
            f"{label}: queries with results, engine {with_results}, ADK {adk_with_results}"
        )
    report.checks.append(f"all {events} events remembered, in both layouts")
    report.checks.append("every search result contains a term of its query")
    report.checks.append("engine and ADK agree on which ASCII queries find something")
    report.notes.append(
        "search rows: 'events' are queries and events/s is queries/s; latency is per query "
        "(engine: over gRPC to a separate process; ADK: in-process, its own connection per call)"
    )
    report.notes.append("ADK's SQLite service does not find CJK words inside unspaced text")
    return report
