"""Subscribers that go away, in every way a client can, leave the sidecar serving.

The real ``contextengine serve`` runs as a child process on a SQLite file at its default log
level (one INFO line per RPC, the line that used to read ``context.peer()`` after the client had
cancelled: the call was already released, and the process died of SIGSEGV in about half of the
fresh servers within 20 cycles of the subscriptions guide's example). Each mode opens a
subscription on a fresh channel (as the guide's example does), waits for ``caught_up``, appends
an event, receives it and then goes away: it breaks out of the client's iterator, cancels the
call, closes the channel, lets its deadline expire, or is a child process that exits or is
killed. After every mode the server is alive, its health is SERVING, its log has no traceback,
and every acknowledged event is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from contextengine.client import ContextEngineClient
from contextengine.v1 import (
    subscription_service_pb2 as spb,
    subscription_service_pb2_grpc as spb_grpc,
)
from tests.service.helpers import text_event
from tests.support.sidecar import SERVING, Sidecar, running_sidecar

pytestmark = [pytest.mark.process, pytest.mark.slow]

#: cycles per mode; 20 reproduced the crash in every run of the in-process modes before the fix
CYCLES = int(os.environ.get("CE_CANCEL_CYCLES", "20"))
APP, USER, SESSION = "cancel", "u1", "s1"
TIMEOUT = 10.0
#: stored events replayed to every subscriber, each with ``PADDING`` as its text
BACKLOG = 3000
PADDING = "x" * 1000
#: the deadline of the deadline mode's calls (seconds)
DEADLINE = 0.3

Mode = Callable[[Sidecar, ContextEngineClient, str], Awaitable[None]]


def _request() -> spb.SubscribeEventsRequest:
    return spb.SubscribeEventsRequest(
        scope=spb.SUBSCRIPTION_SCOPE_SESSION,
        app_name=APP,
        user_id=USER,
        session_id=SESSION,
        max_events_per_frame=1,
    )


async def _append(writer: ContextEngineClient, event_id: str) -> None:
    response = await writer.append_event(
        APP, USER, SESSION, text_event(event_id, event_id=event_id)
    )
    assert response.stored


async def _first_event(
    call: grpc.aio.UnaryStreamCall[spb.SubscribeEventsRequest, spb.SubscribeEventsResponse],
) -> None:
    """Reads the stream until its first event (the replay goes on behind it)."""
    async with asyncio.timeout(TIMEOUT):
        # read(), not iteration: the deadline mode reads once more after this.
        while (frame := await call.read()) is not grpc.aio.EOF:
            assert isinstance(frame, spb.SubscribeEventsResponse)
            if frame.HasField("event"):
                return
    pytest.fail("the stream ended before its first event")


async def _read_to_the_end(
    call: grpc.aio.UnaryStreamCall[spb.SubscribeEventsRequest, spb.SubscribeEventsResponse],
) -> None:
    """Reads the stream until it ends: EOF, or the call's error raised."""
    async with asyncio.timeout(TIMEOUT):
        while await call.read() is not grpc.aio.EOF:
            pass


async def break_out(server: Sidecar, writer: ContextEngineClient, event_id: str) -> None:
    """The guide's example: break out of the client's iterator, then close the client."""
    async with (
        ContextEngineClient(server.target, attempts=1, timeout=TIMEOUT) as ce,
        contextlib.aclosing(ce.subscribe_events(APP, USER, SESSION)) as frames,
    ):
        async for frame in frames:
            if frame.HasField("event"):
                await _append(writer, event_id)
                break


async def cancel_call(server: Sidecar, writer: ContextEngineClient, event_id: str) -> None:
    async with grpc.aio.insecure_channel(server.target) as channel:
        call = spb_grpc.SubscriptionServiceStub(channel).SubscribeEvents(_request())
        await _first_event(call)
        await _append(writer, event_id)
        assert call.cancel()


async def close_channel(server: Sidecar, writer: ContextEngineClient, event_id: str) -> None:
    channel = grpc.aio.insecure_channel(server.target)
    call = spb_grpc.SubscriptionServiceStub(channel).SubscribeEvents(_request())
    await _first_event(call)
    await _append(writer, event_id)
    await channel.close()  # the call is still open


