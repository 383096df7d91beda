"""`contextengine serve --gemini-base-url ... --memory-fts off`: a sidecar process whose Gemini
summarizer talks to the fake Gemini server, end to end through the command line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from contextengine.v1 import compaction_service_pb2 as kpb, config_pb2, content_pb2, event_pb2
from tests.fakes.gemini_server import start_fake_gemini

pytestmark = pytest.mark.process


def _turn(author: str, invocation: str, text: str) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        author=author,
        invocation_id=invocation,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )


def _read(path: Path) -> str:
    return path.read_text(errors="replace").strip() if path.exists() else ""


def _spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)


async def _port(process: subprocess.Popen[bytes], port_file: Path, log: Path) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, _read(log)
        text = _read(port_file)
        if text.isdigit():
            return int(text)
        await asyncio.sleep(0.05)
    raise AssertionError(f"no port file:\n{_read(log)}")


async def test_serve_flags_reach_the_gemini_summarizer(tmp_path: Path) -> None:
    with start_fake_gemini() as fake:
        port_file, log = tmp_path / "port", tmp_path / "log"
        env = {**os.environ, "GEMINI_API_KEY": "test-key"}
        env.pop("GOOGLE_API_KEY", None)
        command = [
            sys.executable, "-m", "contextengine", "serve",
            "--db", str(tmp_path / "ce.db"), "--listen", "127.0.0.1:0",
            "--port-file", str(port_file), "--log-level", "WARNING",
            "--gemini-base-url", fake.base_url, "--memory-fts", "off",
        ]  # fmt: skip
        process = _spawn(command, env, log)
        try:
            target = f"127.0.0.1:{await _port(process, port_file, log)}"
            async with ContextEngineClient(target) as ce:
                await ce.wait_ready(10)
                await ce.update_app_config(
                    config_pb2.AppConfig(
                        app_name="app",
                        events_compaction_config=config_pb2.EventsCompactionConfig(
                            compaction_interval=1, overlap_size=0
                        ),
                        summarizer=config_pb2.SummarizerConfig(
                            gemini=config_pb2.GeminiSummarizerConfig(model="gemini-2.5-flash")
                        ),
                    )
                )
                session = await ce.create_session("app", "u")
                await ce.append_event("app", "u", session.id, _turn("user", "i1", "Hello there"))
                await ce.append_event("app", "u", session.id, _turn("agent", "i1", "Hi!"))
                done = await ce.compact(
                    "app", "u", session.id, trigger=kpb.COMPACTION_TRIGGER_SLIDING_WINDOW
                )
                assert done.skipped_reason == ""
                text = done.summary.actions.compaction.compacted_content.parts[0].text
                assert text.startswith("SUMMARY(")
                assert fake.requests[-1].headers.get("x-goog-api-key") == "test-key"
                assert "gemini-2.5-flash:generateContent" in fake.requests[-1].path
                # --memory-fts off: memory still answers (LIKE fallback).
                await ce.add_session_to_memory("app", "u", session.id)
                found = await ce.search_memory("app", "u", "hello")
                assert [m.content.parts[0].text for m in found.memories] == ["Hello there"]
        finally:
            process.terminate()
            process.wait(timeout=30)
