"""State scopes (ADK's ``app:``, ``user:``, ``temp:`` prefixes) as pure functions.

State values are plain JSON values (``dict``/``list``/``str``/``float``/``int``/``bool``/``None``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contextengine.core.errors import invalid

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class ScopedDelta:
    """A state delta split by scope, prefixes removed. ``temp:`` keys are already gone."""

    app: JsonObject = field(default_factory=dict)
    user: JsonObject = field(default_factory=dict)
    session: JsonObject = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.app or self.user or self.session)


def split_delta(delta: Mapping[str, Any]) -> ScopedDelta:
    """Splits a delta by scope; ``temp:`` keys are dropped; prefixes are removed."""
    app: JsonObject = {}
    user: JsonObject = {}
    session: JsonObject = {}
    for key, value in delta.items():
        if key.startswith(APP_PREFIX):
            app[key[len(APP_PREFIX) :]] = value
        elif key.startswith(USER_PREFIX):
            user[key[len(USER_PREFIX) :]] = value
        elif key.startswith(TEMP_PREFIX):
            continue
        else:
            session[key] = value
    return ScopedDelta(app=app, user=user, session=session)


def merge_state(
    session: Mapping[str, Any], user: Mapping[str, Any], app: Mapping[str, Any]
) -> JsonObject:
    """The merged view ADK returns: session keys, then ``user:k`` and ``app:k`` (which win)."""
    merged: JsonObject = dict(session)
    for key, value in user.items():
        merged[USER_PREFIX + key] = value
    for key, value in app.items():
        merged[APP_PREFIX + key] = value
    return merged


def apply_delta(state: Mapping[str, Any], delta: Mapping[str, Any]) -> JsonObject:
    """``dict.update`` semantics: delta keys win; ``None`` values are stored, never deleted."""
    out: JsonObject = dict(state)
    out.update(delta)
    return out


def validate_state(state: Mapping[str, Any], field_name: str) -> None:
    """Raises INVALID_STATE unless ``state`` is a JSON object of valid JSON values.

    Keys must be non-empty and a scope prefix must be followed by a name. Numbers must be finite.
    """
    for key, value in state.items():
        if not key:
            raise invalid("INVALID_STATE", field_name, f"{field_name} has an empty key")
        for prefix in (APP_PREFIX, USER_PREFIX, TEMP_PREFIX):
            if key == prefix:
                raise invalid(
                    "INVALID_STATE",
                    field_name,
                    f"{field_name} key {key!r} has a scope prefix but no name",
                )
        _validate_json_value(value, f"{field_name}.{key}")


def _validate_json_value(value: Any, path: str) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise invalid("INVALID_STATE", path, f"{path} is {value}, which is not valid JSON")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _validate_json_value(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise invalid("INVALID_STATE", path, f"{path} has a non-string key")
            _validate_json_value(item, f"{path}.{k}")
        return
    raise invalid("INVALID_STATE", path, f"{path} is not a JSON value")
