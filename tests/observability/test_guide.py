"""The observability page's sample session (docs/operations/observability.md) is true: ``serve``
with the flags it shows logs the JSON line it shows, and the operations port answers the metric
it shows, from a ``contextengine serve`` process at its default log level."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import socket
import urllib.request
from pathlib import Path

import pytest

from tests.docs.guides import blocks
from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.process

PAGE = "docs/operations/observability.md"
SHOWN_PORT = "127.0.0.1:50152"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_the_sample_session_prints_what_the_page_shows(tmp_path: Path) -> None:
    [block] = blocks(PAGE, "console")
    serve, log_line, curl, metric = block.strip().splitlines()
    ops = f"127.0.0.1:{_free_port()}"
    argv = shlex.split(serve.removeprefix("$ ").replace(SHOWN_PORT, ops))
    assert argv[:2] == ["contextengine", "serve"]
    shown = json.loads(log_line.replace(SHOWN_PORT, ops))
    url, _, grep = curl.removeprefix("$ curl -s ").partition(" | grep ")
    pattern = re.compile(shlex.split(grep)[0])

    async with running_sidecar(tmp_path, tmp_path / "ce.db", "obs", argv[2:]) as sidecar:
        logged = [json.loads(line) for line in sidecar.log().splitlines() if line.startswith("{")]
        assert any(
            {k: v for k, v in line.items() if k != "time"}
            == {k: v for k, v in shown.items() if k != "time"}
            for line in logged
        ), logged
        url = "http://" + url.replace(SHOWN_PORT, ops)
        body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read())
    matching = [line for line in body.decode().splitlines() if pattern.search(line)]
    assert matching == [metric]
