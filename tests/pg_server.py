"""A real PostgreSQL server for the test run: started once per pytest session, in a temp dir.

``postgres_server`` (session scope) runs ``initdb`` and ``pg_ctl start`` in a fresh temporary
directory (as the ``postgres`` user through ``runuser`` when the tests run as root: PostgreSQL
refuses to run as root), with fsync off (a test cluster need not survive power loss; commits still reach the WAL
before they are acknowledged, so a crash of the server loses nothing acknowledged), on a free
loopback port, and stops it (``-m immediate``) and deletes the directory at the end. On a machine
without the server binaries it installs them (``apt-get install -y postgresql-15``) when it runs
as root with apt; where that is impossible the PostgreSQL tests are skipped with a loud reason,
except in CI (``CI=true``), where a missing server fails them.

``postgres_dsn`` gives each test a database of its own, holding the store's schema and no data:
created from a template that has the schema (``CREATE DATABASE ... TEMPLATE``, ~0.3 s here), and
after the test emptied (``DELETE``, a few milliseconds) for a later test rather than dropped. Tests that start several sidecars on one database use the same DSN for all.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from contextengine.store.postgres import PostgresStore
from contextengine.testing.postgres import (
    APT_PACKAGE,
    PostgresCluster,
    PostgresUnavailableError,
    find_binaries,
    start_cluster,
    stop_cluster,
)

#: the database every test database is copied from (the store's schema applied)
TEMPLATE = "ce_template"


@dataclass
class PostgresServer(PostgresCluster):
    """The test run's cluster (``contextengine.testing.postgres``), handing out databases that
    hold the store's schema."""

    _names: Iterator[int] = field(default_factory=itertools.count)
    _free: list[str] = field(default_factory=list)

    def create_database(self) -> str:
        """A database holding the store's schema and no data; returns its name. Databases given
        back with ``release_database`` are emptied and handed out again (an emptying takes a
        tenth of a copy's time)."""
        if self._free:
            return self._free.pop()
        name = f"ce_test_{next(self._names)}"
        _in_own_loop(_execute(self.dsn(), f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE}'))
        return name

    def create_empty_database(self) -> str:
        """A new database without the store's schema (for migration tests); not recycled."""
        name = f"ce_empty_{next(self._names)}"
        _in_own_loop(_execute(self.dsn(), f'CREATE DATABASE "{name}" TEMPLATE template0'))
        return name

    def release_database(self, name: str) -> None:
        """Empties ``name`` (every connection to it ended, every table of data emptied) for the
        next ``create_database``; dropped if that fails."""
        try:
            _in_own_loop(_empty(self.dsn(name)))
        except Exception:
            _in_own_loop(_execute(self.dsn(), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            raise
        self._free.append(name)


#: tables that hold the schema's own rows, not data
_KEPT = ("schema_version", "secrets", "positions")


async def _execute(dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _empty(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        # What a test left behind (a killed sidecar's connections, a listener) holds no locks.
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        tables = await conn.fetch(
            "SELECT quote_ident(tablename) FROM pg_tables"
            " WHERE schemaname = 'public' AND tablename <> ALL($1::text[])",
            list(_KEPT),
        )
        async with conn.transaction():
            # DELETE, not TRUNCATE: a test leaves a few rows, and TRUNCATE makes new files for
            # every table. Foreign keys are not checked (replica role): every table is emptied.
            await conn.execute("SET LOCAL session_replication_role = replica")
            for (table,) in tables:
                await conn.execute(f"DELETE FROM {table}")
    finally:
        await conn.close()


def _in_own_loop(coroutine: Coroutine[Any, Any, None]) -> None:
    """Runs ``coroutine`` to completion on a loop in another thread: fixtures are set up from
    synchronous and asynchronous code alike (an async fixture asking for one, inside a loop)."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        thread.submit(asyncio.run, coroutine).result()


def _unavailable(reason: str) -> None:
    message = f"POSTGRESQL TESTS NOT RUN: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: a missing PostgreSQL is a failure)", pytrace=False)
    pytest.skip(message)


def _start(binaries: Path) -> PostgresServer:
    try:
        return start_cluster(binaries, cluster=PostgresServer)
    except PostgresUnavailableError as error:
        _unavailable(str(error))
        raise


@contextmanager
def private_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the caller's own (for tests that stop and restart it), with the
    store's schema in its ``ce_template`` database; the same skip/fail rule as
    ``postgres_server``."""
    binaries = find_binaries()
    if binaries is None:
        _unavailable("no PostgreSQL server binaries (initdb, pg_ctl)")
        raise AssertionError("unreachable")
    server = _start(binaries)
    try:
        _in_own_loop(_make_template(server))
        yield server
    finally:
        stop_cluster(server)


async def _make_template(server: PostgresServer) -> None:
    conn = await asyncpg.connect(server.dsn())
    try:
        await conn.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await conn.close()
    store = PostgresStore(server.dsn(TEMPLATE), pool_size=1)
    await store.open()
    await store.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The test run's PostgreSQL server (started on first use)."""
    binaries = find_binaries()
    if binaries is None:
        _unavailable(
            "no PostgreSQL server binaries (initdb, pg_ctl) and they cannot be installed here "
            f"(apt-get install {APT_PACKAGE} needs root and apt)"
        )
        return
    server = _start(binaries)
    try:
        _in_own_loop(_make_template(server))
        yield server
    finally:
        stop_cluster(server)


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    """The DSN of a fresh database (the store's schema in it) of the test run's server, dropped
    after the test."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.dsn(name)
    finally:
        postgres_server.release_database(name)


def ensure_binaries() -> Path | None:
    """The server binaries' directory, installing them first when missing and possible (the
    Makefile runs this before pytest, so a fresh machine's install is not inside a test's time
    limit); None where they cannot be had."""
    return find_binaries()


if __name__ == "__main__":
    found = ensure_binaries()
    print(f"PostgreSQL server binaries: {found}" if found else "PostgreSQL server: NOT AVAILABLE")
