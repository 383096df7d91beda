"""Which recorded state changes concern a watched session's merged state. Pure.

The merged state of a session is its own keys plus its user's ``user:`` keys and its app's
``app:`` keys. So an event of the session itself changes every key of its delta; an event of
another session of the same app changes the watched state's ``app:`` keys, and, when that session
belongs to the same user, its ``user:`` keys. ``temp:`` keys are never stored.
"""

from __future__ import annotations

from collections.abc import Iterable

from contextengine.core.state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX
from contextengine.store import Change, LoggedEvent, SessionCreated, SessionDeleted, SessionKey


def visible_keys(watched: SessionKey, source: SessionKey, keys: Iterable[str]) -> list[str]:
    """The keys of a delta recorded in ``source`` that change ``watched``'s merged state."""
    if source.app_name != watched.app_name:
        return []
    same_session = source == watched
    same_user = source.user_id == watched.user_id
    out: list[str] = []
    for key in keys:
        if key.startswith(TEMP_PREFIX):
            continue
        if key.startswith(APP_PREFIX):
            out.append(key)
        elif key.startswith(USER_PREFIX):
            if same_user:
                out.append(key)
        elif same_session:
            out.append(key)
    return out


def changed_keys(watched: SessionKey, change: Change) -> list[str]:
    """The merged-state keys of ``watched`` that ``change`` sets."""
    if isinstance(change, LoggedEvent):
        event = change.event
        if not event.HasField("actions"):
            return []
        return visible_keys(watched, change.key, event.actions.state_delta.fields.keys())
    if isinstance(change, SessionCreated):
        if change.key == watched:
            return []  # its initial state is in the snapshot of the watched session
        return visible_keys(watched, change.key, change.shared_state.keys())
    return []


def concerns(watched: SessionKey, change: Change) -> bool:
    """True when a state watch of ``watched`` must look at ``change``: it changes the merged
    state, or it deletes the watched session."""
    if isinstance(change, SessionDeleted):
        return change.key == watched
    return bool(changed_keys(watched, change))
