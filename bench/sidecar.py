"""The sidecar under benchmark: ``python -m contextengine serve`` as a child process.

The benchmarks measure the engine as it is deployed, a separate process reached over gRPC on
loopback, so that what it costs (its CPU time, from ``/proc``) is told apart from what the
benchmark process itself spends.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import pstats
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Literal

from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench import proc
from contextengine.client import ContextEngineClient

Durability = Literal["normal", "full"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]

#: the kinds of threads ``Sidecar.thread_cpu_seconds`` adds up, in this order
THREAD_KINDS = ("event loop", "other Python threads", "gRPC core threads")


@dataclass(eq=False)
class Sidecar:
    """``python -m contextengine serve`` as a child process on one SQLite database, listening on a
    free loopback port; restartable (``stop``, then ``start`` again on the same database).

    In ``workdir``: the database ``<name>.db`` and the port file ``<name>.port``; per start (the
    n-th, counted in ``starts``) the process's output ``<name>-<n>.log`` and, with ``profile``,
    its cProfile output ``<name>-<n>.prof`` (listed in ``profiles``; cProfile writes it when the
    process stops gracefully). ``async with`` starts it and stops it.
    """

    workdir: Path
    name: str
    _: KW_ONLY
    #: passed as ``--log-level`` (INFO logs one line per call, with its handler time)
    log_level: LogLevel = "WARNING"
    #: passed as ``--durability``; None: not passed (the sidecar's default)
    durability: Durability | None = None
    #: run it under ``python -m cProfile``
    profile: bool = False
    #: more flags of ``serve``
    args: Sequence[str] = ()
    #: ``start`` also waits until the gRPC health service reports SERVING
    check_health: bool = False
    #: seconds it may take to write its port (import, open the store, bind), and then, with
    #: ``check_health``, to accept a connection
    start_timeout: float = 30.0
    #: seconds it gets to stop after SIGTERM, before SIGKILL
    stop_timeout: float = 20.0
    #: how many times the process was started
    starts: int = field(default=0, init=False)
    #: the cProfile output files, one per start (with ``profile``)
    profiles: list[Path] = field(default_factory=list, init=False)
    #: ``127.0.0.1:<port>`` once started
    target: str = field(default="", init=False)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def pid(self) -> int:
        """The running process's id."""
        if self._process is None:
            raise RuntimeError("the sidecar is not started")
        return self._process.pid

    @property
    def db(self) -> Path:
        return self.workdir / f"{self.name}.db"

    @property
    def log_file(self) -> Path:
        """Where the process of the latest start writes its stdout and stderr."""
        return self.workdir / f"{self.name}-{self.starts}.log"

    @property
    def port_file(self) -> Path:
        return self.workdir / f"{self.name}.port"

    async def __aenter__(self) -> Sidecar:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def command(self, profile_file: Path | None = None) -> list[str]:
        """The command line, under cProfile writing to ``profile_file`` when one is given."""
        profiler = [] if profile_file is None else ["-m", "cProfile", "-o", str(profile_file)]
        options = {
            "--db": str(self.db),
            "--listen": "127.0.0.1:0",
            "--port-file": str(self.port_file),
            "--log-level": self.log_level,
        }
        if self.durability is not None:
            options["--durability"] = self.durability
        serve = ["-m", "contextengine", "serve", *itertools.chain(*options.items()), *self.args]
        return [sys.executable, *profiler, *serve]

    async def start(self) -> None:
        """Starts the process; returns once it has written its port (and, with
        ``check_health``, reports SERVING). Raises ``RuntimeError`` when it exits first or is
        not serving, ``TimeoutError`` when it does not get there within ``start_timeout``
        (a failed health check call raises its own error); the process is stopped first."""
        self.starts += 1
        profile_file: Path | None = None
        if self.profile:
            profile_file = self.workdir / f"{self.name}-{self.starts}.prof"
            self.profiles.append(profile_file)
        self.port_file.unlink(missing_ok=True)
        process = self._process = self._spawn(self.command(profile_file))
        try:
            self.target = f"127.0.0.1:{await self._port(process)}"
            if self.check_health:
                await self._serving()
        except BaseException:
            await self.stop()
            raise

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        with self.log_file.open("wb") as log:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    async def _port(self, process: subprocess.Popen[bytes]) -> int:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the sidecar exited with status {process.returncode}:\n{self.log()}"
                )
            text = self.port_file.read_text().strip() if self.port_file.exists() else ""
            if text.isdigit():
                return int(text)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no port file after {self.start_timeout} s:\n{self.log()}")
            await asyncio.sleep(0.02)

    async def _serving(self) -> None:
        async with ContextEngineClient(self.target, attempts=1) as client:
            await client.wait_ready(self.start_timeout)
            health = health_pb2_grpc.HealthStub(client.channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5.0)
            if reply.status != health_pb2.HealthCheckResponse.SERVING:
                raise RuntimeError(f"the sidecar is not serving: {reply}")

    async def stop(self) -> None:
        """SIGTERM (a graceful stop, which also lets cProfile write its file), then SIGKILL
        after ``stop_timeout``. Does nothing when the process is not running."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, self.stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)

    def log(self) -> str:
        """What the process of the latest start has written to stdout and stderr so far."""
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds of the running process so far (None when it is not running,
        or where ``/proc`` is missing)."""
        if self._process is None:
            return None
        try:
            return proc.cpu_seconds(self._process.pid)
        except OSError:
            return None

    def thread_cpu_seconds(self) -> dict[str, float]:
        """CPU seconds so far of the running process's live threads, by kind (``THREAD_KINDS``):
        the main thread (the event loop), the other Python threads (aiosqlite's thread per
        SQLite connection, grpc.aio's poller) and gRPC's core threads. Empty when it is not
        running, or where ``/proc`` is missing."""
        if self._process is None:
            return {}
        pid = self._process.pid
        try:
            names = proc.thread_names(pid)
        except OSError:
            return {}
        if pid not in names:
            return {}
        totals = dict.fromkeys(THREAD_KINDS, 0.0)
        for tid, name in names.items():
            try:
                seconds = proc.cpu_seconds(pid, tid)
            except OSError:
                continue  # the thread has ended
            if tid == pid:
                kind = THREAD_KINDS[0]
            elif name == names[pid]:
                kind = THREAD_KINDS[1]
            else:
                kind = THREAD_KINDS[2]
            totals[kind] += seconds
        return totals


def profile_summary(paths: Sequence[Path], title: str, limit: int) -> str:
    """The hottest functions on the main thread of the sidecar processes that wrote the cProfile
    files ``paths``, merged ("" when none was written). cProfile sees neither the SQLite
    connection threads nor gRPC's Cython code, which shows up as ``Context.run``."""
    existing = [str(path) for path in paths if path.exists()]
    if not existing:
        return ""
    out = io.StringIO()
    stats = pstats.Stats(existing[0], stream=out)
    for path in existing[1:]:
        stats.add(path)
    stats.strip_dirs().sort_stats(pstats.SortKey.TIME).print_stats(limit)
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(limit)
    return f"--- cProfile of the {title}, main thread ---\n{out.getvalue()}"
