"""The guides' Python blocks are the scripts in ``examples/python/``, and the scripts run.

Each script runs twice against one ``contextengine serve`` child process (a temporary SQLite
file, the default log level), as against a long-lived ``make run`` sidecar: they make their own
sessions and users, so a second run must pass as the first did. Each page's Python block must be
its script from ``import asyncio`` to the end, so the two cannot drift.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from tests.docs.guides import ROOT, blocks, pages
from tests.fakes.provider_server import FakeProviders, start_fake_providers
from tests.support.sidecar import SERVING, Sidecar, running_sidecar

pytestmark = pytest.mark.process

EXAMPLES = ROOT / "examples" / "python"

#: page -> the scripts its Python blocks show, in order
SCRIPTS = {
    "clients/python/README.md": ("quickstart.py", "rendered_view.py"),
    "docs/guide/context.md": ("context.py",),
    "docs/guide/subscriptions.md": ("subscriptions.py",),
    "docs/guide/compaction.md": ("compaction.py",),
    "docs/guide/prompt-caching.md": ("prompt_caching.py",),
    "docs/guide/renderings.md": ("renderings.py",),
    "docs/guide/context-tools.md": ("context_tools.py",),
    "docs/guide/memory.md": ("memory.py",),
    "docs/guide/in-process.md": ("in_process.py",),
}
#: every script, in the pages' order
ALL_SCRIPTS = [script for scripts in SCRIPTS.values() for script in scripts]
#: where a page's part of a script starts
SHOWN_FROM = "import asyncio\n"


def test_every_python_block_is_an_example_script() -> None:
    with_python = {str(page.relative_to(ROOT)) for page in pages() if blocks(page, "python")}
    assert with_python == set(SCRIPTS), "a page with a Python block needs its examples/ script"
    for page, scripts in SCRIPTS.items():
        shown = blocks(page, "python")
        assert len(shown) == len(scripts), f"{page}: one Python block for each of {scripts}"
        for block, script in zip(shown, scripts, strict=True):
            source = (EXAMPLES / script).read_text()
            assert SHOWN_FROM in source, script
            assert block == source[source.index(SHOWN_FROM) :], (
                f"a Python block of {page} differs from examples/python/{script}"
            )


def test_every_example_script_is_on_a_page() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(ALL_SCRIPTS)


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
    # renderings.py sends one request a format, rendered_view.py two to Anthropic, each run
    assert len(fake.requests) == 2 * (3 + 2)


async def _run_twice(sidecar: Sidecar, fake: FakeProviders) -> None:
    for round_ in (1, 2):
        for script in ALL_SCRIPTS:
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
