"""Drive google-adk 2.13's memory services on the same events as the engine."""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.events.event import Event
from google.adk.memory import InMemoryMemoryService, SqliteMemoryService
from google.adk.sessions.session import Session
from google.genai import types
from google.protobuf import json_format

from contextengine.v1 import event_pb2

APP = "app"
USER = "alice"


def adk_event(
    event_id: str,
    text: str,
    *,
    author: str = "user",
    timestamp: float = 1_000.0,
    invocation_id: str = "inv-1",
    thought: str = "",
) -> Event:
    parts = []
    if thought:
        parts.append(types.Part(text=thought, thought=True))
    if text:
        parts.append(types.Part(text=text))
    return Event(
        id=event_id,
        author=author,
        invocation_id=invocation_id,
        timestamp=timestamp,
        content=types.Content(role="user" if author == "user" else "model", parts=parts),
    )


def to_proto(events: Sequence[Event]) -> list[event_pb2.Event]:
    """ADK events as recorded by the engine (sequences 1, 2, 3, ...)."""
    out = []
    for sequence, event in enumerate(events, start=1):
        message = json_format.Parse(event.model_dump_json(exclude_none=True), event_pb2.Event())
        message.sequence = sequence
        out.append(message)
    return out


def session(session_id: str, events: Sequence[Event]) -> Session:
    return Session(id=session_id, app_name=APP, user_id=USER, events=list(events))


async def in_memory_ids(
    sessions: Sequence[Session], queries: Sequence[str]
) -> dict[str, list[str]]:
    """Per query, the event ids ADK's InMemoryMemoryService returns, in its order (its limit of
    ten lifted by the caller)."""
    service = InMemoryMemoryService()
    for item in sessions:
        await service.add_session_to_memory(item)
    out: dict[str, list[str]] = {}
    for query in queries:
        response = await service.search_memory(app_name=APP, user_id=USER, query=query)
        out[query] = [str(memory.id) for memory in response.memories]
    return out


async def sqlite_ids(
    db_path: str, sessions: Sequence[Session], queries: Sequence[str]
) -> dict[str, list[str]]:
    """Per query, the event ids ADK's SqliteMemoryService (FTS5) returns, in its order."""
    service = SqliteMemoryService(db_path, fts="on", max_results=1000)
    try:
        for item in sessions:
            await service.add_session_to_memory(item)
        out: dict[str, list[str]] = {}
        for query in queries:
            response = await service.search_memory(app_name=APP, user_id=USER, query=query)
            out[query] = [str(memory.custom_metadata["event_id"]) for memory in response.memories]
        return out
    finally:
        await service.close()
