"""``contextengine demo`` runs offline and shows compaction at work: summaries appear in the
contexts it prints and the last one is expanded back into the events it replaced."""

from __future__ import annotations

import asyncio
import io
import os
import re
import sys
from pathlib import Path

import pytest

from contextengine.demo import SCRIPT, run_demo
from contextengine.server import ServerSettings
from contextengine.testing import start_local_server
from tests.fakes.gemini_server import GENERATE_CONTENT, default_summary_text, start_fake_gemini

API_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo must use the offline extractive summarizer here, whatever the machine has."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)


def _check_output(text: str) -> None:
    assert "summarizer: extractive (offline)" in text
    summaries = re.findall(r"★ summary #(\d+) appended .*: replaces events #(\d+)-#(\d+)", text)
    assert summaries, text
    # every summary's text is printed under it, and the contexts afterwards start with it
    assert "│ User requests:" in text
    assert re.search(r"context for model call 1: \d+ contents.*\n    model \| User requests:", text)
    last = summaries[-1][0]
    expansion = re.search(rf"ExpandSummary\(#{last}\): (\d+) raw events", text)
    assert expansion is not None, text
    assert int(expansion.group(1)) > 0
    assert re.search(r"\n    #\d+ +user +\| ", text)


async def test_sliding_window_demo_in_process() -> None:
    out = io.StringIO()
    result = await run_demo(None, invocations=8, mode="sliding", out=out, environ={})
    text = out.getvalue()
    _check_output(text)
    # interval 3, overlap 1: summaries after invocations 3 and 6, the second starting with
    # invocation 3 again (the overlap)
    assert len(result.summaries) == 2
    first, second = (event.actions.compaction for event in result.summaries)
    assert first.start_sequence == 1
    assert first.start_sequence < second.start_sequence <= first.end_sequence
    assert result.expansion is not None
    expanded_texts = [part.text for e in result.expansion.events for part in e.content.parts]
    assert SCRIPT[2].user in expanded_texts  # the overlapping invocation
    assert SCRIPT[5].user in expanded_texts
    assert len(result.context_tokens) == 15  # one model call per tool round and per answer


async def test_token_threshold_demo_in_process() -> None:
    out = io.StringIO()
    result = await run_demo(None, invocations=10, mode="token", out=out, environ={})
    text = out.getvalue()
    _check_output(text)
    assert result.summaries
    assert result.expansion is not None
    # rolling summaries: the last one subsumes the earlier ones
    assert len(result.expansion.subsumed_summaries) == len(result.summaries) - 1
    assert "token threshold (token_threshold=" in text


async def test_demo_command_against_a_running_server(tmp_path: Path) -> None:
    async with start_local_server(str(tmp_path / "ce.db")) as server:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "contextengine",
            "demo",
            "--target",
            server.target,
            "--invocations",
            "7",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={key: value for key, value in os.environ.items() if key not in API_KEYS},
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    text = stdout.decode()
    assert process.returncode == 0, f"{text}\n{stderr.decode()}"
    assert f"server: {server.target}" in text
    _check_output(text)
    assert text.count("── invocation ") == 7


async def test_demo_summarizes_with_gemini_when_a_key_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an API key the demo configures the Gemini summarizer: the summaries are the model's
    answers (here a local server speaking the Gemini REST API, reached by the real client)."""
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")  # the sidecar's own environment
    with start_fake_gemini() as gemini:
        settings = ServerSettings(gemini_base_url=gemini.base_url)
        async with start_local_server(str(tmp_path / "ce.db"), settings=settings) as server:
            out = io.StringIO()
            result = await run_demo(
                server.target,
                invocations=7,
                mode="sliding",
                gemini_model="gemini-test-model",
                out=out,
                environ={"GEMINI_API_KEY": "test-key"},
            )
        requests = gemini.requests_for(GENERATE_CONTENT)
    text = out.getvalue()
    assert "summarizer: gemini (gemini-test-model)" in text
    assert len(result.summaries) == 2  # after invocations 3 and 6
    assert len(requests) == 2
    assert all("gemini-test-model" in request.path for request in requests)
    for event, request in zip(result.summaries, requests, strict=True):
        summary = event.actions.compaction.compacted_content.parts[0].text
        assert summary == default_summary_text(request.prompt_text())
    assert SCRIPT[0].user in requests[0].prompt_text()
    assert result.expansion is not None
