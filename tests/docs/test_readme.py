"""The README's examples run: the grpcurl walk-through and the Python snippet."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import textwrap
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


async def _run_python_block(heading: str, db: str = ":memory:") -> None:
    """Runs the first Python block after ``heading`` against a real server."""
    text = README.read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    async with start_local_server(db) as server:
        code = block.group(1).replace(DEFAULT_ADDRESS, server.target)
        body = textwrap.indent(code, "    ")
        namespace: dict[str, object] = {}
        exec(f"async def _example():\n{body}", namespace)  # the README's own code
        await namespace["_example"]()  # type: ignore[operator]


async def test_python_example() -> None:
    await _run_python_block("Using it from Python")


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_subscriptions_example(backend: str, tmp_path: Path) -> None:
    await _run_python_block(
        "Subscriptions", ":memory:" if backend == "memory" else str(tmp_path / "ce.db")
    )


async def test_context_example() -> None:
    await _run_python_block("Building the model context")


async def test_compaction_example() -> None:
    await _run_python_block("Compaction")


async def test_prompt_caching_example() -> None:
    await _run_python_block("Prompt caching")


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_memory_example(backend: str, tmp_path: Path) -> None:
    await _run_python_block("Memory", ":memory:" if backend == "memory" else str(tmp_path / "m.db"))
