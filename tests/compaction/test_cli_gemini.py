"""`contextengine serve --gemini-base-url ... --memory-fts off`: a sidecar process whose Gemini
summarizer talks to the fake Gemini server, end to end through the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from contextengine.testing.sidecar import SidecarProcess
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


async def test_serve_flags_reach_the_gemini_summarizer(tmp_path: Path) -> None:
    with start_fake_gemini() as fake:
        serve = SidecarProcess(
            tmp_path,
            "ce",
            log_level="WARNING",
            args=["--gemini-base-url", fake.base_url, "--memory-fts", "off"],
            env={"GEMINI_API_KEY": "test-key", "GOOGLE_API_KEY": None},
        )
        async with serve, ContextEngineClient(serve.target) as ce:
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
