"""One sidecar for the console tests (a real ``contextengine serve``, out of process), seeded
once with an app configuration and three sessions whose events have fixed ids and times."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import struct_pb2

from contextengine.client import ContextEngineClient
from contextengine.v1 import compaction_service_pb2 as kpb, config_pb2, content_pb2, event_pb2
from tests.console.helpers import T0, Sidecar, sidecar

APP = "shop"
USER = "ana"
AGENT = "planner"
#: the session left as it was written, the one compacted (events 1-6 summarized), and one the
#: tests may change
PLAIN, COMPACTED, SCRATCH = "plain", "compacted", "scratch"


def _struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


def _event(
    session: str, index: int, author: str, invocation: str, *parts: content_pb2.Part, role: str
) -> event_pb2.Event:
    return event_pb2.Event(
        id=f"{session}-e{index}",
        timestamp=T0 + index,
        author=author,
        invocation_id=invocation,
        content=content_pb2.Content(role=role, parts=list(parts)),
    )


def script(session: str) -> list[event_pb2.Event]:
    """Two agents and a user over three invocations: text, a tool call and its response, a
    thought, inline data, another agent's reply, a state change."""
    text = content_pb2.Part
    call = content_pb2.Part(
        function_call=content_pb2.FunctionCall(
            id="c1", name="search_flights", args=_struct({"to": "FCO", "passengers": 2})
        )
    )
    response = content_pb2.Part(
        function_response=content_pb2.FunctionResponse(
            id="c1", name="search_flights", response=_struct({"flights": ["AZ123", "FR9"]})
        )
    )
    photo = content_pb2.Part(
        inline_data=content_pb2.Blob(mime_type="image/png", data=b"\x89PNG" * 8)
    )
    events = [
        _event(session, 1, "user", "inv-1", text(text="Find me a flight to Rome."), role="user"),
        _event(session, 2, AGENT, "inv-1", call, role="model"),
        _event(session, 3, AGENT, "inv-1", response, role="user"),
        _event(
            session,
            4,
            AGENT,
            "inv-1",
            text(text="Rome has two airports; FCO is closer.", thought=True),
            text(text="Two flights to Rome: AZ123 and FR9."),
            role="model",
        ),
        _event(session, 5, "user", "inv-2", text(text="Book AZ123."), photo, role="user"),
        _event(session, 6, "booker", "inv-2", text(text="Booked AZ123, seat 12A."), role="model"),
        _event(
            session,
            7,
            "user",
            "inv-3",
            text(text="Thanks! Any hotel near the Pantheon?"),
            role="user",
        ),
    ]
    events[6].actions.state_delta.update({"trip": "Rome"})
    return events


async def _seed(target: str) -> None:
    async with ContextEngineClient(target) as client:
        await client.wait_ready(20.0)
        await client.update_app_config(
            config_pb2.AppConfig(
                app_name=APP,
                events_compaction_config=config_pb2.EventsCompactionConfig(
                    compaction_interval=2, overlap_size=0
                ),
                summarizer=config_pb2.SummarizerConfig(
                    extractive=config_pb2.ExtractiveSummarizerConfig()
                ),
                context_cache_config=config_pb2.ContextCacheConfig(
                    cache_intervals=10, min_tokens=0
                ),
            )
        )
        for session in (PLAIN, COMPACTED, SCRATCH):
            await client.create_session(APP, USER, session, state={"tier": "gold"})
        for session in (PLAIN, SCRATCH):
            await client.append_events(APP, USER, session, script(session))
        # the first two invocations summarized (summary #7), then the third one
        *first, third = script(COMPACTED)
        await client.append_events(APP, USER, COMPACTED, first)
        done = await client.compact(
            APP, USER, COMPACTED, trigger=kpb.COMPACTION_TRIGGER_SLIDING_WINDOW
        )
        assert done.HasField("summary"), done.skipped_reason
        await client.append_events(APP, USER, COMPACTED, [third])
        await client.add_session_to_memory(APP, USER, PLAIN)


@pytest.fixture(scope="session")
def console_sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    tmp: Path = tmp_path_factory.mktemp("console")
    with sidecar(tmp) as running:
        asyncio.run(_seed(running.target))
        yield running
