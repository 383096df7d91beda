"""examples/adk_python/agent.py (clients/adk_python/README.md, "Example") runs out of process
against a real ``contextengine serve`` (a temporary SQLite file, the default log level), twice,
as against a long-lived ``make run`` sidecar: each run makes its own user and session."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sidecar import SERVING, running_sidecar

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "adk_python" / "agent.py"
GUIDE = ROOT / "clients" / "adk_python" / "README.md"


def _run(target: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTEXTENGINE_TARGET": target}
    return subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
        check=False,
    )


def test_the_guide_shows_how_to_run_it() -> None:
    assert ".venv/bin/python examples/adk_python/agent.py" in GUIDE.read_text()


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_the_adk_example_runs_twice_against_one_sidecar(tmp_path: Path) -> None:
    async with running_sidecar(tmp_path, tmp_path / "ce.db", "adk-example") as sidecar:
        for round_ in (1, 2):
            done = await asyncio.to_thread(_run, sidecar.target)
            assert done.returncode == 0, (
                f"run {round_} exited {done.returncode}:\n{done.stdout}\n{done.stderr}\n"
                f"--- sidecar log ---\n{sidecar.log()[-4000:]}"
            )
            lines = done.stdout.splitlines()
            assert "planner calls get_weather" in lines
            assert "planner calls transfer_to_agent" in lines
            assert "currency: 150 EUR is 162.0 USD." in lines
            assert "11 events in the sidecar, one a summary of the two invocations:" in lines
            sidecar.check_alive(f"after run {round_}")
        assert await sidecar.health() == SERVING
        log = sidecar.log()
        for rpc in ("BuildContext", "EndInvocation", "AppendEvent"):
            assert rpc in log, rpc  # the default level logs every RPC
