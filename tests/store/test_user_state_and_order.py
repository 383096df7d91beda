"""The store's user state read and its listing in google-adk's order, on every backend."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from contextengine.store import EventStore, SessionKey
from contextengine.store.sqlite._migrations import load_migrations, migrate

from .conftest import FakeClock
from .contract.helpers import APP, create, ev

pytestmark = pytest.mark.unit

Row = tuple[float, str, str]


# --- get_user_state ------------------------------------------------------------------------------


async def test_user_state_has_the_keys_without_their_prefix(store: EventStore) -> None:
    assert await store.get_user_state(APP, "u1") == {}  # an unknown user: empty, not an error
    await create(store, SessionKey(APP, "u1", "s1"), {"user:lang": "fr", "app:theme": "x", "k": 1})
    await store.append_events(
        SessionKey(APP, "u1", "s1"),
        [ev("e1", delta={"user:n": 2, "user:lang": None, "m": 3, "app:a": 4})],
        None,
    )
    assert await store.get_user_state(APP, "u1") == {"lang": None, "n": 2}
    # Scoped by app and user.
    assert await store.get_user_state(APP, "u2") == {}
    assert await store.get_user_state("other-app", "u1") == {}


async def test_user_state_outlives_the_sessions_and_is_a_copy(store: EventStore) -> None:
    key = SessionKey(APP, "u1", "s1")
    await create(store, key, {"user:deep": {"list": [1, 2]}})
    got = await store.get_user_state(APP, "u1")
    got["deep"]["list"].append(3)
    got["extra"] = True
    assert await store.get_user_state(APP, "u1") == {"deep": {"list": [1, 2]}}
    assert await store.delete_session(key)
    assert await store.get_user_state(APP, "u1") == {"deep": {"list": [1, 2]}}


# --- list_sessions_by_update ---------------------------------------------------------------------


def _order(store_rows: list[Row], user_id: str | None) -> list[Row]:
    return sorted(row for row in store_rows if user_id is None or row[1] == user_id)


async def _listed(
    store: EventStore, user_id: str | None, page: int, after: Row | None = None
) -> list[Row]:
    """Every session after ``after`` in pages of ``page``, following the cursor."""
    out: list[Row] = []
    while True:
        rows = await store.list_sessions_by_update(APP, user_id, page, after)
        out.extend((s.last_update_time, s.key.user_id, s.key.session_id) for s in rows)
        if len(rows) < page:
            return out
        after = out[-1]


async def test_ordered_by_last_update_then_user_then_session(
    store: EventStore, clock: FakeClock
) -> None:
    rng = random.Random(17)
    expected: list[Row] = []
    for i in range(40):
        user, session = rng.choice(["a", "b", "c", "é", "z"]), f"s{rng.randrange(1000):03d}-{i}"
        created = rng.choice([5.0, 7.5, 9.0])  # ties on purpose
        await create(store, SessionKey(APP, user, session), now=created)
        when = created
        if rng.random() < 0.6:
            # The last event's timestamp is the update time, even when it is older.
            when = rng.choice([1.0, 5.0, 7.5, 11.25])
            await store.append_events(
                SessionKey(APP, user, session), [ev(f"e{i}", timestamp=when)], None
            )
        expected.append((when, user, session))
    await create(store, SessionKey("other-app", "a", "x"), now=0.5)
    for user_id in (None, "a", "é", "nobody"):
        wanted = _order(expected, user_id)
        for page in (1, 3, 7, 100):
            assert await _listed(store, user_id, page) == wanted, (user_id, page)
    # Strictly after a cursor, including one that names no session.
    everyone = _order(expected, None)
    assert await _listed(store, None, 5, everyone[9]) == everyone[10:]
    assert await _listed(store, None, 5, (7.5, "b", "")) == [
        r for r in everyone if r > (7.5, "b", "")
    ]
    assert await store.list_sessions_by_update(APP, None, 0, None) == []


async def test_a_listed_session_carries_its_merged_state(store: EventStore) -> None:
    await create(store, SessionKey(APP, "u1", "s1"), {"k": 1, "user:u": 2, "app:a": 3}, now=2.0)
    await create(store, SessionKey(APP, "u2", "s2"), {"j": 1}, now=1.0)
    listed = await store.list_sessions_by_update(APP, None, 10, None)
    assert [s.key.session_id for s in listed] == ["s2", "s1"]
    assert listed[0].state == {"j": 1, "app:a": 3}
    assert listed[1].state == {"k": 1, "user:u": 2, "app:a": 3}
    assert all(s.events == [] for s in listed)


def test_sqlite_reads_the_order_from_an_index(tmp_path: Path) -> None:
    """The two queries are index ranges in order: no temporary sort, no full scan."""
    from contextengine.store.sqlite import _reads as reads

    db = sqlite3.connect(tmp_path / "plan.db")
    try:
        migrate(db, migrations=load_migrations())
        plans: list[str] = []
        original = db.execute

        class Recorder:
            """Records the plan of each SELECT the read function runs."""

            def execute(self, sql: str, params: object = ()) -> sqlite3.Cursor:
                if sql.startswith("SELECT") and "FROM sessions" in sql:
                    found = original("EXPLAIN QUERY PLAN " + sql, params).fetchall()  # type: ignore[arg-type]
                    plans.append(" | ".join(str(row[3]) for row in found))
                return original(sql, params)  # type: ignore[arg-type]

            @property
            def in_transaction(self) -> bool:
                return db.in_transaction

        recorder = Recorder()
        for user_id in ("u1", None):
            for after in (None, (1.0, "u1", "s")):
                reads.list_sessions_by_update(
                    recorder,  # type: ignore[arg-type]
                    app_name=APP,
                    user_id=user_id,
                    limit=10,
                    after=after,
                )
    finally:
        db.close()
    assert len(plans) == 4
    for plan in plans:
        assert "TEMP B-TREE" not in plan, plan
        assert "USING INDEX sessions_by_" in plan or "USING COVERING INDEX sessions_by_" in plan, (
            plan
        )