async def deadline(server: Sidecar, writer: ContextEngineClient, event_id: str) -> None:
    """The call's deadline expires while the server streams the replay to it."""
    async with grpc.aio.insecure_channel(server.target) as channel:
        call = spb_grpc.SubscriptionServiceStub(channel).SubscribeEvents(
            _request(), timeout=DEADLINE
        )
        try:
            await _first_event(call)
        except grpc.aio.AioRpcError as err:
            # A loaded machine: the deadline expired before the first event came (the server
            # was streaming the replay all the same, which is what this mode is about).
            if err.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
        await _append(writer, event_id)
        # Reads nothing more: the server is blocked on flow control when the deadline expires.
        await asyncio.sleep(DEADLINE)
        # Then the call ends with DEADLINE_EXCEEDED, never EOF; frames that reached this side
        # before the deadline's status was processed (a loaded machine) may be read first.
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await _read_to_the_end(call)
        assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


_CHILD = """
import os, sys
import grpc
from contextengine.v1 import subscription_service_pb2 as spb, subscription_service_pb2_grpc as g

target, app, user, session = sys.argv[1:]
channel = grpc.insecure_channel(target)
request = spb.SubscribeEventsRequest(
    scope=spb.SUBSCRIPTION_SCOPE_SESSION, app_name=app, user_id=user, session_id=session,
    max_events_per_frame=1,
)
for frame in g.SubscriptionServiceStub(channel).SubscribeEvents(request):
    if frame.HasField("event"):
        print("got", flush=True)
        sys.stdin.readline()  # until the parent says so (or kills this process)
        os._exit(0)  # no clean-up: the process just ends with the stream open
"""


def _spawn_child(target: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, target, APP, USER, SESSION],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


async def _child_process(
    server: Sidecar, writer: ContextEngineClient, event_id: str, *, kill: bool
) -> None:
    child = _spawn_child(server.target)
    try:
        assert child.stdout is not None
        assert await asyncio.to_thread(child.stdout.readline) == b"got\n"
        await _append(writer, event_id)
        if kill:
            child.send_signal(signal.SIGKILL)
        else:
            assert child.stdin is not None
            child.stdin.write(b"exit\n")
            child.stdin.flush()
    finally:
        if child.poll() is None:
            child.kill()
        await asyncio.to_thread(child.wait, 30)
        assert child.stdout is not None
        child.stdout.close()
        assert child.stdin is not None
        child.stdin.close()


async def child_exits(server: Sidecar, writer: ContextEngineClient, event_id: str) -> None:
    await _child_process(server, writer, event_id, kill=False)


async def child_killed(server: Sidecar, writer: ContextEngineClient, event_id: str) -> None:
    await _child_process(server, writer, event_id, kill=True)


async def _backlog(writer: ContextEngineClient) -> list[str]:
    """Enough stored events that a subscription from the start is still replaying (blocked on
    flow control, in the middle of a write) when its client goes away."""
    ids: list[str] = []
    for batch in range(BACKLOG // 500):
        events = [
            text_event(PADDING, event_id=f"backlog-{batch}-{n}", invocation_id=f"b{batch}")
            for n in range(500)
        ]
        await writer.append_events(APP, USER, SESSION, events)
        ids.extend(e.id for e in events)
    return ids


MODES: list[Mode] = [
    break_out,
    cancel_call,
    close_channel,
    deadline,
    child_exits,
    child_killed,
]


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.__name__)
async def test_subscribers_going_away_leave_the_sidecar_serving(tmp_path: Path, mode: Mode) -> None:
    cycles = CYCLES
    async with running_sidecar(tmp_path, tmp_path / "ce.db", mode.__name__) as server:
        async with ContextEngineClient(server.target, attempts=1, timeout=TIMEOUT) as writer:
            await writer.create_session(APP, USER, SESSION)
            acknowledged = await _backlog(writer)
            for n in range(cycles):
                event_id = f"{mode.__name__}-{n}"
                try:
                    await mode(server, writer, event_id)
                except Exception:
                    server.check_alive(f"{mode.__name__}, cycle {n}")  # the likelier story
                    raise
                acknowledged.append(event_id)
                # Give the server the moment in which it used to crash.
                await asyncio.sleep(0.02)
                server.check_alive(f"{mode.__name__}, cycle {n}")
            await asyncio.sleep(0.3)
            server.check_alive(f"{mode.__name__}, after {cycles} cycles")
            assert await server.health() == SERVING
            stored = [e.id async for e in writer.list_events(APP, USER, SESSION, page_size=1000)]
            assert stored == acknowledged
        assert await server.stop() == 0, server.log()
    log = server.log()
    assert "Traceback" not in log, log[-6000:]
    assert "code=CANCELLED" in log or mode is deadline, "the per-RPC log line is missing"
