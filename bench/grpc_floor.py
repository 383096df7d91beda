"""What gRPC itself costs this machine for the subscription workload: no engine at all.

A bare ``grpc.aio`` server (its own process, one generic unary-stream method, no store, no
encoding: the same bytes every time) keeps ``streams`` server streams open to a bare ``grpc.aio``
client (this process, ``channels`` channels, reading with ``call.read()`` and doing nothing else),
and sends each stream one message of ``message_bytes`` every ``period`` seconds, every stream at
the same instants (``spread`` False: the cheapest schedule, as gRPC then writes and completes
many messages per turn of the event loop), or each stream at its own offset within the period
(``spread`` True: stream ``k`` of ``n`` at ``k / n`` of it, the schedule of a fan-out that serves
subscribers one after the other). The CPU both processes use per message is the floor of any
Python gRPC fan-out on this machine: the sidecar's subscription service, a real client, the store
and the writer all come on top.

``subscribe`` uses it to show the budget of the issue's targets: a p99 under 20 ms needs every
subscriber to get a message at least every ~15-20 ms, i.e. ``subscribers / period`` messages a
second, while the writer alone (sidecar + writer process) already takes a share of the cores.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import grpc

from bench.answer_floor import identity
from contextengine.testing import proc

_METHOD = "/bench.Floor/Stream"
_START_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Floor:
    """One run: messages received and the CPU seconds each side used for them."""

    streams: int
    period: float
    message_bytes: int
    spread: bool
    messages: int
    seconds: float
    server_cpu_seconds: float
    client_cpu_seconds: float

    @property
    def messages_per_second(self) -> float:
        return self.messages / self.seconds

    @property
    def cores(self) -> float:
        """CPU cores both sides kept busy, on average."""
        return (self.server_cpu_seconds + self.client_cpu_seconds) / self.seconds


def _ticks(period: float, seconds: float) -> int:
    """How many messages each stream gets: one at 0, period, 2 period, ... before ``seconds``."""
    ticks = 0
    while ticks * period < seconds:
        ticks += 1
    return ticks


def _server_process(
    conn: Connection, period: float, seconds: float, size: int, streams: int, spread: bool
) -> None:
    asyncio.run(_serve(conn, period, seconds, size, streams, spread))


async def _serve(
    conn: Connection, period: float, seconds: float, size: int, streams: int, spread: bool
) -> None:
    payload = b"x" * size
    loop = asyncio.get_running_loop()
    #: the first tick, shared by every stream (set by the first stream to open, plus a margin
    #: for the others to open)
    epoch: list[float] = []
    opened = 0

    async def stream(request: bytes, context: object) -> object:
        nonlocal opened
        if not epoch:
            epoch.append(loop.time() + 0.5)
        start = epoch[0]
        if spread:
            start += (opened % streams) / streams * period
        opened += 1
        ticks = _ticks(period, seconds)
        tick = 0
        while tick < ticks:
            delay = start + tick * period - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield payload
            tick += 1

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "bench.Floor",
                {"Stream": grpc.unary_stream_rpc_method_handler(stream, identity, identity)},
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    conn.send(port)
    await asyncio.to_thread(conn.recv)  # told to stop
    await server.stop(None)


async def measure(
    *,
    streams: int,
    channels: int,
    period: float,
    seconds: float,
    message_bytes: int,
    spread: bool = False,
) -> Floor | None:
    """One run (None where ``/proc`` is missing: the CPU times are the point)."""
    if not proc.AVAILABLE:
        return None
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(
        target=_server_process,
        args=(child, period, seconds, message_bytes, streams, spread),
        daemon=True,
    )
    process.start()
    try:
        if not await asyncio.to_thread(parent.poll, _START_TIMEOUT_SECONDS):
            raise RuntimeError("the bare gRPC server did not start")
        port = parent.recv()
        assert process.pid is not None
        opened = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(channels)]
        try:
            for channel in opened:
                await channel.channel_ready()

            async def follow(k: int) -> int:
                read = opened[k % channels].unary_stream(
                    _METHOD, request_serializer=identity, response_deserializer=identity
                )(b"")
                received = 0
                while await read.read() is not grpc.aio.EOF:
                    received += 1
                return received

            server_before = proc.cpu_seconds(process.pid)
            client_before = time.process_time()
            counts = await asyncio.gather(*(follow(k) for k in range(streams)))
            server_cpu = proc.cpu_seconds(process.pid) - server_before
            client_cpu = time.process_time() - client_before
        finally:
            for channel in opened:
                await channel.close()
        parent.send("stop")
    finally:
        await asyncio.to_thread(process.join, 10.0)
        if process.is_alive():
            process.kill()
    # The schedule's span: the streams open and idle until the first tick, which costs next to
    # nothing, so the CPU per second is the schedule's.
    return Floor(
        streams,
        period,
        message_bytes,
        spread,
        sum(counts),
        _ticks(period, seconds) * period,
        server_cpu,
        client_cpu,
    )
