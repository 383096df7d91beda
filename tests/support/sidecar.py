"""The real sidecar as a child process, for the out-of-process tests: ``contextengine.testing``'s
``SidecarProcess`` (``python -X faulthandler -m contextengine serve`` on a free port, at the
default log level: INFO, one log line per RPC, as ``make run`` does, unless a test passes other
flags), with the tests' argument order and pytest's failure for a process that died."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from contextengine.testing.sidecar import NOT_SERVING, SERVING, SidecarProcess

__all__ = ["NOT_SERVING", "SERVING", "START_TIMEOUT", "Sidecar", "running_sidecar"]

START_TIMEOUT = 30.0


@dataclass(eq=False, init=False)
class Sidecar(SidecarProcess):
    """``contextengine serve`` on ``db`` (a SQLite file or a ``postgresql://`` URL) as a child
    process; ``args`` are extra flags, ``cwd`` its working directory (``db`` may be relative to
    it)."""

    def __init__(
        self,
        workdir: Path,
        db: Path | str,
        name: str,
        args: Sequence[str] = (),
        *,
        cwd: Path | None = None,
    ) -> None:
        super().__init__(
            workdir, name, database=db, args=tuple(args), cwd=cwd, start_timeout=START_TIMEOUT
        )

    def check_alive(self, context: str = "") -> None:
        """Fails the test, with the log, if the process has exited."""
        status = self.exit_status()
        if status is not None:
            pytest.fail(f"{context}: the sidecar exited with {status}:\n{self.log()[-6000:]}")


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
