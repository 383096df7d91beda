"""The grpcurl lines of the documentation run against a real server: the front page's quickstart
(README.md, after its Python example) and the walk-through (docs/guide/grpcurl.md). The Python
blocks are the scripts in examples/python/: tests/docs/test_examples.py."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from contextengine.testing import start_local_server
from tests.docs.guides import ROOT, marked

pytestmark = pytest.mark.process

DEFAULT_ADDRESS = "127.0.0.1:50151"
WALKTHROUGH = "docs/guide/grpcurl.md"
FRONT_PAGE = "README.md"


def _commands(page: str, marker: str) -> list[str]:
    """The shell commands of the page's marked block (comments and blank lines left out)."""
    block = re.search(r"```sh\n(.*?)```", marked(page, marker), re.S)
    assert block is not None
    commands: list[str] = []
    current = ""
    for line in block.group(1).splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line + "\n"
        if not line.endswith("\\") and current.count("'") % 2 == 0:
            commands.append(current)
            current = ""
    return commands


def test_walkthrough_is_found() -> None:
    commands = _commands(WALKTHROUGH, "walkthrough")
    assert len(commands) == 8
    assert all(c.startswith("grpcurl") for c in commands)


def test_quickstart_is_found() -> None:
    """One example, three grpcurl lines; the front page says to start the sidecar with make run."""
    example, *grpcurl = _commands(FRONT_PAGE, "quickstart")
    assert example == ".venv/bin/python examples/python/quickstart.py\n"
    assert len(grpcurl) == 3
    assert all(c.startswith("grpcurl") for c in grpcurl)
    assert "make run    # serves on 127.0.0.1:50151" in (ROOT / FRONT_PAGE).read_text()


async def _run(shell: str) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", shell],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, f"{shell}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.skipif(shutil.which("grpcurl") is None, reason="grpcurl is installed by `make test`")
async def test_quickstart(tmp_path: Path) -> None:
    async with start_local_server(str(tmp_path / "ce.db")) as server:
        outputs = []
        for command in _commands(FRONT_PAGE, "quickstart"):
            shell = command.replace(DEFAULT_ADDRESS, server.target).replace(
                ".venv/bin/python", sys.executable
            )
            if "examples/" in shell:
                shell = f"CONTEXTENGINE_TARGET={server.target} {shell}"
            outputs.append(await _run(shell))
    example, listed, health, sessions = outputs
    assert "context of greeter: 1 content, up to event 1" in example.stdout
    assert "contextengine.v1.ContextService" in listed.stdout
    assert '"status": "SERVING"' in health.stdout
    session = re.search(r"session ([0-9a-f-]{36}):", example.stdout)
    assert session is not None, example.stdout
    assert f'"id": "{session.group(1)}"' in sessions.stdout  # the session the example made


@pytest.mark.skipif(shutil.which("grpcurl") is None, reason="grpcurl is installed by `make test`")
async def test_grpcurl_walkthrough(tmp_path: Path) -> None:
    async with start_local_server(str(tmp_path / "ce.db")) as server:
        outputs: list[subprocess.CompletedProcess[str]] = []
        for command in _commands(WALKTHROUGH, "walkthrough"):
            shell = command.replace(DEFAULT_ADDRESS, server.target)
            proc = await asyncio.to_thread(
                subprocess.run, ["bash", "-c", shell], capture_output=True, text=True, timeout=30
            )
            assert proc.returncode == 0, f"{shell}\n{proc.stdout}\n{proc.stderr}"
            outputs.append(proc)
    listed, health, created, first, second, got, listed_events, missing = outputs
    assert "contextengine.v1.SessionService" in listed.stdout
    assert '"status": "SERVING"' in health.stdout
    assert '"user:name": "Alice"' in created.stdout
    assert '"sequence": "1"' in first.stdout
    assert '"sequence": "2"' in second.stdout
    assert '"turns": 1' in got.stdout
    assert "temp:scratch" not in got.stdout
    assert '"app:model": "gemini-2.5-flash"' in got.stdout
    assert '"sequence": "2"' in listed_events.stdout
    assert "NotFound" in missing.stderr
    assert "SESSION_NOT_FOUND" in missing.stderr
