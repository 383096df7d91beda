"""The bare gRPC server the per-call benchmarks put beside the sidecar: no engine at all.

A ``grpc.aio`` server in its own process with one generic unary method, ``METHOD``, that answers
each request with the response bytes it was loaded with for exactly those request bytes (the
bytes the sidecar took and gave for the same call). What it spends per call is what any Python
gRPC server spends on those bytes on this machine: the floor the sidecar's CPU is divided by in
``append-floor``, ``context-floor`` and ``hotpaths``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from multiprocessing.connection import Connection

import grpc

__all__ = ["CHANNEL_OPTIONS", "METHOD", "FloorServer", "identity"]

#: the full method name the floor answers on
METHOD = "/bench.Floor/Answer"
#: messages of any size both ways (a full BuildContext answer at 50k events is ~10 MB)
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
_START_TIMEOUT_SECONDS = 30.0


def identity(data: bytes) -> bytes:
    """The (de)serializer of raw bytes."""
    return data


def _floor_process(conn: Connection) -> None:
    asyncio.run(_floor_serve(conn))


async def _floor_serve(conn: Connection) -> None:
    """Answers each request with the bytes it was given for it (``("load", {request:
    response})`` on ``conn`` replaces them); stops on ``"stop"``."""
    answers: dict[bytes, bytes] = {}

    async def answer(request: bytes, context: object) -> bytes:
        return answers[request]

    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "bench.Floor",
                {"Answer": grpc.unary_unary_rpc_method_handler(answer, identity, identity)},
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    conn.send(port)
    while True:
        message = await asyncio.to_thread(conn.recv)
        if message == "stop":
            break
        answers.clear()
        answers.update(message[1])
        conn.send("loaded")
    await server.stop(None)


class FloorServer:
    """The bare server's process (``async with``); :meth:`load` gives it the answers of the
    requests it will get next (replacing the previous ones)."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_floor_process, args=(child,), daemon=True)
        self.target = ""

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    async def __aenter__(self) -> FloorServer:
        self._process.start()
        if not await asyncio.to_thread(self._conn.poll, _START_TIMEOUT_SECONDS):
            raise RuntimeError("the bare gRPC server did not start")
        self.target = f"127.0.0.1:{self._conn.recv()}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._conn.send("stop")
        await asyncio.to_thread(self._process.join, 10.0)
        if self._process.is_alive():
            self._process.kill()

    async def load(self, answers: dict[bytes, bytes]) -> None:
        self._conn.send(("load", answers))
        if await asyncio.to_thread(self._conn.recv) != "loaded":
            raise RuntimeError("the bare gRPC server did not take its answers")
