"""EndInvocation ingests the session into memory when the app asks for it."""

from __future__ import annotations

import asyncio

import pytest

from contextengine.client import ContextEngineClient
from contextengine.testing import start_local_server
from contextengine.v1 import config_pb2, content_pb2, event_pb2

pytestmark = pytest.mark.service


def _turn(author: str, text: str) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        author=author,
        invocation_id="inv1",
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )


async def _search_until_found(ce: ContextEngineClient, query: str) -> int:
    async with asyncio.timeout(10):
        while True:
            found = await ce.search_memory("app", "u", query)
            if found.memories:
                return len(found.memories)
            await asyncio.sleep(0.02)


async def test_end_invocation_ingests_when_enabled() -> None:
    async with start_local_server() as server, ContextEngineClient(server.target) as ce:
        await ce.update_app_config(
            config_pb2.AppConfig(
                app_name="app", memory=config_pb2.MemoryConfig(ingest_on_end_invocation=True)
            )
        )
        session = await ce.create_session("app", "u")
        await ce.append_event("app", "u", session.id, _turn("user", "My cat is called Mochi."))
        await ce.append_event("app", "u", session.id, _turn("agent", "Noted: Mochi the cat."))
        assert (await ce.search_memory("app", "u", "Mochi")).memories == []
        await ce.end_invocation("app", "u", session.id, "inv1")
        assert await _search_until_found(ce, "Mochi") == 2


async def test_end_invocation_does_not_ingest_by_default() -> None:
    async with start_local_server() as server, ContextEngineClient(server.target) as ce:
        session = await ce.create_session("app", "u")
        await ce.append_event("app", "u", session.id, _turn("user", "My cat is called Mochi."))
        await ce.end_invocation("app", "u", session.id, "inv1")
        await asyncio.sleep(0.2)
        assert (await ce.search_memory("app", "u", "Mochi")).memories == []
