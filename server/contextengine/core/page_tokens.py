"""Opaque, request-bound, keyed page tokens (AIP-158).

A token is ``base64url(version || cursor || tag)``: the cursor is a short JSON array of integers
and strings, the tag an HMAC-SHA256 (truncated to 16 bytes) under the store's page token key
(``EventStore.page_token_key``: random, generated once per database and kept in it) of the
method's kind, the request's scope (app, user, session, ...) and the cursor. So:

* nobody without the key can mint or edit a token, and the cursor of a forged one is never read;
* a token presented with another request (another app, user or session), to another method or to
  another database fails the check;
* a token stays valid across restarts, in whichever process opens the database.

Every decoding failure is INVALID_PAGE_TOKEN, and decoding is bounded: the length is checked
before anything else (:data:`MAX_TOKEN_CHARS`), the tag before the cursor is parsed, and the
callers' cursor checks (:func:`int_cursor`, :func:`str_cursor`) check types and ranges. Tokens of
earlier versions (unkeyed) are rejected: the client restarts its listing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from typing import TypeAlias

from contextengine.core.errors import ContextEngineError, invalid

#: the longest token accepted (issued ones are far shorter: two ids of 256 characters at most)
MAX_TOKEN_CHARS = 4096
#: the largest integer a cursor may hold (SQLite's and protobuf's int64)
MAX_INT_CURSOR = 2**63 - 1

_VERSION = 2
_TAG_BYTES = 16
_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")
_DOMAIN = b"contextengine.v1 page token\x00"

#: what a cursor holds: a few integers and strings
Cursor: TypeAlias = tuple[int | str, ...]


def _tag(key: bytes, kind: str, scope: Sequence[str], body: bytes) -> bytes:
    bound = json.dumps([kind, list(scope)], separators=(",", ":"), ensure_ascii=False)
    mac = hmac.new(key, _DOMAIN + bound.encode() + b"\x00" + body, hashlib.sha256)
    return mac.digest()[:_TAG_BYTES]


def _malformed(field: str, why: str) -> ContextEngineError:
    return invalid("INVALID_PAGE_TOKEN", field, f"{field} is not a valid page token: {why}")


class PageTokens:
    """Issues and checks the page tokens of one store (``key``: its page token key)."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a page token key needs at least 16 bytes")
        self._key = key

    def encode(self, kind: str, scope: Sequence[str], cursor: Sequence[int | str]) -> str:
        """A token for ``cursor`` of the listing ``kind`` of the request ``scope``."""
        for item in cursor:
            if not isinstance(item, (int, str)) or isinstance(item, bool):
                raise TypeError(f"a cursor holds integers and strings, not {type(item).__name__}")
        body = (
            bytes([_VERSION])
            + json.dumps(list(cursor), separators=(",", ":"), ensure_ascii=False).encode()
        )
        raw = body + _tag(self._key, kind, scope, body)
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def decode(
        self, token: str, kind: str, scope: Sequence[str], field: str = "page_token"
    ) -> Cursor:
        """The cursor of ``token``; INVALID_PAGE_TOKEN unless this store issued it for the
        listing ``kind`` of the request ``scope``."""
        if len(token) > MAX_TOKEN_CHARS:
            raise _malformed(field, f"{len(token)} characters long (max {MAX_TOKEN_CHARS})")
        if not token.isascii() or _ALPHABET.fullmatch(token) is None:
            raise _malformed(field, "not URL-safe base64")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (ValueError, binascii.Error) as exc:
            raise _malformed(field, "not URL-safe base64") from exc
        if base64.urlsafe_b64encode(raw).decode().rstrip("=") != token:  # stray trailing bits
            raise _malformed(field, "not URL-safe base64")
        body, tag = raw[:-_TAG_BYTES], raw[-_TAG_BYTES:]
        if len(body) < 1 or body[0] != _VERSION:
            raise _malformed(field, "not issued by this version of the server")
        if not hmac.compare_digest(tag, _tag(self._key, kind, scope, body)):
            raise _malformed(
                field,
                "altered, issued by another database, or issued for another request or method",
            )
        try:
            cursor = json.loads(body[1:].decode())
        except (ValueError, RecursionError) as exc:  # only a token we issued gets here
            raise _malformed(field, "unreadable cursor") from exc
        if not isinstance(cursor, list) or not all(
            isinstance(item, (int, str)) and not isinstance(item, bool) for item in cursor
        ):
            raise _malformed(field, "unreadable cursor")
        return tuple(cursor)


def int_cursor(
    cursor: Cursor, field: str = "page_token", minimum: int = 0, maximum: int = MAX_INT_CURSOR
) -> int:
    """The one integer of ``cursor``, within ``[minimum, maximum]``; else INVALID_PAGE_TOKEN."""
    if len(cursor) != 1 or not isinstance(cursor[0], int):
        raise _malformed(field, "not a cursor of this listing")
    value = cursor[0]
    if not minimum <= value <= maximum:
        raise _malformed(field, "cursor out of range")
    return value


def str_cursor(cursor: Cursor, count: int, field: str = "page_token") -> tuple[str, ...]:
    """The ``count`` strings of ``cursor``; else INVALID_PAGE_TOKEN."""
    if len(cursor) != count or not all(isinstance(item, str) for item in cursor):
        raise _malformed(field, "not a cursor of this listing")
    return tuple(str(item) for item in cursor)
