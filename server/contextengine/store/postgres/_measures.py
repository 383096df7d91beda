"""``content_measures`` (migration postgres/0004): the token count and characters of a session's
contents by digest, a cache of BuildContext's token estimate (see ``runtime.event_cache``).
Sidecars sharing the database may write the same digest: the numbers are the same, the first row
stays (ON CONFLICT DO NOTHING)."""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg

from contextengine.store._base import SessionKey


async def get_content_measures(
    conn: asyncpg.Connection, key: SessionKey, counter: str, digests: list[bytes] | None = None
) -> dict[bytes, tuple[int, int]]:
    """The session's measures by ``counter``; with ``digests``, only those."""
    query = (
        "SELECT m.digest, m.tokens, m.chars FROM content_measures m"
        " JOIN sessions s ON s.id = m.session"
        " WHERE s.app_name = $1 AND s.user_id = $2 AND s.session_id = $3 AND m.counter = $4"
    )
    if digests is None:
        found = await conn.fetch(query, key.app_name, key.user_id, key.session_id, counter)
    else:
        found = await conn.fetch(
            query + " AND m.digest = ANY($5::bytea[])",
            key.app_name,
            key.user_id,
            key.session_id,
            counter,
            digests,
        )
    return {bytes(row[0]): (int(row[1]), int(row[2])) for row in found}


async def put_content_measures(
    conn: asyncpg.Connection,
    key: SessionKey,
    counter: str,
    measures: Mapping[bytes, tuple[int, int]],
) -> None:
    digests = list(measures)
    await conn.execute(
        "INSERT INTO content_measures (session, counter, digest, tokens, chars)"
        " SELECT s.id, $4, m.digest, m.tokens, m.chars FROM sessions s,"
        " unnest($5::bytea[], $6::integer[], $7::integer[]) AS m (digest, tokens, chars)"
        " WHERE s.app_name = $1 AND s.user_id = $2 AND s.session_id = $3"
        " ON CONFLICT DO NOTHING",
        key.app_name,
        key.user_id,
        key.session_id,
        counter,
        digests,
        [measures[digest][0] for digest in digests],
        [measures[digest][1] for digest in digests],
    )
