"""The store's secrets: random keys generated once per database and kept with its data.

``page_token``: the key of page tokens' HMAC (``contextengine.core.page_tokens``). The SQLite
store keeps it in the ``secrets`` table (migration ``0004_secrets.sql``), so tokens survive a
restart and are valid in whichever process opens the file; the in-memory store draws one per
store.
"""

from __future__ import annotations

import secrets
import sqlite3

#: bytes of a generated key
KEY_BYTES = 32


def new_key() -> bytes:
    """A fresh random key (for stores that keep no file)."""
    return secrets.token_bytes(KEY_BYTES)


def read_page_token_key(conn: sqlite3.Connection) -> bytes:
    """The database's page token key (synchronous: run it on the connection's thread)."""
    row = conn.execute("SELECT value FROM secrets WHERE name = 'page_token'").fetchone()
    if row is None or not isinstance(row[0], bytes) or len(row[0]) < 16:
        raise RuntimeError("the database has no page token key (migration 0004 missing?)")
    return row[0]
