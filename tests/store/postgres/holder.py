"""A writer that holds its transaction open: the interleaving tests' third sidecar.

``python -m tests.store.postgres.holder DSN APP USER SESSION EVENT_ID`` appends one event to an
existing session through a ``PostgresStore``, as a sidecar does, but its COMMIT waits: once the
event is written (its position taken from its transaction id) it prints ``holding <xid>`` and
reads one line from stdin. ``commit`` commits, ``rollback`` rolls back; killed meanwhile
(SIGKILL), its connection dies with it and PostgreSQL rolls the transaction back. It prints
``committed`` or ``rolled back`` at the end.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import asyncpg

from contextengine.store import SessionKey
from contextengine.store.postgres import PostgresStore
from contextengine.v1 import event_pb2


class RollBackError(Exception):
    """Raised instead of the COMMIT: the store rolls the transaction back."""


async def main(dsn: str, key: SessionKey, event_id: str) -> None:
    execute = asyncpg.Connection.execute

    async def hold(conn: asyncpg.Connection, query: str, *args: object, **kwargs: object) -> Any:
        if query == "COMMIT":
            xid = await conn.fetchval("SELECT pg_current_xact_id()::text")
            print(f"holding {xid}", flush=True)
            line = await asyncio.to_thread(sys.stdin.readline)
            if line.strip() != "commit":
                raise RollBackError
        return await execute(conn, query, *args, **kwargs)

    asyncpg.Connection.execute = hold
    store = PostgresStore(dsn, pool_size=1)
    await store.open()
    event = event_pb2.Event(id=event_id, author="user", invocation_id="held", timestamp=1.0)
    event.content.role = "user"
    event.content.parts.add().text = event_id
    try:
        await store.append_events(key, [event], None)
        print("committed", flush=True)
    except RollBackError:
        print("rolled back", flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    dsn, app, user, session, event_id = sys.argv[1:6]
    asyncio.run(main(dsn, SessionKey(app, user, session), event_id))
