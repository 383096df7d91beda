"""The real ``contextengine serve`` as a child process for the configuration tests, in an
environment without this process's ``CONTEXTENGINE_`` variables (only the test's own)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

START_TIMEOUT = 30.0


def environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without its CONTEXTENGINE_ variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTENGINE_")}
    env.update(extra)
    return env


def _port(port_file: Path) -> int | None:
    text = port_file.read_text().strip() if port_file.exists() else ""
    return int(text) if text.isdigit() else None


@asynccontextmanager
async def serving(
    argv: list[str], port_file: Path, log: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[int]:
    """``contextengine serve *argv`` until it has written ``port_file`` (which its settings must
    name); the port it wrote (0 on a unix socket). Stopped with SIGTERM on the way out, which
    must end it with status 0."""
    out = await asyncio.to_thread(log.open, "wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "contextengine",
        "serve",
        *argv,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        env=environment(env or {}),
    )
    out.close()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while (port := await asyncio.to_thread(_port, port_file)) is None:
            if process.returncode is not None or time.monotonic() > deadline:
                text = await asyncio.to_thread(log.read_text)
                pytest.fail(f"serve did not start (status {process.returncode}):\n{text}")
            await asyncio.sleep(0.05)
        yield port
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 20) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
