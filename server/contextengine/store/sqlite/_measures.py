"""``content_measures`` (migration 0006) on SQLite: the token count and characters of a session's
contents by digest, a cache of BuildContext's token estimate (see ``runtime.event_cache``).

The read runs on the read connection's thread, the write as an operation of the writer (batched
with whatever else is queued: it is never on an append's path, the event cache writes in the
background).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from contextengine.store._base import SessionKey
from contextengine.store.sqlite._writer import WriteTx

_SESSION_ID = "SELECT id FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?"


#: digests looked up per query (below SQLite's default limit of 32766 host parameters)
_DIGESTS_PER_QUERY = 500


def get_content_measures(
    db: sqlite3.Connection, *, key: SessionKey, counter: str, digests: Sequence[bytes] | None
) -> dict[bytes, tuple[int, int]]:
    """The session's measures by ``counter``; with ``digests``, only those (by primary key)."""
    if digests is None:
        found = db.execute(
            "SELECT m.digest, m.tokens, m.chars FROM content_measures m"
            " JOIN sessions s ON s.id = m.session"
            " WHERE s.app_name = ? AND s.user_id = ? AND s.session_id = ? AND m.counter = ?",
            (key.app_name, key.user_id, key.session_id, counter),
        ).fetchall()
        return {bytes(digest): (int(tokens), int(chars)) for digest, tokens, chars in found}
    row = db.execute(_SESSION_ID, (key.app_name, key.user_id, key.session_id)).fetchone()
    if row is None:
        return {}
    session = int(row[0])
    measures: dict[bytes, tuple[int, int]] = {}
    for start in range(0, len(digests), _DIGESTS_PER_QUERY):
        chunk = digests[start : start + _DIGESTS_PER_QUERY]
        marks = ",".join("?" * len(chunk))
        for digest, tokens, chars in db.execute(
            "SELECT digest, tokens, chars FROM content_measures"
            f" WHERE session = ? AND counter = ? AND digest IN ({marks})",
            (session, counter, *chunk),
        ):
            measures[bytes(digest)] = (int(tokens), int(chars))
    return measures


def put_content_measures(
    tx: WriteTx,
    *,
    key: SessionKey,
    counter: str,
    measures: Mapping[bytes, tuple[int, int]],
) -> None:
    row = tx.db.execute(_SESSION_ID, (key.app_name, key.user_id, key.session_id)).fetchone()
    if row is None:
        return
    session = int(row[0])
    tx.db.executemany(
        "INSERT OR IGNORE INTO content_measures (session, counter, digest, tokens, chars)"
        " VALUES (?, ?, ?, ?, ?)",
        [(session, counter, digest, tokens, chars) for digest, (tokens, chars) in measures.items()],
    )
