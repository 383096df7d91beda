"""The Python client's retry rule, shared with the TypeScript and Java clients: one deadline covers
the whole call, retries and backoff included; only UNAVAILABLE is retried, and only for safe calls."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.testing import start_local_server

pytestmark = pytest.mark.service

TIMEOUT = 0.6


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
async def silent_target() -> AsyncIterator[str]:
    """A TCP server that accepts connections and never says a word."""
    writers: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()


async def test_a_down_sidecar_fails_within_the_deadline_however_many_attempts() -> None:
    async with ContextEngineClient(
        f"127.0.0.1:{_closed_port()}", attempts=1000, timeout=TIMEOUT
    ) as client:
        start = time.monotonic()
        with pytest.raises(ContextEngineError) as raised:
            await client.get_session("app", "u", "s")
        took = time.monotonic() - start
    assert raised.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert took < TIMEOUT + 0.3, f"took {took:.2f} s"


async def test_a_hung_sidecar_is_not_retried_past_the_deadline(silent_target: str) -> None:
    async with ContextEngineClient(silent_target, attempts=4, timeout=TIMEOUT) as client:
        start = time.monotonic()
        with pytest.raises(ContextEngineError) as raised:
            await client.get_session("app", "u", "s")
        took = time.monotonic() - start
    assert raised.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert took < TIMEOUT + 0.3, f"took {took:.2f} s"


async def test_a_server_error_is_never_retried() -> None:
    async with (
        start_local_server() as server,
        ContextEngineClient(server.target, attempts=4, timeout=TIMEOUT) as client,
    ):
        with pytest.raises(ContextEngineError) as raised:
            await client.get_session("app", "u", "missing")
    assert raised.value.reason == "SESSION_NOT_FOUND"


async def test_a_compaction_deadline_overrides_the_clients() -> None:
    async with ContextEngineClient(
        f"127.0.0.1:{_closed_port()}", attempts=1000, timeout=30.0
    ) as client:
        start = time.monotonic()
        with pytest.raises(ContextEngineError):
            await client.compact("app", "u", "s", deadline_seconds=TIMEOUT)
    assert time.monotonic() - start < TIMEOUT + 0.3
