"""How much a stalled subscriber costs the sidecar: ``python -m tests.subscriptions.stalled_rss``.

Not a test (it takes a while and measures a whole process): starts ``contextengine serve`` as a
child process on a temporary SQLite file, opens one subscriber that reads the ``caught_up`` frame
and then nothing more (a small HTTP/2 window, so the sidecar cannot push much into the socket),
appends ``--events`` events of ``--mib`` MiB each, and prints the sidecar's resident memory
(``VmRSS``, and the peak ``VmHWM``, from ``/proc``) as it goes. Then the stalled subscriber reads
what was in flight and its status (SUBSCRIBER_LAGGED once over its budget), and a new subscriber
resumes from the cursor in it: the script checks that every event arrives exactly once.
Extra arguments after ``--`` go to ``serve`` (``-- --subscriber-buffer-bytes 8388608``);
``--no-subscriber`` measures the appends alone.

Measured on the 2-core development machine, 300 appends of 1 MiB (sidecar at 117 MiB before):
no subscriber, 144 MiB after; one stalled subscriber with the 32 MiB budget, 178 MiB (and
SUBSCRIBER_LAGGED, then a resume with every event exactly once); with an 8 MiB budget, 156 MiB;
before there was a byte budget, 444 MiB, and the subscriber was never cut off.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import grpc

from contextengine.client import ContextEngineClient
from contextengine.testing.sidecar import SidecarProcess
from contextengine.v1 import (
    content_pb2,
    event_pb2,
    subscription_service_pb2 as spb,
    subscription_service_pb2_grpc,
)

MIB = 1024 * 1024
#: the subscriber's channel: no window growth, so the sidecar cannot push megabytes ahead
SMALL_WINDOW = (("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16384))
APP, USER, SESSION = "rss", "u", "s"


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def _memory(pid: int) -> str:
    return (
        f"VmRSS {_status_kib(pid, 'VmRSS') / 1024:7.1f} MiB"
        f"  VmHWM {_status_kib(pid, 'VmHWM') / 1024:7.1f} MiB"
    )


def _event(n: int, size: int) -> event_pb2.Event:
    text = f"{n:06d}" + "x" * (size - 6)
    return event_pb2.Event(
        id=f"e{n}",
        author="user",
        content=content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)]),
    )


def _sequences(frames: list[spb.SubscribeEventsResponse]) -> list[int]:
    out: list[int] = []
    for frame in frames:
        if frame.HasField("event"):
            out.append(frame.event.event.sequence)
        elif frame.HasField("events"):
            out.extend(e.event.sequence for e in frame.events.events)
    return out


async def _measure(target: str, pid: int, events: int, size: int, stall: bool) -> int:
    async with (
        ContextEngineClient(target, attempts=1) as writer,
        grpc.aio.insecure_channel(target, options=SMALL_WINDOW) as channel,
    ):
        await writer.create_session(APP, USER, SESSION)
        stub = subscription_service_pb2_grpc.SubscriptionServiceStub(channel)
        stalled = stub.SubscribeEvents(
            spb.SubscribeEventsRequest(app_name=APP, user_id=USER, session_id=SESSION)
        )
        if stall:
            first = await stalled.read()
            assert isinstance(first, spb.SubscribeEventsResponse)
            assert first.HasField("caught_up")
        else:
            stalled.cancel()
        print(f"before the appends         {_memory(pid)}", flush=True)
        started = time.perf_counter()
        for n in range(1, events + 1):
            await writer.append_event(APP, USER, SESSION, _event(n, size))
            if n % 50 == 0 or n == events:
                print(f"after {n:4d} appends of {size / MIB:g} MiB {_memory(pid)}", flush=True)
        print(f"appends took {time.perf_counter() - started:.1f} s")
        await asyncio.sleep(1.0)
        print(f"one second later           {_memory(pid)}", flush=True)
        if not stall:
            return 0

        # The stalled subscriber reads again: what was in flight, then its status.
        frames: list[spb.SubscribeEventsResponse] = []
        status = "the stream is still open"
        try:
            async with asyncio.timeout(60):
                while True:
                    frame = await stalled.read()
                    if frame is grpc.aio.EOF:
                        status = "ended without a status"
                        break
                    assert isinstance(frame, spb.SubscribeEventsResponse)
                    frames.append(frame)
                    if len(_sequences(frames)) == events:
                        status = "got every event (never cut off)"
                        stalled.cancel()
                        break
        except grpc.aio.AioRpcError as error:
            status = f"{error.code().name}: {error.details()}"
        received = _sequences(frames)
        print(f"stalled subscriber: {len(received)} events, then {status}")
        cursor = str(received[-1]) if received else "0"
        rest: list[int] = []
        if len(received) < events:
            resumed = writer.subscribe_events(APP, USER, SESSION, cursor=cursor)
            async with contextlib.aclosing(resumed) as stream:
                async for frame in stream:
                    if frame.HasField("caught_up"):
                        break
                    rest.extend(_sequences([frame]))
        everything = received + rest
        exactly_once = everything == list(range(1, events + 1))
        print(f"resumed from cursor {cursor}: {len(rest)} events; exactly once: {exactly_once}")
        print(f"at the end                 {_memory(pid)}", flush=True)
        return 0 if exactly_once else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--mib", type=float, default=1.0, help="size of one event's text")
    parser.add_argument(
        "--no-subscriber", action="store_true", help="the appends alone, for comparison"
    )
    parser.add_argument("serve_args", nargs="*", help="after --: extra `serve` flags")
    args = parser.parse_args(argv)
    size = int(args.mib * MIB)
    return asyncio.run(_run(args.serve_args, args.events, size, stall=not args.no_subscriber))


async def _run(serve_args: list[str], events: int, size: int, *, stall: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="ce-rss-") as tmp:
        server = SidecarProcess(
            Path(tmp), "ce", log_level="WARNING", args=serve_args, start_timeout=60
        )
        print(" ".join(server.command()[1:]))
        try:
            await server.start()
        except (RuntimeError, TimeoutError) as failed:
            print(f"the server did not start: {failed}", file=sys.stderr)
            return 1
        try:
            return await _measure(server.target, server.pid, events, size, stall)
        finally:
            await server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
