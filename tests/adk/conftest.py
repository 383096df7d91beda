"""Fixtures of the ADK drop-in tests: every behaviour runs in both modes (``backend_mode``).

- ``sidecar``: a real ``contextengine serve`` out of process (``tests/support/sidecar.py``), one
  for the whole test session (starting one per test would dominate the run); tests keep apart by
  their own ``app_name``;
- ``embedded``: the engine in process on a SQLite file of the test's own ``tmp_path``.

``backend`` is a fresh backend of the mode (closed after the test); ``make_backend`` makes more
that reach the SAME engine (the same sidecar; for embedded, the one backend again, since one
process opens a SQLite file once), for tests with a second writer.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from contextengine.adk import Backend, embedded_backend, sidecar_backend
from tests.support.sidecar import Sidecar, running_sidecar

MODES = ("sidecar", "embedded")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def adk_sidecar(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sidecar]:
    """One sidecar for every ADK test of the session."""
    workdir = tmp_path_factory.mktemp("adk-sidecar")
    async with running_sidecar(workdir, workdir / "ce.db", "adk") as server:
        yield server


@pytest.fixture(params=MODES)
def backend_mode(request: pytest.FixtureRequest) -> str:
    """Which backend the drop-ins run on: "sidecar" or "embedded"."""
    return str(request.param)


@pytest.fixture
def app_name() -> str:
    """An app of this test only (the sidecar is shared by the session)."""
    return f"app-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def make_backend(
    backend_mode: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], Backend]]:
    """Makes backends of ``backend_mode`` on this test's engine; the test closes them (or
    ``backend`` does for the first one)."""
    if backend_mode == "sidecar":
        sidecar: Sidecar = request.getfixturevalue("adk_sidecar")
        yield lambda: sidecar_backend(sidecar.target, attempts=2)
        sidecar.check_alive("after the test")
    else:
        shared = embedded_backend(str(tmp_path / "engine.db"))
        yield lambda: shared


@pytest.fixture
async def backend(make_backend: Callable[[], Backend]) -> AsyncIterator[Backend]:
    """A backend of ``backend_mode``, closed after the test."""
    made = make_backend()
    try:
        yield made
    finally:
        await made.aclose()
