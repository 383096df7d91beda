"""``MemoryService`` over every store: what is remembered, re-ingestion, rewinds, chosen events,
background ingestion, preload, and memory that survives a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from contextengine.core.errors import ContextEngineError
from contextengine.memory import SqliteMemoryIndex
from contextengine.memory.preload import DEFAULT_PRELOAD_TEMPLATE
from contextengine.memory.service import MemoryService
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.store import SessionKey, SqliteStore
from contextengine.v1 import config_pb2, content_pb2, event_pb2
from tests.memory.conftest import Memory, close_memory, open_memory
from tests.memory.helpers import event

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "alice", "s1")


async def append(memory: Memory, key: SessionKey, *events: event_pb2.Event) -> None:
    await memory.store.append_events(key, list(events), None)


def call_event(n: int, invocation: str = "inv-1") -> event_pb2.Event:
    """An agent's function call: no text, never remembered."""
    return event_pb2.Event(
        id=f"call{n}",
        author="agent",
        invocation_id=invocation,
        timestamp=2_000.0 + n,
        content=content_pb2.Content(
            role="model",
            parts=[content_pb2.Part(function_call=content_pb2.FunctionCall(name="lookup"))],
        ),
    )


def rewind(before: str, n: int) -> event_pb2.Event:
    out = event_pb2.Event(id=f"rw{n}", author="user", invocation_id=f"rw-{n}", timestamp=3_000.0)
    out.actions.rewind_before_invocation_id = before
    return out


async def texts(memory: Memory, query: str, key: SessionKey = KEY) -> list[str]:
    result = await memory.service.search(key.app_name, key.user_id, query, 100)
    return [hit.entry.content.parts[-1].text for hit in result.hits]


