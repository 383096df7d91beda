"""The README's Python blocks are the scripts in ``examples/python/``, and the scripts run.

Each script runs twice against one ``contextengine serve`` child process (a temporary SQLite
file, the default log level), as against a long-lived ``make run`` sidecar: they make their own
sessions and users, so a second run must pass as the first did. Each README section's Python
block must be its script from ``import asyncio`` to the end, so the two cannot drift.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from tests.fakes.provider_server import FakeProviders, start_fake_providers
from tests.faults.sidecar import SERVING, Sidecar, running_sidecar

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLES = ROOT / "examples" / "python"

#: README section -> the script its Python block shows
SCRIPTS = {
    "Using it from Python": "quickstart.py",
    "Building the model context": "context.py",
    "Subscriptions": "subscriptions.py",
    "Compaction": "compaction.py",
    "Prompt caching": "prompt_caching.py",
    "Renderings for OpenAI and Anthropic models": "renderings.py",
    "Context tools: the model steers its own context": "context_tools.py",
    "Memory": "memory.py",
    "In-process engine (no sidecar)": "in_process.py",
}
#: where the README's part of a script starts
SHOWN_FROM = "import asyncio\n"


def _sections() -> dict[str, str]:
    text = README.read_text()
    parts = re.split(r"^## (.+)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _python_blocks(section: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_every_python_block_is_an_example_script() -> None:
    sections = _sections()
    with_python = {name for name, body in sections.items() if _python_blocks(body)}
    assert with_python == set(SCRIPTS), "a README section with Python needs its examples/ script"
    for heading, script in SCRIPTS.items():
        source = (EXAMPLES / script).read_text()
        assert SHOWN_FROM in source, script
        [block] = _python_blocks(sections[heading])
        assert block == source[source.index(SHOWN_FROM) :], (
            f"README section {heading!r} differs from examples/python/{script}"
        )


def test_every_example_script_is_in_the_readme() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(SCRIPTS.values())


def _run(script: str, target: str, fake: FakeProviders) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CONTEXTENGINE_TARGET": target,
        "OPENAI_BASE_URL": fake.openai_base_url,
        "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
    }
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_the_examples_run_twice_against_one_sidecar(tmp_path: Path) -> None:
    with start_fake_providers() as fake:
        async with running_sidecar(tmp_path, tmp_path / "ce.db", "examples") as sidecar:
            await _run_twice(sidecar, fake)
    # the renderings reached both providers (each body checked against the provider SDK's types)
    assert {r.path for r in fake.requests} == {
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
    }
    assert len(fake.requests) == 6


async def _run_twice(sidecar: Sidecar, fake: FakeProviders) -> None:
    for round_ in (1, 2):
        for script in SCRIPTS.values():
            done = await asyncio.to_thread(_run, script, sidecar.target, fake)
            assert done.returncode == 0, (
                f"examples/python/{script}, run {round_}, exited {done.returncode}:\n"
                f"{done.stdout}\n{done.stderr}\n--- sidecar log ---\n{sidecar.log()[-4000:]}"
            )
            assert done.stdout.strip(), script  # each prints what it shows
            sidecar.check_alive(f"after examples/python/{script}, run {round_}")
    assert await sidecar.health() == SERVING
    async with ContextEngineClient(sidecar.target, attempts=1) as client:
        demo = [s async for s in client.list_sessions("demo", "dave")]
    assert len(demo) == 2  # each run has its own session
    assert sidecar.log().count("SubscribeEvents") >= 4  # the default level logs every RPC
