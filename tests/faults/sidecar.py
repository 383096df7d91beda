"""The real sidecar as a child process, for the out-of-process fault tests.

``python -X faulthandler -m contextengine serve`` on a SQLite file, on a free port, at the
default log level (INFO: one log line per RPC, as ``make run`` does) unless a test passes other
flags. faulthandler only prints a Python trace into the log if the process dies of a signal.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from bench.proc import resident_kib
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contextengine.client import ContextEngineClient

START_TIMEOUT = 30.0

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Sidecar:
    """``contextengine serve`` on ``db`` as a child process; ``args`` are extra flags."""

    def __init__(
        self,
        workdir: Path,
        db: Path | str,
        name: str,
        args: Sequence[str] = (),
        *,
        cwd: Path | None = None,
    ) -> None:
        """``db``: a SQLite file or a ``postgresql://`` URL; ``cwd``: the process's working
        directory (``db`` may be relative to it)."""
        self.db = db
        self.cwd = cwd
        self.port_file = workdir / f"{name}.port"
        self.log_file = workdir / f"{name}.log"
        self.args = tuple(args)
        self.target = ""
        self._process: subprocess.Popen[bytes] | None = None

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [
            sys.executable,
            "-X",
            "faulthandler",
            "-m",
            "contextengine",
            "serve",
            "--db",
            str(self.db),
            "--listen",
            "127.0.0.1:0",
            "--port-file",
            str(self.port_file.absolute()),
            *self.args,
        ]
        with self.log_file.open("wb") as log:
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
            )

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def exit_status(self) -> int | None:
        """None while the process runs (or was never started)."""
        return None if self._process is None else self._process.poll()

    def check_alive(self, context: str = "") -> None:
        """Fails the test, with the log, if the process has exited."""
        status = self.exit_status()
        if status is not None:
            pytest.fail(f"{context}: the sidecar exited with {status}:\n{self.log()[-6000:]}")

    def rss_kb(self, field: str = "VmRSS") -> int:
        """The process's resident memory (``VmRSS``) or its peak (``VmHWM``), in kB."""
        return resident_kib(self.pid, field)

    async def start(self) -> None:
        """Starts the process and waits until it answers health checks with SERVING."""
        self.port_file.unlink(missing_ok=True)
        self._process = self._spawn()
        deadline = time.monotonic() + START_TIMEOUT
        text = ""
        while not text.isdigit():
            if self._process.poll() is not None:
                pytest.fail(f"the sidecar exited with {self._process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no port file after {START_TIMEOUT} s:\n{self.log()}")
            await asyncio.sleep(0.02)
            text = self.port_file.read_text().strip() if self.port_file.exists() else ""
        self.target = f"127.0.0.1:{int(text)}"
        async with ContextEngineClient(self.target, attempts=1) as client:
            await client.wait_ready(START_TIMEOUT)
        assert await self.health() == SERVING

    async def run_to_exit(self, seconds: float = START_TIMEOUT) -> int:
        """Starts the process and waits for it to exit by itself (a refused start); its status."""
        self._process = self._spawn()
        try:
            return await asyncio.to_thread(self._process.wait, seconds)
        finally:
            await self.kill()

    async def health(
        self, service: str = ""
    ) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
        async with ContextEngineClient(self.target, attempts=1) as client:
            stub = health_pb2_grpc.HealthStub(client.channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5.0)
            return reply.status

    async def kill(self) -> None:
        """SIGKILL, then reap the process."""
        process = self._process
        if process is None:
            return
        self._process = None
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(process.wait, 30)

    async def stop(self) -> int:
        """SIGTERM (a graceful shutdown) and the exit status; SIGKILL after 20 s."""
        process = self._process
        assert process is not None
        self._process = None
        process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(process.wait, 20)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait, 30)
            raise


@asynccontextmanager
async def running_sidecar(
    workdir: Path, db: Path | str, name: str, args: Sequence[str] = ()
) -> AsyncIterator[Sidecar]:
    """A started sidecar that is killed on the way out unless it was stopped before."""
    server = Sidecar(workdir, db, name, args)
    try:
        await server.start()
        yield server
    finally:
        await server.kill()