async def test_add_session_remembers_live_text_events(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(
        memory,
        KEY,
        event("We talked about the Amazon rainforest", event_id="a", timestamp=10.0),
        call_event(1),
        event(thought="secret reasoning about llamas", event_id="t", timestamp=11.0),
        event("Llamas live in the Andes", author="agent", event_id="b", timestamp=12.0),
    )
    outcome = await memory.service.add_session(KEY)
    assert (outcome.entry_count, outcome.added, outcome.removed) == (2, 2, 0)
    assert outcome.last_sequence == 4
    assert await memory.index.remembered(KEY) == {1: "a", 4: "b"}
    assert await texts(memory, "rainforest") == ["We talked about the Amazon rainforest"]
    # A thought is never searchable, alone or next to text.
    assert await texts(memory, "reasoning") == []
    assert await texts(memory, "llamas") == ["Llamas live in the Andes"]
    hit = (await memory.service.search("app", "alice", "andes")).hits[0]
    assert (hit.session_id, hit.entry.sequence, hit.entry.event_id) == ("s1", 4, "b")
    assert (hit.entry.author, hit.entry.timestamp, hit.entry.invocation_id) == (
        "agent",
        12.0,
        "inv-1",
    )


async def test_re_adding_is_idempotent_and_adds_only_what_is_new(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(memory, KEY, event("first visit to Lisbon", event_id="a"))
    assert (await memory.service.add_session(KEY)).added == 1
    again = await memory.service.add_session(KEY)
    assert (again.entry_count, again.added, again.removed) == (1, 0, 0)
    await append(memory, KEY, event("second visit to Porto", event_id="b", timestamp=2_000.0))
    grown = await memory.service.add_session(KEY)
    assert (grown.entry_count, grown.added, grown.removed, grown.last_sequence) == (2, 1, 0, 2)
    assert await texts(memory, "visit") == ["second visit to Porto", "first visit to Lisbon"]


async def test_rewound_events_are_not_remembered(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(
        memory,
        KEY,
        event("book the blue hotel", event_id="a", invocation_id="inv-1", timestamp=1.0),
        event("actually the red hotel", event_id="b", invocation_id="inv-2", timestamp=2.0),
    )
    assert (await memory.service.add_session(KEY)).entry_count == 2
    await append(memory, KEY, rewind("inv-2", 1))
    outcome = await memory.service.add_session(KEY)
    assert (outcome.entry_count, outcome.removed) == (1, 1)
    assert await texts(memory, "hotel") == ["book the blue hotel"]
    # A session rewound before it was ever added never remembers the rewound turn.
    other = SessionKey("app", "alice", "s2")
    await memory.store.create_session(other, {}, 1.0)
    await append(
        memory,
        other,
        event("green tea", event_id="c", invocation_id="inv-1"),
        event("black coffee", event_id="d", invocation_id="inv-2"),
        rewind("inv-2", 2),
        event("oolong tea", event_id="e", invocation_id="inv-3"),
    )
    assert (await memory.service.add_session(other)).entry_count == 2
    assert await texts(memory, "coffee", other) == []


async def test_add_events_by_sequence(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(
        memory,
        KEY,
        event("keep this fact: the door code is 4711", event_id="a", invocation_id="inv-1"),
        call_event(2),
        event("a rewound remark", event_id="c", invocation_id="inv-2"),
        rewind("inv-2", 1),
        event("small talk", event_id="d", invocation_id="inv-3"),
    )
    outcome = await memory.service.add_events(KEY, [3, 1, 2, 1])
    assert (outcome.remembered, outcome.skipped) == ([1], [2, 3])
    assert await memory.index.remembered(KEY) == {1: "a"}
    assert (await memory.service.add_events(KEY, [1, 5])).remembered == [1, 5]
    assert await memory.index.remembered(KEY) == {1: "a", 5: "d"}
    with pytest.raises(ContextEngineError) as err:
        await memory.service.add_events(KEY, [2, 6])
    assert (err.value.reason, err.value.metadata) == ("EVENT_NOT_FOUND", {"sequence": "6"})
    # The whole session later: the chosen entries stay, the other live text events join.
    assert (await memory.service.add_session(KEY)).entry_count == 2


async def test_unknown_session_is_not_found(memory: Memory) -> None:
    for call in (
        memory.service.add_session(KEY),
        memory.service.add_events(KEY, [1]),
    ):
        with pytest.raises(ContextEngineError) as err:
            await call
        assert err.value.reason == "SESSION_NOT_FOUND"


async def test_memory_outlives_its_session(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(memory, KEY, event("the wifi password is hunter2", event_id="a"))
    await memory.service.add_session(KEY)
    await memory.store.delete_session(KEY)
    assert await texts(memory, "wifi") == ["the wifi password is hunter2"]
    assert await memory.service.delete("app", "alice", "s1") == 1
    assert await texts(memory, "wifi") == []


async def test_a_recreated_session_replaces_its_old_entries(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(memory, KEY, event("old content", event_id="x1"), event("old too", event_id="x2"))
    await memory.service.add_session(KEY)
    await memory.store.delete_session(KEY)
    await memory.store.create_session(KEY, {}, 2.0)
    await append(memory, KEY, event("new content", event_id="y1"))
    outcome = await memory.service.add_session(KEY)
    assert (outcome.entry_count, outcome.added, outcome.removed) == (1, 1, 1)
    assert await texts(memory, "content") == ["new content"]


async def test_search_limit_defaults_to_the_app_config(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(memory, KEY, *[event(f"note {n}", event_id=f"n{n}") for n in range(15)])
    await memory.service.add_session(KEY)
    assert len((await memory.service.search("app", "alice", "note")).hits) == 10
    config = config_pb2.AppConfig(app_name="app")
    config.memory.max_results = 3
    await memory.configs.put(config)
    assert len((await memory.service.search("app", "alice", "note")).hits) == 3
    assert len((await memory.service.search("app", "alice", "note", 12)).hits) == 12


async def test_background_ingestion_on_invocation_end(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(memory, KEY, event("remember the milk", event_id="a"))
    assert await memory.service.on_invocation_end(KEY) is False  # not configured
    await memory.service.wait_idle()
    assert await memory.index.remembered(KEY) == {}
    config = config_pb2.AppConfig(app_name="app")
    config.memory.ingest_on_end_invocation = True
    await memory.configs.put(config)
    assert await memory.service.on_invocation_end(KEY) is True
    await append(memory, KEY, event("and the eggs", event_id="b"))
    assert await memory.service.on_invocation_end(KEY) is True  # joins the running one
    await memory.service.wait_idle()
    assert await memory.index.remembered(KEY) == {1: "a", 2: "b"}
    assert 1 <= memory.service.background_runs <= 2
    assert memory.service.background_failures == 0
    # An unknown session is logged, not raised.
    assert await memory.service.on_invocation_end(SessionKey("app", "alice", "gone")) is True
    await memory.service.wait_idle()
    assert memory.service.background_failures == 1


async def test_concurrent_ingestions_of_one_session_converge(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    for n in range(20):
        await append(
            memory, KEY, event(f"fact number {n}", event_id=f"f{n}", invocation_id=f"i{n}")
        )
    await append(memory, KEY, rewind("i15", 1))
    await asyncio.gather(*(memory.service.add_session(KEY) for _ in range(5)))
    assert sorted(await memory.index.remembered(KEY)) == list(range(1, 16))


async def test_preload(memory: Memory) -> None:
    await memory.store.create_session(KEY, {}, 1.0)
    await append(
        memory,
        KEY,
        event("My sister lives in Oslo", event_id="a", timestamp=1_700_000_000.0),
        event(
            "Oslo is lovely in June", author="travel_agent", event_id="b", timestamp=1_700_000_060.0
        ),
    )
    await memory.service.add_session(KEY)
    preload = await memory.service.preload(SessionKey("app", "alice", "s9"), "Flights to Oslo?")
    assert preload.query == "Flights to Oslo?"
    assert [hit.entry.event_id for hit in preload.hits] == ["b", "a"]
    lines = (
        "Time: 2023-11-14T22:14:20+00:00\n"
        "travel_agent: Oslo is lovely in June\n"
        "Time: 2023-11-14T22:13:20+00:00\n"
        "user: My sister lives in Oslo"
    )
    assert preload.text == DEFAULT_PRELOAD_TEMPLATE.format(memories=lines)
    nothing = await memory.service.preload(KEY, "unrelated words")
    assert (nothing.hits, nothing.text) == ([], "")
    blank = await memory.service.preload(KEY, "   ")
    assert (blank.query, blank.hits, blank.text) == ("   ", [], "")
    config = config_pb2.AppConfig(app_name="app")
    config.memory.preload_template = "Remembered:\n{memories}\n--"
    config.memory.max_results = 1
    await memory.configs.put(config)
    short = await memory.service.preload(KEY, "oslo")
    assert (
        short.text
        == "Remembered:\nTime: 2023-11-14T22:14:20+00:00\ntravel_agent: Oslo is lovely in June\n--"
    )


async def test_preload_swallows_search_failures(memory: Memory) -> None:
    async def broken(*args: object) -> list[object]:
        raise RuntimeError("disk on fire")

    memory.service.index.search = broken  # type: ignore[method-assign,assignment]
    preload = await memory.service.preload(KEY, "anything")
    assert (preload.query, preload.hits, preload.text) == ("anything", [], "")


async def test_preload_swallows_config_failures(memory: Memory) -> None:
    async def broken(app_name: str) -> None:
        raise RuntimeError("store unavailable")

    memory.configs.get = broken  # type: ignore[method-assign]
    preload = await memory.service.preload(KEY, "anything")
    assert (preload.query, preload.hits, preload.text) == ("anything", [], "")


async def test_add_session_reports_the_log_it_ingested(memory: Memory) -> None:
    """An event appended (and read into the shared log cache) while an ingestion runs is
    either ingested and counted in ``last_sequence``, or neither."""
    await memory.store.create_session(KEY, {}, 1.0)
    await append(memory, KEY, event("first note", event_id="a"))
    remembered = memory.index.remembered

    async def racing(key: SessionKey) -> dict[int, str]:
        known = await remembered(key)
        if key == KEY and not (await memory.store.list_events(KEY, 1, 10))[0]:
            await append(memory, KEY, event("second note", event_id="b", sequence=2))
            await memory.service._events.log(KEY)  # another call, e.g. BuildContext
        return known

    memory.index.remembered = racing  # type: ignore[method-assign]
    outcome = await memory.service.add_session(KEY)
    assert outcome.entry_count == outcome.last_sequence
    assert sorted(await remembered(KEY)) == list(range(1, outcome.last_sequence + 1))


async def test_memory_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "restart.db"
    first = await open_memory("sqlite-fts5", db)
    try:
        await first.store.create_session(KEY, {}, 1.0)
        await append(first, KEY, event("the spare key is under the blue pot", event_id="a"))
        await first.service.add_session(KEY)
    finally:
        await close_memory(first)
    second = await open_memory("sqlite-fts5", db)
    try:
        assert await texts(second, "key") == ["the spare key is under the blue pot"]
        assert (await second.service.add_session(KEY)).added == 0
    finally:
        await close_memory(second)


async def test_fts_index_is_rebuilt_after_writes_without_it(tmp_path: Path) -> None:
    """Entries written while FTS5 was off (or missing) are found once it is back."""
    db = tmp_path / "switch.db"
    first = await open_memory("sqlite-fts5", db)
    try:
        await first.store.create_session(KEY, {}, 1.0)
        await append(
            first,
            KEY,
            event("apple pie", event_id="a", invocation_id="i1", timestamp=1.0),
            event("berry tart", event_id="b", invocation_id="i2", timestamp=2.0),
        )
        await first.service.add_session(KEY)
    finally:
        await close_memory(first)
    second = await open_memory("sqlite-no-fts", db)
    try:
        assert second.index.ranking == "matched_terms"
        await append(
            second,
            KEY,
            rewind("i2", 1),
            event("banana bread", event_id="c", invocation_id="i3", timestamp=4.0),
        )
        outcome = await second.service.add_session(KEY)
        assert (outcome.added, outcome.removed) == (1, 1)
        assert await texts(second, "apple banana berry") == ["banana bread", "apple pie"]
    finally:
        await close_memory(second)
    third = await open_memory("sqlite-fts5", db)
    try:
        assert third.index.ranking == "bm25"
        assert await texts(third, "apple banana berry") == ["banana bread", "apple pie"]
        assert await texts(third, "berry") == []
    finally:
        await close_memory(third)


async def test_fts_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteStore(tmp_path / "modes.db")
    await store.open()
    try:
        with pytest.raises(ValueError, match="fts must be"):
            SqliteMemoryIndex(store, fts="maybe")  # type: ignore[arg-type]
        # A SQLite build without FTS5: "auto" falls back, "on" refuses to start.
        monkeypatch.setattr("contextengine.memory.sqlite_index.fts5_available", lambda: False)
        auto = SqliteMemoryIndex(store, fts="auto")
        await auto.open()
        assert auto.ranking == "matched_terms"
        await auto.close()
        with pytest.raises(RuntimeError, match="FTS5"):
            await SqliteMemoryIndex(store, fts="on").open()
        service = MemoryService(auto, SessionEventCache(store), AppConfigs(store))
        await service.open()
        await store.create_session(KEY, {}, 1.0)
        await store.append_events(KEY, [event("plain text search", event_id="a")], None)
        await service.add_session(KEY)
        assert [
            h.entry.event_id for h in (await service.search("app", "alice", "search")).hits
        ] == ["a"]
        await service.close()
    finally:
        await store.close()
