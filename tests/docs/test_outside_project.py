"""The Python client from outside the repository, as its guide tells a new user to get it.

A fresh virtual environment (its own interpreter's ``venv``, nothing of the repository's
``.venv``) runs the guide's install line (``pip install ./clients/python`` from a checkout), then
the guide's first block, copied into a directory of its own, against a ``contextengine serve``
process: the client alone must be enough to reach a context. The TypeScript, Java and Kotlin
guides have the same test in their own suites.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.guides import ROOT, blocks
from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.process

GUIDE = "clients/python/README.md"


def _install_line() -> list[str]:
    """The guide's ``pip install ...`` line, without its comment."""
    for block in blocks(GUIDE, "sh"):
        for line in block.splitlines():
            if line.startswith("pip install "):
                return line.split("#", 1)[0].split()
    raise AssertionError(f"{GUIDE} has no `pip install` line")


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_fresh_environment_installs_the_client_and_fetches_a_context(
    tmp_path: Path,
) -> None:
    install = _install_line()
    assert install == ["pip", "install", "./clients/python"]
    # the guide's install runs from a checkout's root; nothing of the repository's environment
    # leaks in (no PYTHONPATH, no VIRTUAL_ENV)
    env = {
        k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}
    }
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    await asyncio.to_thread(_run, [sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    pip = [python, "-m", "pip", "--disable-pip-version-check", "-q"]
    await asyncio.to_thread(_run, [*pip, *install[1:]], ROOT, env)
    listed = await asyncio.to_thread(_run, [*pip[:-1], "list", "--format=freeze"], tmp_path, env)
    names = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert "contextengine-client" in names
    assert "contextengine" not in names  # the client alone, not the server
    assert not names & {"google-genai", "aiosqlite", "grpcio-tools"}

    project = tmp_path / "agent"
    project.mkdir()
    [first] = [b for b in blocks(GUIDE, "python") if "ContextEngineClient(" in b][:1]
    (project / "agent.py").write_text(first)
    async with running_sidecar(tmp_path, tmp_path / "ce.db", "outside") as sidecar:
        out = await asyncio.to_thread(
            _run, [python, "agent.py"], project, {**env, "CONTEXTENGINE_TARGET": sidecar.target}
        )
    assert re.search(r"session \S+: event \S+ is sequence 1", out), out
    assert "context of greeter: 1 content, up to event 1" in out, out
