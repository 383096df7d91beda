"""``contextengine serve`` as a child process: the one way tests, benchmarks and scripts start a
real sidecar out of process (``tests/support/sidecar.py`` adapts it for pytest,
``bench/sidecar.py`` for the benchmarks, ``scripts/with_server.py`` runs commands against it).

The process runs ``python -X faulthandler -m contextengine serve`` (faulthandler only prints a
Python trace into the log if the process dies of a signal) on a free loopback port, which it
writes to a port file once it serves; its output goes to a log file in ``workdir``. At the
default log level unless told otherwise: INFO logs one line per RPC, as ``make run`` does.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from grpc_health.v1 import health_pb2, health_pb2_grpc

from contextengine.client import ContextEngineClient
from contextengine.testing import proc

__all__ = ["NOT_SERVING", "SERVING", "THREAD_KINDS", "LogLevel", "SidecarProcess"]

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

S = TypeVar("S", bound="SidecarProcess")

#: the kinds of threads ``SidecarProcess.thread_cpu_seconds`` adds up, in this order
THREAD_KINDS = ("event loop", "other Python threads", "gRPC core threads")


@dataclass(eq=False)
class SidecarProcess:
    """``contextengine serve`` as a child process listening on a free loopback port;
    restartable (``stop``, then ``start`` again on the same database).

    In ``workdir``: the port file ``<name>.port`` and, per start (the n-th, counted in
    ``starts``), the process's output ``<name>-<n>.log`` and, with ``profile``, its cProfile
    output ``<name>-<n>.prof`` (listed in ``profiles``; cProfile writes it when the process stops
    gracefully). ``async with`` starts it and stops it.
    """

    workdir: Path
    name: str
    _: KW_ONLY
    #: a SQLite file or a ``postgresql://`` URL; None: ``<workdir>/<name>.db``
    database: Path | str | None = None
    #: more flags of ``serve``
    args: Sequence[str] = ()
    #: the process's working directory (``database`` may be relative to it); None: this one's
    cwd: Path | None = None
    #: variables added to (or, with a value of None, removed from) this process's environment
    env: Mapping[str, str | None] = field(default_factory=dict)
    #: passed as ``--listen``: a free loopback port by default; a fixed ``host:port`` keeps the
    #: same target across restarts
    listen: str = "127.0.0.1:0"
    #: passed as ``--log-level``; None: not passed (the sidecar's default, INFO)
    log_level: LogLevel | None = None
    #: passed as ``--durability``; None: not passed (the sidecar's default)
    durability: Literal["normal", "full"] | None = None
    #: run it under ``python -m cProfile``
    profile: bool = False
    #: ``start`` also waits until the gRPC health service reports SERVING
    check_health: bool = True
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
    def db(self) -> Path | str:
        return self.workdir / f"{self.name}.db" if self.database is None else self.database

    @property
    def log_file(self) -> Path:
        """Where the process of the latest start writes its stdout and stderr."""
        return self.workdir / f"{self.name}-{self.starts}.log"

    @property
    def port_file(self) -> Path:
        return self.workdir / f"{self.name}.port"

    async def __aenter__(self: S) -> S:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def command(self, profile_file: Path | None = None) -> list[str]:
        """The command line, under cProfile writing to ``profile_file`` when one is given."""
        runner = ["-X", "faulthandler"]
        if profile_file is not None:
            runner += ["-m", "cProfile", "-o", str(profile_file)]
        options = {
            "--db": str(self.db),
            "--listen": self.listen,
            "--port-file": str(self.port_file.absolute()),
        }
        if self.log_level is not None:
            options["--log-level"] = self.log_level
        if self.durability is not None:
            options["--durability"] = self.durability
        serve = ["-m", "contextengine", "serve", *itertools.chain(*options.items()), *self.args]
        return [sys.executable, *runner, *serve]

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.starts += 1
        profile_file: Path | None = None
        if self.profile:
            profile_file = self.workdir / f"{self.name}-{self.starts}.prof"
            self.profiles.append(profile_file)
        self.port_file.unlink(missing_ok=True)
        with self.log_file.open("wb") as log:
            return subprocess.Popen(
                self.command(profile_file),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=self._environment(),
            )

    def _environment(self) -> dict[str, str] | None:
        if not self.env:
            return None
        environment = dict(os.environ)
        for name, value in self.env.items():
            if value is None:
                environment.pop(name, None)
            else:
                environment[name] = value
        return environment

    async def start(self) -> None:
        """Starts the process; returns once it has written its port (and, with
        ``check_health``, reports SERVING). Raises ``RuntimeError`` (with the log) when it exits
        first or is not serving, ``TimeoutError`` when it does not get there within
        ``start_timeout``; the process is stopped first."""
        process = self._process = self._spawn()
        try:
            self.target = f"{self._host()}:{await self._port(process)}"
            if self.check_health:
                async with ContextEngineClient(self.target, attempts=1) as client:
                    await client.wait_ready(self.start_timeout)
                status = await self.health()
                if status != SERVING:
                    raise RuntimeError(f"the sidecar is not serving ({status}):\n{self.log()}")
        except BaseException:
            await self.stop()
            raise

    def _host(self) -> str:
        """The host part of ``listen`` to connect to (loopback for a wildcard)."""
        host = self.listen.rsplit(":", 1)[0]
        return "127.0.0.1" if host in ("", "0.0.0.0", "[::]") else host

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

    async def run_to_exit(self, seconds: float | None = None) -> int:
        """Starts the process and waits for it to exit by itself (a refused start); its exit
        status. Killed after ``seconds`` (default ``start_timeout``)."""
        self._process = self._spawn()
        try:
            wait = self.start_timeout if seconds is None else seconds
            return await asyncio.to_thread(self._process.wait, wait)
        finally:
            await self.kill()

    async def health(
        self, service: str = ""
    ) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
        """What its gRPC health service says now."""
        async with ContextEngineClient(self.target, attempts=1) as client:
            stub = health_pb2_grpc.HealthStub(client.channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5.0)
            return reply.status

    async def stop(self) -> int | None:
        """SIGTERM (a graceful stop, which also lets cProfile write its file), then SIGKILL
        after ``stop_timeout``; the exit status (None when it was not running)."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is not None:
            return process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(process.wait, self.stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)
            raise

    async def kill(self) -> None:
        """SIGKILL (like a crash), then reap the process. Does nothing when it is not running."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(process.wait, 30)

    def exit_status(self) -> int | None:
        """None while the process runs (or was never started)."""
        return None if self._process is None else self._process.poll()

    def log(self) -> str:
        """What the process of the latest start has written to stdout and stderr so far."""
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def rss_kb(self, field: str = "VmRSS") -> int:
        """The process's resident memory (``VmRSS``) or its peak (``VmHWM``), in kB."""
        return proc.resident_kib(self.pid, field)

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
