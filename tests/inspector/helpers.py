"""What the inspector tests share: the real ``contextengine serve --inspector`` as a child process
(tokens configured), its operations port, the scripted session, and reading server-sent events."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from contextengine.auth import hash_token
from contextengine.client import ContextEngineClient
from tests.inspector.session import APP, script
from tests.support.sidecar import Sidecar

ADMIN = "admin-token-0123456789"
READER = "reader-token-0123456789"
OTHER_APP = "billing-token-0123456789"
BOB_ONLY = "bob-token-0123456789"

TOKENS = f"""
[[tokens]]
name = "admin"
sha256 = "{hash_token(ADMIN)}"
role = "admin"
apps = ["*"]

[[tokens]]
name = "trips-reader"
sha256 = "{hash_token(READER)}"
role = "read"
apps = ["{APP}"]

[[tokens]]
name = "billing"
sha256 = "{hash_token(OTHER_APP)}"
role = "admin"
apps = ["billing"]

[[tokens]]
name = "bob"
sha256 = "{hash_token(BOB_ONLY)}"
role = "read"
apps = ["{APP}"]
users = ["bob"]
"""


@dataclass
class Running:
    """A sidecar process with the inspector on."""

    process: Sidecar
    ops_port: int
    #: one HTTP client for the test module (making one costs a TLS context: ~0.2 s)
    http: httpx.AsyncClient

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.ops_port}/inspector/"

    def client(self, token: str = ADMIN) -> ContextEngineClient:
        return ContextEngineClient(self.process.target, attempts=1, token=token)


@asynccontextmanager
async def inspector_sidecar(
    workdir: Path, *, tokens: bool = True, extra: tuple[str, ...] = ()
) -> AsyncIterator[Running]:
    """``contextengine serve --inspector --ops-listen 127.0.0.1:0`` on a SQLite file, with the
    scripted session in it; the operations port read from its log."""
    args = ["--inspector", "--ops-listen", "127.0.0.1:0", *extra]
    if tokens:
        token_file = workdir / "tokens.toml"
        token_file.write_text(TOKENS)
        args += ["--auth-tokens-file", str(token_file)]
    process = Sidecar(workdir, workdir / "inspector.db", "inspector", args)
    await process.start()
    try:
        found = re.search(r"operations on http://127\.0\.0\.1:(\d+)", process.log())
        assert found is not None, process.log()
        async with httpx.AsyncClient(timeout=10.0) as http:
            running = Running(process, int(found.group(1)), http)
            async with running.client() as client:
                await script(client)
            yield running
    finally:
        assert await process.stop() == 0, process.log()


def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


async def get(running: Running, path: str, token: str | None = ADMIN) -> httpx.Response:
    return await running.http.get(running.base + path, headers=bearer(token))


async def read_frames(response: httpx.Response, frames: asyncio.Queue[tuple[str, Any]]) -> None:
    """Puts each server-sent event of ``response`` on ``frames`` as (event name, data)."""
    buffer = ""
    async for text in response.aiter_text():
        buffer += text
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            name, data = "message", ""
            for line in block.split("\n"):
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data += line[6:]
            if data:
                await frames.put((name, json.loads(data)))
