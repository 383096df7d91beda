"""Shared fixtures: a real sidecar on 127.0.0.1:0 and a client talking to it over gRPC."""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import settings

from contextengine.client import ContextEngineClient
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from tests.pg_server import postgres_dsn, postgres_server

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures of every test module

# `make test` (and CI) run every property test on a fixed, code-derived set of examples so that a
# run is reproducible; HYPOTHESIS_PROFILE=explore draws new random examples (use it to hunt).
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


#: the fixtures that start (or need) the test run's PostgreSQL server (``tests.pg_server``)
POSTGRES_FIXTURES = frozenset({"postgres_server", "postgres_dsn"})
TESTS = Path(__file__).resolve().parent
#: Python 3.10, where google-adk 2.13 (the parity reference) does not install
BELOW_GOOGLE_ADK: bool = sys.version_info < (3, 11)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``postgres`` every test that needs the PostgreSQL server: it asks for its fixture, or
    is the ``postgres`` case of a parametrized fixture (``server``, ``store``, ``memory``), which
    asks for it at run time; and ``browser`` every test that asks for the ``browser`` fixture
    (Chromium, tests/inspector). ``make check`` leaves both out."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        params = getattr(getattr(item, "callspec", None), "params", {})
        if POSTGRES_FIXTURES.intersection(fixtures) or "postgres" in params.values():
            item.add_marker(pytest.mark.postgres)
        if "browser" in fixtures:
            item.add_marker(pytest.mark.browser)


def _needs_google_adk(path: Path, seen: set[Path] | None = None) -> bool:
    """Whether a test module imports google-adk, itself or through the helpers it imports
    (``tests.x.y``, ``bench.x.y`` (the peer's drivers), or relative); ``conftest.py`` files above
    it are not followed."""
    seen = set() if seen is None else seen
    seen.add(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = path.parents[node.level - 1].relative_to(TESTS.parent).parts
                base = ".".join([*anchor, *([base] if base else [])])
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for name in names:
            if name == "google.adk" or name.startswith("google.adk."):
                return True
            helper = TESTS.parent.joinpath(*name.split(".")).with_suffix(".py")
            if (
                name.startswith(("tests.", "bench."))
                and helper.is_file()
                and helper not in seen
                and _needs_google_adk(helper, seen)
            ):
                return True
    return False


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """On Python 3.10 the test modules that need google-adk are not collected: google-adk 2.13,
    the parity reference, needs Python 3.11 (``make test`` runs the core and store suites on 3.10
    without them; every suite runs on 3.11)."""
    if BELOW_GOOGLE_ADK and collection_path.suffix == ".py" and _needs_google_adk(collection_path):
        return True
    return None


def pytest_report_header() -> str | None:
    if BELOW_GOOGLE_ADK:
        return "Python 3.10: the test modules that import google-adk (3.11+) are not collected"
    return None


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ContextEngineServer]:
    """A started server backed by the in-memory store, a SQLite file or a PostgreSQL database
    (its own database of the test run's server, ``tests.pg_server``)."""
    if request.param == "postgres":
        db = request.getfixturevalue("postgres_dsn")
    else:
        db = ":memory:" if request.param == "memory" else str(tmp_path / "ce.db")
    async with start_local_server(db) as srv:
        yield srv


@pytest.fixture
async def client(server: ContextEngineServer) -> AsyncIterator[ContextEngineClient]:
    async with ContextEngineClient(server.target, attempts=1) as c:
        yield c
