"""The PostgreSQL server of ``python -m bench postgres``: durable, with a commit latency to set,
and pgbench's own figure for it.

A durable commit here (``fsync=on``, ``synchronous_commit=on``: the defaults, which the store
never lowers) costs about 0.1 ms of fdatasync; on a replicated cloud database it costs
milliseconds. ``commit_delay`` with ``commit_siblings=0`` makes every commit wait that long before
its WAL flush (commits arriving meanwhile share the flush, as on such a database), so the same
machine measures both. ``commit_delay`` needs a superuser (``ALTER SYSTEM`` and a reload).

``pgbench_inserts`` is the database's own limit for the same shape of work: N clients, each
committing one 300-byte row per transaction (one table, a ``bigserial`` key: no row or lock is
held to the commit), for a few seconds.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from contextengine.testing.postgres import find_binaries, start_cluster, stop_cluster

__all__ = [
    "Cluster",
    "Waits",
    "checkpoint",
    "cluster",
    "database",
    "pgbench_inserts",
    "set_commit_delay",
]


@dataclass(frozen=True)
class Cluster:
    """A server the benchmark may fill: its admin URL and, when it started it, its binaries
    (for pgbench)."""

    admin: str
    binaries: Path | None
    #: how it was had, in words (for the report)
    origin: str


@contextlib.asynccontextmanager
async def cluster() -> AsyncIterator[Cluster]:
    """The server in ``CONTEXTENGINE_BENCH_POSTGRES`` (a ``postgresql://`` URL of a superuser
    on a durable server), else a throw-away durable cluster started here."""
    given = os.environ.get("CONTEXTENGINE_BENCH_POSTGRES")
    if given:
        yield Cluster(given, None, "CONTEXTENGINE_BENCH_POSTGRES")
        return
    binaries = find_binaries()
    if binaries is None:
        raise RuntimeError(
            "no PostgreSQL server binaries: set CONTEXTENGINE_BENCH_POSTGRES to a server's URL"
        )
    server = await asyncio.to_thread(start_cluster, binaries, durable=True)
    try:
        yield Cluster(
            server.dsn(), binaries, "a throw-away local cluster, fsync=on, synchronous_commit=on"
        )
    finally:
        await asyncio.to_thread(stop_cluster, server)


async def database(admin: str, name: str) -> str:
    """A new empty database ``name`` on the server of ``admin``; its URL."""
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    base, _, _ = admin.rpartition("/")
    return f"{base}/{name}"


async def set_commit_delay(admin: str, microseconds: int) -> dict[str, str]:
    """Sets ``commit_delay`` (``commit_siblings`` 0: every commit waits) and reloads; returns
    the settings that shape a commit as the server now reports them."""
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f"ALTER SYSTEM SET commit_delay = {int(microseconds)}")
        await conn.execute("ALTER SYSTEM SET commit_siblings = 0")
        await conn.execute("SELECT pg_reload_conf()")
        for _ in range(100):  # the reload is asynchronous
            if await conn.fetchval("SHOW commit_delay") == str(int(microseconds)):
                break
            await asyncio.sleep(0.02)
        names = ("fsync", "synchronous_commit", "commit_delay", "commit_siblings")
        return {name: str(await conn.fetchval(f"SHOW {name}")) for name in names}
    finally:
        await conn.close()


class Waits:
    """What the sidecars' database connections wait for while a workload runs: every 10 ms,
    ``pg_stat_activity``'s wait event of each of them that runs a statement. A lock shared by
    the writers shows as ``Lock`` samples (an advisory lock, a row, a transaction id); the
    commit's flush as ``IO`` / ``WALSync``-like events or ``CommitDelay`` (``commit_delay``)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self.samples: collections.Counter[str] = collections.Counter()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Waits:
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _sample(self) -> None:
        conn = await asyncpg.connect(self._url)
        try:
            while True:
                rows = await conn.fetch(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'running')"
                    " FROM pg_stat_activity WHERE application_name LIKE 'contextengine %'"
                    " AND state = 'active' AND datname = current_database()"
                )
                self.samples.update(row[0] for row in rows)
                await asyncio.sleep(0.01)
        finally:
            await conn.close()

    def summary(self) -> str:
        """The share of samples waiting on a lock, and the commonest wait events."""
        total = sum(self.samples.values())
        if not total:
            return "no statement sampled"
        locks = sum(n for event, n in self.samples.items() if event.startswith("Lock:"))
        common = ", ".join(f"{event} {n / total:.0%}" for event, n in self.samples.most_common(4))
        return f"{locks / total:.1%} of {total} samples waiting on a lock ({common})"


async def checkpoint(admin: str) -> None:
    """A checkpoint now, so that none (its flushes) falls inside the next measurement."""
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


async def pgbench_inserts(cluster: Cluster, clients: int, seconds: float) -> float | None:
    """Transactions per second of ``clients`` pgbench clients each inserting one row per
    transaction; None without pgbench."""
    if cluster.binaries is None or not (cluster.binaries / "pgbench").exists():
        return None
    url = await database(cluster.admin, "bench_pgbench")
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE rows (id bigserial PRIMARY KEY, client int, body text)")
    finally:
        await conn.close()
    with tempfile.TemporaryDirectory(prefix="bench-pgbench-") as tmp:
        script = Path(tmp) / "insert.sql"
        script.write_text(
            "INSERT INTO rows (client, body) VALUES (:client_id, repeat('x', 300));\n"
        )
        command = [
            str(cluster.binaries / "pgbench"),
            *("-n", "-M", "prepared", "-c", str(clients), "-j", "2"),
            *("-T", str(max(1, round(seconds))), "-f", str(script), url),
        ]
        done = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, check=False
        )
    found = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"pgbench failed: {done.stderr.strip()[-2000:]}")
    return float(found.group(1))
