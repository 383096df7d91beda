"""Keyed page tokens: what one store issues it reads back; anything else is INVALID_PAGE_TOKEN."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from contextengine.core import page_tokens
from contextengine.core.errors import ContextEngineError
from contextengine.core.page_tokens import PageTokens

pytestmark = pytest.mark.unit

KEY = b"k" * 32
TOKENS = PageTokens(KEY)
SCOPE = ["app", "u1", "s1", "0"]

cursors = st.lists(
    st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=300)),
    max_size=3,
)


def _rejected(token: str, kind: str = "events", scope: list[str] = SCOPE) -> ContextEngineError:
    with pytest.raises(ContextEngineError) as err:
        TOKENS.decode(token, kind, scope)
    assert err.value.reason == "INVALID_PAGE_TOKEN"
    assert err.value.metadata == {"field": "page_token"}
    assert len(err.value.message) < 200  # nothing of the token is echoed
    return err.value


@settings(max_examples=200)
@given(cursor=cursors, scope=st.lists(st.text(max_size=50), max_size=4))
def test_round_trip(cursor: list[int | str], scope: list[str]) -> None:
    token = TOKENS.encode("sessions", scope, cursor)
    assert TOKENS.decode(token, "sessions", scope) == tuple(cursor)


@settings(max_examples=300)
@given(token=st.one_of(st.text(max_size=200), st.text("AB-_xyz019", max_size=200)))
def test_anything_else_is_invalid_page_token(token: str) -> None:
    _rejected(token)


def test_bound_to_kind_scope_and_key() -> None:
    token = TOKENS.encode("events", SCOPE, [5])
    assert page_tokens.int_cursor(TOKENS.decode(token, "events", SCOPE)) == 5
    _rejected(token, kind="sessions")
    _rejected(token, scope=["app", "u1", "s1", "1"])
    _rejected(token, scope=["app", "u1", "s2", "0"])
    with pytest.raises(ContextEngineError):
        PageTokens(b"x" * 32).decode(token, "events", SCOPE)
    for i in range(len(token)):  # every one-character edit is caught
        for c in "A_":
            if token[i] != c:
                _rejected(token[:i] + c + token[i + 1 :])
    _rejected(token + "A")
    _rejected(token[:-1])


def test_bounded_before_parsing() -> None:
    _rejected("A" * (page_tokens.MAX_TOKEN_CHARS + 1))
    _rejected("[" * 20_000)


def test_cursor_checks() -> None:
    out_of_range: list[page_tokens.Cursor] = [(2**63,), (-1,), ("1",), (1, 2), ()]
    for cursor in out_of_range:
        with pytest.raises(ContextEngineError) as err:
            page_tokens.int_cursor(cursor)
        assert err.value.reason == "INVALID_PAGE_TOKEN"
    assert page_tokens.int_cursor((2**63 - 1,)) == 2**63 - 1
    bad: list[page_tokens.Cursor] = [("a",), ("a", 1), ("a", "b", "c")]
    for cursor in bad:
        with pytest.raises(ContextEngineError):
            page_tokens.str_cursor(cursor, 2)
    assert page_tokens.str_cursor(("a", "b"), 2) == ("a", "b")


def test_short_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        PageTokens(b"short")
