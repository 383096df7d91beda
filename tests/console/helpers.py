"""The pieces of the console tests: a real ``contextengine serve`` out of process (the one
starter, ``SidecarProcess``, stopped with SIGTERM), the CLI run in this process (stdout and stderr captured, plain text, 120 columns) or as
a child process, a seeded session log with fixed ids and timestamps, and snapshot files.

Snapshots live in ``tests/console/snapshots/NAME.txt``; to write them again after a deliberate
change of the rendering, run ``CONSOLE_SNAPSHOTS=update .venv/bin/pytest -q tests/console`` and
read the diff before committing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from contextengine.cli import main
from contextengine.testing.sidecar import SidecarProcess

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).with_name("snapshots")
START_TIMEOUT = 30.0
#: the width every rendering is checked at
COLUMNS = "120"
#: the seeded events' timestamps start here (2023-11-14T22:13:20Z)
T0 = 1_700_000_000.0
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f-]*(…|\b)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without CONTEXTENGINE_ variables (and NO_COLOR), plus
    ``extra``, ``COLUMNS`` fixed."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CONTEXTENGINE_") and k != "NO_COLOR"
    }
    env["COLUMNS"] = COLUMNS
    env.update(extra or {})
    return env


class Sidecar:
    """A ``contextengine serve`` child process (``contextengine.testing``'s ``SidecarProcess``)
    on a fixed loopback port and a SQLite file, at its default log level (INFO: a line per RPC),
    as it is run; ``start`` and ``stop`` for the console's synchronous tests, and a restart keeps
    the port the console reconnects to. Its environment has no CONTEXTENGINE_ variables."""

    def __init__(self, port: int, workdir: Path, args: Sequence[str] = ()) -> None:
        removed: dict[str, str | None] = {
            name: None for name in os.environ if name.startswith("CONTEXTENGINE_")
        }
        self.process = SidecarProcess(
            workdir,
            "sidecar",
            listen=f"127.0.0.1:{port}",
            args=args,
            env={**removed, "NO_COLOR": None, "COLUMNS": COLUMNS},
            check_health=False,
            start_timeout=START_TIMEOUT,
        )
        self.target = f"127.0.0.1:{port}"

    @property
    def db(self) -> Path | str:
        return self.process.db

    def start(self) -> None:
        asyncio.run(self.process.start())

    def stop(self) -> None:
        asyncio.run(self.process.stop())


@contextlib.contextmanager
def sidecar(tmp: Path, *args: str) -> Iterator[Sidecar]:
    running = Sidecar(free_port(), tmp, args)
    running.start()
    try:
        yield running
    finally:
        running.stop()


@dataclass(frozen=True)
class Run:
    status: int
    out: str
    err: str


def cli(*argv: str) -> Run:
    """``contextengine *argv`` in this process (plain text: the streams are no terminals)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return Run(status, out.getvalue(), err.getvalue())


def spawn(*argv: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """``contextengine *argv`` as a child process, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "contextengine", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(env),
        cwd=ROOT,
    )


def stable(text: str) -> str:
    """``text`` with the times the sidecar chose (now: session times, summary events) replaced
    by ``<now>`` and its UUIDs by ``<uuid>`` (padded to the same width); the seeded events' fixed
    times stay."""

    def replace(match: re.Match[str]) -> str:
        moment = datetime.strptime(match.group(0), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        if abs(moment.timestamp() - time.time()) < 24 * 3600:
            return "<now>".ljust(len(match.group(0)))
        return match.group(0)

    # the invocation id the sidecar gives a summary event (a UUID, clipped in tables)
    text = _UUID.sub(lambda match: "<uuid>".ljust(len(match.group(0))), text)
    return _ISO.sub(replace, text)


def check_snapshot(name: str, text: str) -> None:
    """``text`` (made stable) equals ``snapshots/NAME.txt`` (written when CONSOLE_SNAPSHOTS=update)."""
    path = SNAPSHOTS / f"{name}.txt"
    shown = stable(text)
    if os.environ.get("CONSOLE_SNAPSHOTS") == "update":
        path.write_text(shown)
    assert path.exists(), f"no snapshot {path.name}: run with CONSOLE_SNAPSHOTS=update"
    assert shown == path.read_text(), f"{path.name} differs (CONSOLE_SNAPSHOTS=update rewrites)"
