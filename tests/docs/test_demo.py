"""``examples/python/demo/demo.py`` runs offline and shows compaction at work: summaries appear in
the contexts it prints (with the operator CLI's renderer, ``contextengine.console.render``) and the
last one is expanded back into the events it replaced; at the end it prints the CLI commands that
look at its session, and they work.

Each test runs the example as a user would (``python examples/python/demo/demo.py ...``, a child
process), with its own ``contextengine serve`` or against a sidecar the test started.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pytest

from contextengine.client import ContextEngineClient
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from tests.fakes.gemini_server import GENERATE_CONTENT, default_summary_text, start_fake_gemini

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "python" / "demo" / "demo.py"
#: variables that would change which sidecar or summarizer the demo uses
CLEARED = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "CONTEXTENGINE_TARGET")
#: the demo's width for one event line (``LINE_CHARS``)
LINE_CHARS = 70


def _travel_script() -> ModuleType:
    """The demo's script data (``travel_script.py``), loaded from its file."""
    name = "demo_travel_script"
    spec = importlib.util.spec_from_file_location(name, DEMO.parent / "travel_script.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


SCRIPT = _travel_script().SCRIPT


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo must use the offline extractive summarizer here, whatever the machine has."""
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)


async def _run_demo(*args: str, env: Mapping[str, str] | None = None) -> str:
    """The demo's standard output; fails the test (with its stderr) unless it exits with 0."""
    environ = {key: value for key, value in os.environ.items() if key not in CLEARED}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(DEMO),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**environ, **(env or {})},
        cwd=ROOT,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=90)
    text = stdout.decode()
    assert process.returncode == 0, f"{text}\n{stderr.decode()}"
    return text


def _summaries(text: str) -> list[tuple[int, int, int]]:
    """(sequence, first replaced, last replaced) of every summary the demo reported."""
    found = re.findall(r"★ summary #(\d+) \(appended .*\): replaces events #(\d+)-#(\d+)", text)
    return [(int(seq), int(start), int(end)) for seq, start, end in found]


def _clipped(text: str) -> str:
    """``text`` as the demo's event lines show it (one line, at most ``LINE_CHARS``)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= LINE_CHARS else flat[: LINE_CHARS - 1] + "…"


def _check_output(text: str) -> None:
    assert "summarizer: extractive (offline)" in text
    summaries = _summaries(text)
    assert summaries, text
    # every summary's text is printed under it, and the contexts afterwards start with it
    assert "│ User requests:" in text
    # the header, the column line, then content 0: the summary, with the range it covers
    assert re.search(
        r"context for model call 1: \d+ contents.*\n.*\n +0  model  summary #\d+ +\d+  "
        r"User requests:.*\n +↳ covers events #\d+-#\d+, ",
        text,
    )
    last = summaries[-1][0]
    expansion = re.search(rf"ExpandSummary\(#{last}\): (\d+) raw events", text)
    assert expansion is not None, text
    assert int(expansion.group(1)) > 0
    assert re.search(r"\n    #\d+ +user +\| ", text)
    assert re.search(rf"compaction expand travel-demo traveller [0-9a-f-]{{36}} {last}\b", text)


async def test_sliding_window_demo_with_its_own_sidecar() -> None:
    text = await _run_demo("--own-sidecar", "--invocations", "8")
    _check_output(text)
    assert "server: contextengine serve on 127.0.0.1:" in text
    # interval 3, overlap 1: summaries after invocations 3 and 6, the second starting with
    # invocation 3 again (the overlap)
    summaries = _summaries(text)
    assert len(summaries) == 2
    (_, first_start, first_end), (_, second_start, _) = summaries
    assert first_start == 1
    assert first_start < second_start <= first_end
    expanded = text[text.index("ExpandSummary(") :]
    assert f"user         | {_clipped(SCRIPT[2].user)}" in expanded  # the overlapping invocation
    assert f"user         | {_clipped(SCRIPT[5].user)}" in expanded
    # one model call per tool round and per answer
    assert "8 invocations, 15 model calls, 2 summaries" in text


async def test_token_threshold_demo_with_its_own_sidecar() -> None:
    text = await _run_demo("--own-sidecar", "--mode", "token", "--invocations", "10")
    _check_output(text)
    summaries = _summaries(text)
    assert summaries
    # rolling summaries: the last one subsumes the earlier ones
    assert text.count("    subsumes #") == len(summaries) - 1
    assert "token threshold (token_threshold=" in text


async def test_demo_against_the_sidecar_in_contextengine_target(tmp_path: Path) -> None:
    async with start_local_server(str(tmp_path / "ce.db")) as server:
        text = await _run_demo(
            "--invocations",
            "7",
            "--inspector-url",
            "http://127.0.0.1:50152/inspector/",
            env={"CONTEXTENGINE_TARGET": server.target},
        )
        # the CLI command the demo printed shows the session's context
        printed = re.search(r"\n  contextengine (context .*)\n", text)
        assert printed is not None, text
        shown = await _run_cli(printed.group(1).split())
    assert f"server: {server.target}" in text
    _check_output(text)
    assert text.count("── invocation ") == 7
    assert f"--target {server.target}" in printed.group(1)
    assert re.search(r"\n +0  model  summary #\d+ ", shown), shown
    assert re.search(
        r"the session inspector: http://127\.0\.0\.1:50152/inspector/#app=travel-demo&"
        r"user=traveller&session=[0-9a-f-]{36}&agent=travel_agent\n",
        text,
    )


async def _run_cli(argv: list[str]) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "contextengine",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("CONTEXTENGINE_")},
        cwd=ROOT,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    return stdout.decode()


async def test_demo_rejects_contradictory_options() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(DEMO),
        "--own-sidecar",
        "--target",
        "127.0.0.1:1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 2
    assert "--target and --own-sidecar exclude each other" in stderr.decode()


async def test_demo_summarizes_with_gemini_when_a_key_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an API key the demo configures the Gemini summarizer: the summaries are the model's
    answers (here a local server speaking the Gemini REST API, reached by the real client)."""
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")  # the sidecar's own environment
    with start_fake_gemini() as gemini:
        settings = ServerSettings(gemini_base_url=gemini.base_url)
        async with start_local_server(str(tmp_path / "ce.db"), settings=settings) as server:
            text = await _run_demo(
                "--target",
                server.target,
                "--invocations",
                "7",
                "--gemini-model",
                "gemini-test-model",
                env={"GEMINI_API_KEY": "test-key"},
            )
            session = re.search(r"session ([0-9a-f-]{36}):", text)
            assert session is not None, text
            async with ContextEngineClient(server.target) as client:
                events = [
                    e
                    async for e in client.list_events("travel-demo", "traveller", session.group(1))
                ]
        requests = gemini.requests_for(GENERATE_CONTENT)
    assert "summarizer: gemini (gemini-test-model)" in text
    summaries = [e for e in events if e.actions.HasField("compaction")]
    assert len(_summaries(text)) == len(summaries) == 2  # after invocations 3 and 6
    assert len(requests) == 2
    assert all("gemini-test-model" in request.path for request in requests)
    for event, request in zip(summaries, requests, strict=True):
        summary = event.actions.compaction.compacted_content.parts[0].text
        assert summary == default_summary_text(request.prompt_text())
    assert SCRIPT[0].user in requests[0].prompt_text()
    assert "ExpandSummary(#" in text
