"""Runs commands against one real sidecar: ``python scripts/with_server.py CMD [CMD ...]``.

Starts ``contextengine serve`` on a free loopback port with a fresh SQLite file, waits until it
serves, runs every command (a shell string) in turn with ``CONTEXTENGINE_TARGET=127.0.0.1:<port>``
in its environment, then stops the server with SIGTERM. Every command runs even when an earlier
one failed; the exit status is 1 if any failed (or the server died), so that `make test` fails on
a failing scenario in any language. The server's log is printed when something failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

START_TIMEOUT_S = 60.0


def main(argv: Sequence[str]) -> int:
    commands = [c for c in argv if c != "--"]
    if not commands:
        print("usage: with_server.py CMD [CMD ...]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ce-with-server-") as tmp:
        port_file = Path(tmp) / "port"
        log_path = Path(tmp) / "server.log"
        with log_path.open("wb") as log:
            server = subprocess.Popen(
                [
                    sys.executable,
                    "-X",
                    "faulthandler",
                    "-m",
                    "contextengine",
                    "serve",
                    "--db",
                    str(Path(tmp) / "ce.db"),
                    "--listen",
                    "127.0.0.1:0",
                    "--port-file",
                    str(port_file),
                    # The default log level (INFO), as `make run` serves: per-RPC logging once
                    # crashed the server when a client cancelled a stream.
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                port = _wait_for_port(server, port_file)
                if port is None:
                    print("with_server: the server did not start", file=sys.stderr)
                    _print_log(log_path)
                    return 1
                target = f"127.0.0.1:{port}"
                print(f"with_server: contextengine serving on {target}", flush=True)
                failed = _run_all(commands, target)
                if server.poll() is not None:
                    print(f"with_server: the server exited ({server.returncode})", file=sys.stderr)
                    failed.append("<server>")
            finally:
                _stop(server)
        if failed:
            print(f"with_server: FAILED: {', '.join(failed)}", file=sys.stderr)
            _print_log(log_path)
            return 1
        return 0


def _wait_for_port(server: subprocess.Popen[bytes], port_file: Path) -> int | None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return None
        text = port_file.read_text().strip() if port_file.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.05)
    return None


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


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _print_log(path: Path) -> None:
    lines = path.read_text("utf-8", errors="replace").splitlines()
    print("with_server: last lines of the server log:", file=sys.stderr)
    for line in lines[-40:]:
        print(f"  {line}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
