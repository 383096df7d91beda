"""Opaque, request-bound page tokens (AIP-158).

A token encodes the cursor and the request it belongs to; presenting it with a different request
(another app, user or session) or tampering with it yields INVALID_PAGE_TOKEN. Tokens are URL-safe
and carry a checksum, so a truncated or edited token is detected rather than misread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from contextengine.errors import invalid

_VERSION = 1


def _checksum(body: bytes) -> str:
    return hashlib.sha256(b"contextengine-page-token:" + body).hexdigest()[:12]


def encode(kind: str, scope: list[str], cursor: Any) -> str:
    body = json.dumps(
        {"v": _VERSION, "k": kind, "s": scope, "c": cursor}, separators=(",", ":")
    ).encode()
    raw = body + b"." + _checksum(body).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str, kind: str, scope: list[str], field: str = "page_token") -> Any:
    """The cursor of ``token``; raises INVALID_PAGE_TOKEN unless it was issued for this request."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body, _, check = raw.rpartition(b".")
        if not body or check.decode() != _checksum(body):
            raise ValueError("checksum")
        data = json.loads(body)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise invalid("INVALID_PAGE_TOKEN", field, f"{field} is malformed") from exc
    if not isinstance(data, dict) or data.get("v") != _VERSION or data.get("k") != kind:
        raise invalid("INVALID_PAGE_TOKEN", field, f"{field} was not issued for this method")
    if data.get("s") != scope:
        raise invalid("INVALID_PAGE_TOKEN", field, f"{field} was issued for a different request")
    return data.get("c")
