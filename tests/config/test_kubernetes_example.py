"""The Kubernetes sidecar example's configuration, run for real: ``contextengine serve`` with the
ConfigMap's file and the Secret's token file, only the paths moved into a temporary directory
(by ``CONTEXTENGINE_`` variables, as a container's ``env`` would), serves the API on its unix
socket to the agent's token only, and answers the probes on its operations port."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.v1 import content_pb2, event_pb2
from tests.config.serving import START_TIMEOUT, serving

pytestmark = pytest.mark.process

SIDECAR = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "sidecar"


def _documents() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(SIDECAR.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[document["kind"]] = document
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def _ready(url: str) -> tuple[int, str]:
    """The probe's answer once the port answers (503 while the store opens is fine too)."""
    for _ in range(int(START_TIMEOUT / 0.1)):
        try:
            return await asyncio.to_thread(_get, url)
        except OSError:
            await asyncio.sleep(0.1)
    pytest.fail(f"no answer from {url}")


async def test_the_example_serves_the_agent_on_its_socket(tmp_path: Path) -> None:
    documents = _documents()
    config = tmp_path / "contextengine.toml"
    config.write_text(documents["ConfigMap"]["data"]["contextengine.toml"])
    secret = documents["Secret"]["stringData"]
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(secret["tokens.toml"])
    (tmp_path / "run").mkdir()
    (tmp_path / "data").mkdir()
    sock = tmp_path / "run" / "contextengine.sock"
    ops = _free_port()
    port_file = tmp_path / "serve.port"
    env = {
        "CONTEXTENGINE_CONFIG": str(config),
        "CONTEXTENGINE_LISTEN": f"unix:{sock}",
        "CONTEXTENGINE_DB": str(tmp_path / "data" / "contextengine.db"),
        "CONTEXTENGINE_AUTH_TOKENS_FILE": str(tokens),
        "CONTEXTENGINE_OPS_LISTEN": f"127.0.0.1:{ops}",
        "CONTEXTENGINE_PORT_FILE": str(port_file),
    }
    async with serving([], port_file, tmp_path / "serve.log", env):
        status, _ = await _ready(f"http://127.0.0.1:{ops}/healthz")
        assert status == 200
        for _ in range(int(START_TIMEOUT / 0.1)):
            status, _ = await asyncio.to_thread(_get, f"http://127.0.0.1:{ops}/readyz")
            if status == 200:
                break
            await asyncio.sleep(0.1)
        assert status == 200
        assert sock.is_socket()
        assert oct(sock.stat().st_mode & 0o777) == "0o660"  # unix_socket_mode of the file
        target = f"unix://{sock}"
        async with ContextEngineClient(target, attempts=1) as anonymous:
            with pytest.raises(ContextEngineError) as raised:
                await anonymous.create_session("app", "u", "s")
            assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED
        async with ContextEngineClient(target, attempts=1, token=secret["agent-token"]) as agent:
            await agent.create_session("app", "u", "s")
            event = event_pb2.Event(
                author="user",
                content=content_pb2.Content(role="user", parts=[content_pb2.Part(text="hi")]),
            )
            await agent.append_event("app", "u", "s", event)
        status, metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{ops}/metrics")
        assert status == 200
        assert "AppendEvent" in metrics
