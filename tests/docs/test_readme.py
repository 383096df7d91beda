"""The README's grpcurl walk-through runs against a real server (its Python blocks are the
scripts in examples/python/: tests/docs/test_examples.py)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from contextengine.testing import start_local_server

README = Path(__file__).resolve().parents[2] / "README.md"
DEFAULT_ADDRESS = "127.0.0.1:50151"


def _walkthrough_commands() -> list[str]:
    text = README.read_text()
    section = text.split("<!-- walkthrough:start -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
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
    commands = _walkthrough_commands()
    assert len(commands) == 8
    assert all(c.startswith("grpcurl") for c in commands)


@pytest.mark.skipif(shutil.which("grpcurl") is None, reason="grpcurl is installed by `make test`")
async def test_grpcurl_walkthrough(tmp_path: Path) -> None:
    async with start_local_server(str(tmp_path / "ce.db")) as server:
        outputs: list[subprocess.CompletedProcess[str]] = []
        for command in _walkthrough_commands():
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
