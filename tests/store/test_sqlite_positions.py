"""SQLite only: positions survive a restart and a failed batch leaves no notification behind."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from contextengine.store import Change, LoggedEvent, SessionKey, SqliteStore
from contextengine.v1 import event_pb2

pytestmark = pytest.mark.unit

KEY = SessionKey("app", "u1", "s1")


def ev(event_id: str) -> event_pb2.Event:
    return event_pb2.Event(id=event_id, author="user", invocation_id="inv", timestamp=1.0)


async def test_positions_continue_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    store = SqliteStore(path)
    await store.open()
    try:
        await store.create_session(KEY, {"app:x": 1}, 1.0)  # takes position 1
        await store.append_events(KEY, [ev("a"), ev("b")], None)
        before = await store.last_position()
    finally:
        await store.close()
    assert before == 3

    reopened = SqliteStore(path)
    await reopened.open()
    try:
        assert await reopened.last_position() == before
        await reopened.append_events(KEY, [ev("c")], None)
        logged = await reopened.list_events_after_position("app", None, 0, 10)
    finally:
        await reopened.close()
    assert [(e.event.id, e.position) for e in logged] == [("a", 2), ("b", 3), ("c", 4)]


async def test_batched_commits_notify_in_commit_order(tmp_path: Path) -> None:
    """Concurrent writes share transactions; the listener still sees one ordered stream and
    nothing of an operation that was rolled back inside a committed batch."""
    commits: list[list[Change]] = []

    def listener(changes: Sequence[Change]) -> None:
        commits.append(list(changes))

    store = SqliteStore(tmp_path / "b.db")
    await store.open()
    try:
        store.add_commit_listener(listener)
        await store.create_session(KEY, {}, 1.0)
        results = await asyncio.gather(
            *(store.append_events(KEY, [ev(f"e{i}")], None) for i in range(20)),
            store.append_events(KEY, [ev("late")], 0),  # fails: the log is not empty by then
            return_exceptions=True,
        )
        assert sum(isinstance(r, Exception) for r in results) == 1
    finally:
        await store.close()
    events = [c for commit in commits for c in commit if isinstance(c, LoggedEvent)]
    assert [e.event.sequence for e in events] == list(range(1, 21))
    assert [e.position for e in events] == list(range(1, 21))
    assert len(commits) < 21  # some commits carried several operations
