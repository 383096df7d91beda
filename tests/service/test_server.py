"""Health, reflection, unix sockets and graceful shutdown of the sidecar."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from contextengine.client import ContextEngineClient
from contextengine.testing import start_local_server
from tests.service.helpers import text_event

pytestmark = pytest.mark.service


async def test_health_serving_then_not_serving() -> None:
    async with (
        start_local_server() as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "contextengine.v1.SessionService"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
        first = await watch.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        stopping = asyncio.create_task(server.stop(grace=1.0))
        second = await watch.read()
        assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()
        await stopping


async def test_reflection_lists_services() -> None:
    async with (
        start_local_server() as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)

        async def requests() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
            yield reflection_pb2.ServerReflectionRequest(list_services="")

        names: list[str] = []
        async for reply in stub.ServerReflectionInfo(requests()):
            names = [s.name for s in reply.list_services_response.service]
        assert "contextengine.v1.SessionService" in names
        assert "grpc.health.v1.Health" in names


async def test_unix_socket(tmp_path: Path) -> None:
    sock = tmp_path / "ce.sock"
    async with start_local_server(listen=f"unix:{sock}") as server:
        assert server.target == f"unix:{sock}"
        async with ContextEngineClient(server.target) as client:
            session = await client.create_session("app", "u", "s")
            await client.append_event("app", "u", session.id, text_event("over a socket"))
            fetched = await client.get_session("app", "u", "s")
            assert fetched.events[0].content.parts[0].text == "over a socket"


async def test_in_flight_appends_finish_during_graceful_shutdown(tmp_path: Path) -> None:
    db = str(tmp_path / "ce.db")
    acked: list[str] = []
    async with start_local_server(db) as server:
        client = ContextEngineClient(server.target, attempts=1)
        await client.create_session("app", "u", "s")

        async def append(i: int) -> None:
            try:
                await client.append_event("app", "u", "s", text_event(f"m{i}", event_id=f"e{i}"))
                acked.append(f"e{i}")
            except Exception:  # refused during shutdown is fine; a lost ack is not
                return

        tasks = [asyncio.create_task(append(i)) for i in range(200)]
        await asyncio.sleep(0.01)
        await server.stop(grace=5.0)
        await asyncio.gather(*tasks)
        await client.close()
    assert acked, "some appends should have been acknowledged before shutdown"
    async with start_local_server(db) as server, ContextEngineClient(server.target) as client:
        events = [e.id async for e in client.list_events("app", "u", "s", page_size=1000)]
    assert set(acked) <= set(events)
    assert len(events) == len(set(events))
