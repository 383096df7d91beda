"""Which changes concern a watched session's merged state."""

from __future__ import annotations

import pytest

from contextengine.store import LoggedEvent, SessionCreated, SessionDeleted, SessionKey
from contextengine.subscriptions.state_watch import changed_keys, concerns, visible_keys

from .helpers import message

pytestmark = pytest.mark.unit

WATCHED = SessionKey("app", "alice", "s1")
SIBLING = SessionKey("app", "alice", "s2")  # same user
STRANGER = SessionKey("app", "bob", "s1")  # same app, other user
ELSEWHERE = SessionKey("other", "alice", "s1")  # other app

DELTA = ["own", "app:model", "user:name", "temp:scratch"]


def test_visible_keys_by_source() -> None:
    assert visible_keys(WATCHED, WATCHED, DELTA) == ["own", "app:model", "user:name"]
    assert visible_keys(WATCHED, SIBLING, DELTA) == ["app:model", "user:name"]
    assert visible_keys(WATCHED, STRANGER, DELTA) == ["app:model"]
    assert visible_keys(WATCHED, ELSEWHERE, DELTA) == []


def test_changed_keys_of_events() -> None:
    event = message("x", state_delta={"own": 1, "app:model": "m", "user:name": "A"})
    assert sorted(changed_keys(WATCHED, LoggedEvent(WATCHED, event, 1))) == [
        "app:model",
        "own",
        "user:name",
    ]
    assert changed_keys(WATCHED, LoggedEvent(STRANGER, event, 2)) == ["app:model"]
    assert changed_keys(WATCHED, LoggedEvent(WATCHED, message("no delta"), 3)) == []
    assert not concerns(WATCHED, LoggedEvent(STRANGER, message("x", state_delta={"own": 1}), 4))


def test_created_sessions_share_their_scoped_state() -> None:
    created = SessionCreated(SIBLING, {"app:model": "m", "user:name": "A"}, 5)
    assert sorted(changed_keys(WATCHED, created)) == ["app:model", "user:name"]
    assert changed_keys(WATCHED, SessionCreated(STRANGER, {"user:name": "B"}, 6)) == []
    assert changed_keys(WATCHED, SessionCreated(WATCHED, {"app:model": "m"}, 7)) == []
    assert not concerns(WATCHED, SessionCreated(SIBLING, {}, 0))


def test_only_the_watched_session_deletion_concerns_it() -> None:
    assert concerns(WATCHED, SessionDeleted(WATCHED))
    assert not concerns(WATCHED, SessionDeleted(SIBLING))
    assert changed_keys(WATCHED, SessionDeleted(WATCHED)) == []
