"""The ``EventLog`` contract: sequences, idempotency, optimistic concurrency, state, sessions,
reads, copies, and the store's life cycle; on every backend."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextengine.store import EventFilter, EventStore, SessionKey
from tests.store.conftest import FakeClock

from .helpers import APP, KEY, all_events, create, ev, ids, raises, seqs

pytestmark = pytest.mark.unit

# --- sequences and concurrency -------------------------------------------------------------------


async def test_sequences_are_contiguous_in_append_order(store: EventStore) -> None:
    await create(store)
    first = await store.append_events(KEY, [ev("a")], None)
    second = await store.append_events(KEY, [ev("b"), ev("c"), ev("d")], None)
    third = await store.append_events(KEY, [ev("e")], None)

    assert seqs(first.events) == [1]
    assert seqs(second.events) == [2, 3, 4]
    assert second.duplicates == [False, False, False]
    assert (first.last_sequence, second.last_sequence, third.last_sequence) == (1, 4, 5)
    stored = await all_events(store)
    assert ids(stored) == ["a", "b", "c", "d", "e"]
    assert seqs(stored) == [1, 2, 3, 4, 5]
    assert (await store.get_session(KEY, EventFilter())).last_sequence == 5


async def test_concurrent_single_appends_lose_nothing(store: EventStore) -> None:
    await create(store)

    async def appender(task: int) -> list[int]:
        sequences = []
        for i in range(25):
            outcome = await store.append_events(KEY, [ev(f"t{task}-{i}")], None)
            sequences.append(outcome.events[0].sequence)
        return sequences

    per_task = await asyncio.gather(*(appender(task) for task in range(20)))

    stored = await all_events(store)
    assert seqs(stored) == list(range(1, 501))
    assert sorted(ids(stored)) == sorted(f"t{t}-{i}" for t in range(20) for i in range(25))
    by_sequence = {event.sequence: event.id for event in stored}
    for task, sequences in enumerate(per_task):
        assert sequences == sorted(sequences)  # each task's appends keep their order
        assert [by_sequence[s] for s in sequences] == [f"t{task}-{i}" for i in range(25)]


async def test_concurrent_batches_get_consecutive_sequences(store: EventStore) -> None:
    await create(store)

    async def appender(task: int) -> list[list[int]]:
        batches = []
        for i in range(5):
            batch = [ev(f"t{task}-{i}-{j}") for j in range(3)]
            batches.append(seqs((await store.append_events(KEY, batch, None)).events))
        return batches

    results = await asyncio.gather(*(appender(task) for task in range(10)))

    for batches in results:
        for sequences in batches:
            assert sequences == list(range(sequences[0], sequences[0] + 3))
    assert seqs(await all_events(store)) == list(range(1, 151))


async def test_concurrent_appends_to_different_sessions(store: EventStore) -> None:
    keys = [SessionKey(APP, f"u{n % 3}", f"s{n}") for n in range(6)]
    for key in keys:
        await create(store, key)

    async def appender(key: SessionKey) -> None:
        for i in range(10):
            await store.append_events(key, [ev(f"e{i}", delta={"n": i})], None)

    await asyncio.gather(*(appender(key) for key in keys))

    for key in keys:
        session = await store.get_session(key, EventFilter())
        assert seqs(session.events) == list(range(1, 11))
        assert session.state == {"n": 9}


# --- idempotency ------------------------------------------------------------------------------


async def test_reappending_the_same_event_is_a_duplicate(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev("a", text="hi", delta={"k": 1})], None)
    await store.append_events(KEY, [ev("b")], None)

    again = await store.append_events(KEY, [ev("a", text="hi", delta={"k": 1})], None)

    assert again.duplicates == [True]
    assert seqs(again.events) == [1]
    assert again.events[0].content.parts[0].text == "hi"
    assert again.last_sequence == 2
    assert ids(await all_events(store)) == ["a", "b"]


async def test_same_id_with_a_different_payload_conflicts(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev("a", text="hi")], None)

    error = await raises(
        "EVENT_ID_CONFLICT",
        store.append_events(KEY, [ev("a", text="changed", delta={"k": 1})], None),
    )

    assert error.metadata == {"event_id": "a", "sequence": "1"}
    session = await store.get_session(KEY, EventFilter())
    assert session.last_sequence == 1
    assert session.state == {}
    assert session.events[0].content.parts[0].text == "hi"


async def test_stamped_timestamps_are_distinct_within_a_batch(
    store: EventStore, clock: FakeClock
) -> None:
    # Compaction ranges are timestamp ranges: a batch stamped with one time could not be split.
    await create(store)
    clock.now = 500.0
    batch = [ev(name, timestamp=0.0) for name in "abcd"] + [ev("e", timestamp=42.0)]
    outcome = await store.append_events(KEY, batch, None)
    stamps = [event.timestamp for event in outcome.events]
    assert stamps[0] == 500.0
    assert stamps[:4] == sorted(set(stamps[:4]))
    assert stamps[3] - stamps[0] < 1e-9
    assert stamps[4] == 42.0
    assert [e.timestamp for e in await all_events(store)] == stamps


async def test_zero_timestamp_takes_the_clock_and_replays_match(
    store: EventStore, clock: FakeClock
) -> None:
    await create(store)
    clock.now = 1234.5
    first = await store.append_events(KEY, [ev("a", text="x", timestamp=0.0)], None)
    assert first.events[0].timestamp == 1234.5

    clock.now = 2000.0
    replay = await store.append_events(KEY, [ev("a", text="x", timestamp=0.0)], None)
    assert replay.duplicates == [True]
    assert replay.events[0].timestamp == 1234.5
    explicit = await store.append_events(KEY, [ev("a", text="x", timestamp=1234.5)], None)
    assert explicit.duplicates == [True]

    await raises("EVENT_ID_CONFLICT", store.append_events(KEY, [ev("a", text="x")], None))
    assert (await store.get_session(KEY, EventFilter())).last_update_time == 1234.5


async def test_a_batch_with_one_conflict_records_nothing(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev("a", text="hi")], None)

    batch = [
        ev("b", delta={"app:x": 1, "user:y": 2, "z": 3}),
        ev("c"),
        ev("a", text="different"),
    ]
    await raises("EVENT_ID_CONFLICT", store.append_events(KEY, batch, None))

    session = await store.get_session(KEY, EventFilter())
    assert ids(session.events) == ["a"]
    assert session.last_sequence == 1
    assert session.state == {}
    # nothing leaked into a later append either
    later = await store.append_events(KEY, [ev("b")], None)
    assert seqs(later.events) == [2]


async def test_an_id_repeated_within_one_call(store: EventStore) -> None:
    await create(store)

    outcome = await store.append_events(KEY, [ev("a", text="x"), ev("a", text="x")], None)
    assert outcome.duplicates == [False, True]
    assert seqs(outcome.events) == [1, 1]
    assert outcome.last_sequence == 1

    await raises(
        "EVENT_ID_CONFLICT",
        store.append_events(KEY, [ev("b", text="x"), ev("b", text="y")], None),
    )
    assert ids(await all_events(store)) == ["a"]


async def test_duplicates_mixed_with_new_events(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev("a")], None)

    outcome = await store.append_events(KEY, [ev("b"), ev("a"), ev("c")], None)

    assert outcome.duplicates == [False, True, False]
    assert seqs(outcome.events) == [2, 1, 3]
    assert outcome.last_sequence == 3


async def test_an_empty_append_changes_nothing(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev("a")], None)
    outcome = await store.append_events(KEY, [], None)
    assert outcome.events == []
    assert outcome.last_sequence == 1


# --- optimistic concurrency -----------------------------------------------------------------------


async def test_expected_last_sequence_matches(store: EventStore) -> None:
    await create(store)
    assert (await store.append_events(KEY, [ev("a")], 0)).last_sequence == 1
    assert (await store.append_events(KEY, [ev("b"), ev("c")], 1)).last_sequence == 3


async def test_expected_last_sequence_mismatch(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev("a"), ev("b")], None)

    error = await raises(
        "SEQUENCE_MISMATCH", store.append_events(KEY, [ev("c", delta={"k": 1})], 1)
    )

    assert error.metadata["current_last_sequence"] == "2"
    assert error.metadata["expected_last_sequence"] == "1"
    session = await store.get_session(KEY, EventFilter())
    assert session.last_sequence == 2
    assert session.state == {}


async def test_a_large_batch_finds_every_recorded_id(store: EventStore) -> None:
    # a re-sent half of a large batch, interleaved, with new events after it
    await create(store)
    first = [ev(f"e{i}") for i in range(1200)]
    await store.append_events(KEY, first, 0)

    mixed = [ev(f"e{i}") for i in range(0, 1200, 2)] + [ev(f"n{i}") for i in range(3)]
    outcome = await store.append_events(KEY, mixed, 1200)

    assert outcome.duplicates == [True] * 600 + [False] * 3
    assert seqs(outcome.events) == [*range(1, 1201, 2), 1201, 1202, 1203]
    assert outcome.last_sequence == 1203


async def test_retrying_a_committed_call_succeeds_despite_a_stale_expected_sequence(
    store: EventStore,
) -> None:
    await create(store)
    await store.append_events(KEY, [ev("a"), ev("b")], 0)
    await store.append_events(KEY, [ev("c")], 2)

    retry = await store.append_events(KEY, [ev("a"), ev("b")], 0)

    assert retry.duplicates == [True, True]
    assert seqs(retry.events) == [1, 2]
    assert retry.last_sequence == 3
    # but a call that still has something new must match
    await raises("SEQUENCE_MISMATCH", store.append_events(KEY, [ev("a"), ev("d")], 0))


async def test_expected_sequence_is_checked_after_duplicates_resolve(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev("a", text="x")], None)
    # a conflict wins over a mismatch: the payload problem is the one to report
    await raises("EVENT_ID_CONFLICT", store.append_events(KEY, [ev("a", text="y")], 5))


# --- state ------------------------------------------------------------------------------------------


async def test_state_scopes(store: EventStore) -> None:
    mine = SessionKey(APP, "u1", "s1")
    my_other = SessionKey(APP, "u1", "s2")
    theirs = SessionKey(APP, "u2", "s1")
    other_app = SessionKey("other", "u1", "s1")
    for key in (mine, my_other, theirs, other_app):
        await create(store, key)

    await store.append_events(
        mine,
        [ev("a", delta={"app:shared": 1, "user:pref": "dark", "private": True, "temp:t": 9})],
        None,
    )

    assert (await store.get_session(mine, EventFilter())).state == {
        "private": True,
        "user:pref": "dark",
        "app:shared": 1,
    }
    assert (await store.get_session(my_other, EventFilter())).state == {
        "user:pref": "dark",
        "app:shared": 1,
    }
    assert (await store.get_session(theirs, EventFilter())).state == {"app:shared": 1}
    assert (await store.get_session(other_app, EventFilter())).state == {}


async def test_state_updates_use_dict_update_semantics(store: EventStore) -> None:
    await create(store, state={"keep": 1, "nested": {"a": 1, "b": 2}})
    await store.append_events(
        KEY,
        [
            ev("a", delta={"nested": {"a": 5}, "gone": "x", "app:v": 1}),
            ev("b", delta={"gone": None, "app:v": 2, "user:list": [1, "two", None]}),
        ],
        None,
    )

    state = (await store.get_session(KEY, EventFilter())).state
    assert state == {
        "keep": 1,
        "nested": {"a": 5},
        "gone": None,
        "user:list": [1, "two", None],
        "app:v": 2,
    }
    assert "gone" in state  # None is stored, never a deletion


async def test_temp_keys_are_never_stored(store: EventStore) -> None:
    created = await create(store, state={"temp:a": 1, "b": 2})
    assert created.state == {"b": 2}
    await store.append_events(KEY, [ev("e", delta={"temp:x": 1, "y": 2})], None)
    assert (await store.get_session(KEY, EventFilter())).state == {"b": 2, "y": 2}


async def test_create_session_with_scoped_initial_state(store: EventStore) -> None:
    await create(store, SessionKey(APP, "u1", "first"), state={"app:mode": "old"})

    created = await create(
        store,
        state={"app:mode": "new", "user:name": "Ada", "topic": "math", "temp:scratch": 1},
    )

    expected = {"topic": "math", "user:name": "Ada", "app:mode": "new"}
    assert created.state == expected
    assert created.key == KEY
    assert created.events == []
    assert created.last_sequence == 0
    assert (await store.get_session(KEY, EventFilter())).state == expected
    sibling = await store.get_session(SessionKey(APP, "u1", "first"), EventFilter())
    assert sibling.state == {"user:name": "Ada", "app:mode": "new"}


async def test_create_session_times(store: EventStore) -> None:
    created = await create(store, now=42.5)
    assert (created.create_time, created.last_update_time) == (42.5, 42.5)
    session = await store.get_session(KEY, EventFilter())
    assert (session.create_time, session.last_update_time) == (42.5, 42.5)


async def test_last_update_time_is_the_last_appended_timestamp(store: EventStore) -> None:
    await create(store, now=5.0)
    await store.append_events(KEY, [ev("a", timestamp=7.0), ev("b", timestamp=9.0)], None)
    await store.append_events(KEY, [ev("a", timestamp=7.0)], None)  # duplicate: no update

    session = await store.get_session(KEY, EventFilter())
    assert session.last_update_time == 9.0
    assert session.create_time == 5.0
    listed = await store.list_sessions(APP, None, 10, None)
    assert listed[0].last_update_time == 9.0


# --- sessions ------------------------------------------------------------------------------------


async def test_creating_an_existing_session_fails(store: EventStore) -> None:
    await create(store, state={"a": 1})
    error = await raises("SESSION_ALREADY_EXISTS", create(store, state={"a": 2, "app:b": 1}))
    assert error.metadata["session_id"] == KEY.session_id
    assert (await store.get_session(KEY, EventFilter())).state == {"a": 1}


async def test_unknown_sessions_are_not_found(store: EventStore) -> None:
    await create(store, SessionKey(APP, "u1", "other"))
    error = await raises("SESSION_NOT_FOUND", store.get_session(KEY, EventFilter()))
    assert error.metadata == {"app_name": APP, "user_id": "u1", "session_id": "s1"}
    await raises("SESSION_NOT_FOUND", store.append_events(KEY, [ev("a")], None))
    await raises("SESSION_NOT_FOUND", store.list_events(KEY, 0, 10))
    # the same session id under another user is another session
    await raises(
        "SESSION_NOT_FOUND", store.get_session(SessionKey(APP, "u2", "other"), EventFilter())
    )


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (EventFilter(), [1, 2, 3, 4, 5]),
        (EventFilter(after_sequence=2), [3, 4, 5]),
        (EventFilter(after_sequence=0), [1, 2, 3, 4, 5]),
        (EventFilter(after_sequence=5), []),
        (EventFilter(after_timestamp=30.0), [3, 4, 5]),
        (EventFilter(after_timestamp=30.5), [4, 5]),
        (EventFilter(num_recent_events=2), [4, 5]),
        (EventFilter(num_recent_events=0), []),
        (EventFilter(num_recent_events=50), [1, 2, 3, 4, 5]),
        (EventFilter(after_sequence=1, after_timestamp=20.0, num_recent_events=2), [4, 5]),
        (EventFilter(after_sequence=3, num_recent_events=5), [4, 5]),
        (EventFilter(after_timestamp=20.0, num_recent_events=10), [2, 3, 4, 5]),
        (EventFilter(after_sequence=1, after_timestamp=40.0), [4, 5]),
        (EventFilter(after_sequence=4, after_timestamp=10.0, num_recent_events=0), []),
    ],
)
async def test_get_session_filters(
    store: EventStore, flt: EventFilter, expected: list[int]
) -> None:
    await create(store)
    events = [ev(f"e{i}", timestamp=10.0 * i) for i in range(1, 6)]
    await store.append_events(KEY, events, None)

    session = await store.get_session(KEY, flt)

    assert seqs(session.events) == expected
    assert session.last_sequence == 5


async def test_filters_keep_sequence_order_with_unordered_timestamps(store: EventStore) -> None:
    await create(store)
    timestamps = [50.0, 10.0, 30.0, 20.0]
    await store.append_events(
        KEY, [ev(f"e{i}", timestamp=ts) for i, ts in enumerate(timestamps)], None
    )

    assert seqs((await store.get_session(KEY, EventFilter(after_timestamp=25.0))).events) == [1, 3]
    recent = await store.get_session(KEY, EventFilter(after_timestamp=15.0, num_recent_events=2))
    assert seqs(recent.events) == [3, 4]


async def test_list_sessions(store: EventStore) -> None:
    for user, session in [("u2", "s1"), ("u1", "s2"), ("u1", "s1"), ("u1", "s10")]:
        await create(store, SessionKey(APP, user, session), state={"who": f"{user}/{session}"})
    await create(store, SessionKey("other", "u1", "s0"))
    await store.append_events(
        SessionKey(APP, "u1", "s2"), [ev("a", delta={"app:x": 1, "user:y": 2})], None
    )

    listed = await store.list_sessions(APP, None, 10, None)

    order = [(s.key.user_id, s.key.session_id) for s in listed]
    assert order == [("u1", "s1"), ("u1", "s10"), ("u1", "s2"), ("u2", "s1")]
    assert all(s.events == [] for s in listed)
    assert all(s.key.app_name == APP for s in listed)
    assert listed[0].state == {"who": "u1/s1", "user:y": 2, "app:x": 1}
    assert listed[3].state == {"who": "u2/s1", "app:x": 1}
    assert [s.last_sequence for s in listed] == [0, 0, 1, 0]


async def test_list_app_names_and_user_ids(store: EventStore) -> None:
    assert await store.list_app_names(10, None) == []
    for app, user in [("b", "u2"), ("a", "u1"), ("b", "u1"), ("c", "u3"), ("b", "u2")]:
        await create(
            store, SessionKey(app, user, f"s-{len(await store.list_sessions(app, user, 9, None))}")
        )

    assert await store.list_app_names(10, None) == ["a", "b", "c"]
    assert await store.list_app_names(2, None) == ["a", "b"]
    assert await store.list_app_names(10, "a") == ["b", "c"]
    assert await store.list_app_names(10, "c") == []
    assert await store.list_app_names(0, None) == []
    assert await store.list_user_ids("b", 10, None) == ["u1", "u2"]
    assert await store.list_user_ids("b", 1, "u1") == ["u2"]
    assert await store.list_user_ids("nope", 10, None) == []
    await store.delete_session(SessionKey("a", "u1", "s-0"))
    assert await store.list_app_names(10, None) == ["b", "c"]


async def test_list_sessions_paging_and_user_filter(store: EventStore) -> None:
    keys = [SessionKey(APP, user, f"s{n}") for user in ("a", "b", "c") for n in range(3)]
    for key in keys:
        await create(store, key)

    pages: list[list[tuple[str, str]]] = []
    after: tuple[str, str] | None = None
    while True:
        page = await store.list_sessions(APP, None, 4, after)
        if not page:
            break
        pages.append([(s.key.user_id, s.key.session_id) for s in page])
        after = pages[-1][-1]
    assert [len(page) for page in pages] == [4, 4, 1]
    assert [item for page in pages for item in page] == [(k.user_id, k.session_id) for k in keys]

    mine = await store.list_sessions(APP, "b", 10, None)
    assert [s.key.session_id for s in mine] == ["s0", "s1", "s2"]
    after_first = await store.list_sessions(APP, "b", 10, ("b", "s0"))
    assert [s.key.session_id for s in after_first] == ["s1", "s2"]
    # `after` from another user only bounds the order
    assert [s.key.session_id for s in await store.list_sessions(APP, "b", 10, ("a", "s9"))] == [
        "s0",
        "s1",
        "s2",
    ]
    assert await store.list_sessions(APP, "nobody", 10, None) == []
    assert await store.list_sessions("no-such-app", None, 10, None) == []


async def test_delete_session(store: EventStore) -> None:
    await create(store, state={"s": 1, "user:u": 1, "app:a": 1})
    await store.append_events(KEY, [ev("a"), ev("b", delta={"s": 2, "app:a": 2})], None)

    assert await store.delete_session(KEY) is True

    await raises("SESSION_NOT_FOUND", store.get_session(KEY, EventFilter()))
    await raises("SESSION_NOT_FOUND", store.list_events(KEY, 0, 10))
    await raises("SESSION_NOT_FOUND", store.append_events(KEY, [ev("c")], None))
    assert await store.list_sessions(APP, None, 10, None) == []
    assert await store.delete_session(KEY) is False

    again = await create(store)
    assert again.state == {"user:u": 1, "app:a": 2}  # app and user state stay
    assert again.last_sequence == 0
    outcome = await store.append_events(KEY, [ev("a")], None)  # the old id is free again
    assert outcome.duplicates == [False]
    assert seqs(outcome.events) == [1]
    assert ids(await all_events(store)) == ["a"]


async def test_delete_missing_session(store: EventStore) -> None:
    assert await store.delete_session(KEY) is False


async def test_delete_leaves_other_sessions_alone(store: EventStore) -> None:
    other = SessionKey(APP, "u1", "s2")
    await create(store)
    await create(store, other)
    await store.append_events(other, [ev("a"), ev("b")], None)
    await store.delete_session(KEY)
    assert seqs(await all_events(store, other)) == [1, 2]


# --- list_events ----------------------------------------------------------------------------------


async def test_list_events_paging(store: EventStore) -> None:
    await create(store)
    await store.append_events(KEY, [ev(f"e{i}") for i in range(7)], None)

    pages = []
    after = 0
    while True:
        events, last = await store.list_events(KEY, after, 3)
        assert last == 7
        if not events:
            break
        pages.append(seqs(events))
        after = events[-1].sequence
    assert pages == [[1, 2, 3], [4, 5, 6], [7]]
    assert await store.list_events(KEY, 2, 0) == ([], 7)
    assert seqs((await store.list_events(KEY, 5, 100))[0]) == [6, 7]


async def test_list_events_of_an_empty_session(store: EventStore) -> None:
    await create(store)
    assert await store.list_events(KEY, 0, 10) == ([], 0)


# --- copies ---------------------------------------------------------------------------------------


async def test_returned_events_are_copies(store: EventStore) -> None:
    await create(store)
    sent = ev("a", text="original")
    outcome = await store.append_events(KEY, [sent], None)

    sent.content.parts[0].text = "mutated input"
    outcome.events[0].content.parts[0].text = "mutated outcome"
    outcome.events[0].sequence = 99
    (await all_events(store))[0].content.parts[0].text = "mutated get"
    (await store.list_events(KEY, 0, 10))[0][0].content.parts[0].text = "mutated list"
    duplicate = await store.append_events(KEY, [ev("a", text="original")], None)
    duplicate.events[0].content.parts[0].text = "mutated duplicate"

    stored = await all_events(store)
    assert stored[0].content.parts[0].text == "original"
    assert stored[0].sequence == 1
    assert sent.sequence == 0  # the store did not write into the caller's event


async def test_returned_state_is_a_copy(store: EventStore) -> None:
    initial: dict[str, Any] = {"nested": {"a": 1}, "user:list": [1]}
    created = await create(store, state=initial)
    initial["nested"]["a"] = 2
    created.state["nested"]["a"] = 3
    fetched = await store.get_session(KEY, EventFilter())
    fetched.state["nested"]["a"] = 4
    fetched.state["user:list"].append(2)
    (await store.list_sessions(APP, None, 10, None))[0].state["nested"]["a"] = 5

    assert (await store.get_session(KEY, EventFilter())).state == {
        "nested": {"a": 1},
        "user:list": [1],
    }


# --- lifecycle ------------------------------------------------------------------------------------


async def test_close_is_idempotent_and_final(store: EventStore) -> None:
    await create(store)
    await store.close()
    await store.close()
    await raises("SHUTTING_DOWN", store.get_session(KEY, EventFilter()))
    await raises("SHUTTING_DOWN", store.append_events(KEY, [ev("a")], None))
