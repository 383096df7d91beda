"""Runs commands against one real sidecar: ``python scripts/with_server.py CMD [CMD ...]``.

Starts ``contextengine serve`` (``contextengine.testing``'s ``SidecarProcess``, the one way tests,
benchmarks and scripts start one) on a free loopback port with a fresh SQLite file, at the
default log level (INFO, as `make run` serves: per-RPC logging once crashed the server when a
client cancelled a stream), waits until it serves, runs every command (a shell string) in turn
with ``CONTEXTENGINE_TARGET=127.0.0.1:<port>`` in its environment, then stops the server with
SIGTERM. Every command runs even when an earlier one failed; the exit status is 1 if any failed
(or the server died), so that `make test` fails on a failing scenario in any language. The
server's log is printed when something failed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from contextengine.testing.sidecar import SidecarProcess

START_TIMEOUT_S = 60.0


def main(argv: Sequence[str]) -> int:
    commands = [c for c in argv if c != "--"]
    if not commands:
        print("usage: with_server.py CMD [CMD ...]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ce-with-server-") as tmp:
        return asyncio.run(
            _around(SidecarProcess(Path(tmp), "ce", start_timeout=START_TIMEOUT_S), commands)
        )


async def _around(server: SidecarProcess, commands: Sequence[str]) -> int:
    try:
        await server.start()
    except (RuntimeError, TimeoutError, OSError) as error:
        print(f"with_server: the server did not start: {error}", file=sys.stderr)
        return 1
    try:
        print(f"with_server: contextengine serving on {server.target}", flush=True)
        failed = await asyncio.to_thread(_run_all, commands, server.target)
        status = server.exit_status()
        if status is not None:
            print(f"with_server: the server exited ({status})", file=sys.stderr)
            failed.append("<server>")
    finally:
        await server.stop()
    if failed:
        print(f"with_server: FAILED: {', '.join(failed)}", file=sys.stderr)
        _print_log(server.log())
        return 1
    return 0


def _run_all(commands: Sequence[str], target: str) -> list[str]:
    env = {**os.environ, "CONTEXTENGINE_TARGET": target}
    failed: list[str] = []
    for command in commands:
        print(f"with_server: $ {command}", flush=True)
        started = time.monotonic()
        code = subprocess.call(["bash", "-c", command], env=env)
        took = time.monotonic() - started
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        print(f"with_server: {status} in {took:.1f} s: {command}", flush=True)
        if code != 0:
            failed.append(command)
    return failed


def _print_log(text: str) -> None:
    print("with_server: last lines of the server log:", file=sys.stderr)
    for line in text.splitlines()[-40:]:
        print(f"  {line}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
