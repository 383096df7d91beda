"""The real ``contextengine serve``, out of process, with mTLS, a hashed token file and a token
from the environment: the handshake, every role's outcome on one write, health without a token,
and a log without any token."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contextengine.auth import hash_token
from contextengine.client import ContextEngineClient, ContextEngineError
from tests.auth import certs
from tests.service.helpers import text_event
from tests.support.sidecar import START_TIMEOUT, Sidecar

pytestmark = pytest.mark.process

WRITER = "writer-token-0123456789"
READER = "reader-token-0123456789"
ENV_ADMIN = "env-admin-token-0123456789"


class SecureSidecar(Sidecar):
    """``contextengine serve`` reached over (m)TLS: ready once a TLS health check answers."""

    def __init__(self, workdir: Path, args: list[str], pki: certs.Files) -> None:
        super().__init__(workdir, workdir / "ce.db", "secure", args)
        self.options = {
            "root_certificates": pki.ca.read_bytes(),
            "certificate_chain": pki.client_cert.read_bytes(),
            "private_key": pki.client_key.read_bytes(),
        }

    async def start(self) -> None:
        self.port_file.unlink(missing_ok=True)
        self._process = self._spawn()
        deadline = time.monotonic() + START_TIMEOUT
        while not (text := self._port_text()).isdigit():
            self.check_alive("starting")
            if time.monotonic() > deadline:
                pytest.fail(f"no port file after {START_TIMEOUT} s:\n{self.log()}")
            await asyncio.sleep(0.02)
        self.target = f"localhost:{int(text)}"

    def _port_text(self) -> str:
        return self.port_file.read_text().strip() if self.port_file.exists() else ""

    def client(self, token: str | None) -> ContextEngineClient:
        return ContextEngineClient(self.target, attempts=1, token=token, **self.options)  # type: ignore[arg-type]


async def test_serve_with_mtls_and_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pki = certs.write(tmp_path / "pki")
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(
        f"""
[[tokens]]
name = "agent"
sha256 = "{hash_token(WRITER)}"
role = "write"
apps = ["billing"]

[[tokens]]
name = "dashboard"
sha256 = "{hash_token(READER)}"
role = "read"
apps = ["*"]
"""
    )
    monkeypatch.setenv("CONTEXTENGINE_AUTH_TOKEN", ENV_ADMIN)
    args = [
        "--tls-cert-file",
        str(pki.server_cert),
        "--tls-key-file",
        str(pki.server_key),
        "--tls-client-ca-file",
        str(pki.ca),
        "--auth-tokens-file",
        str(tokens),
    ]
    sidecar = SecureSidecar(tmp_path, args, pki)
    try:
        await sidecar.start()
        async with sidecar.client(None) as anonymous:
            await anonymous.wait_ready(START_TIMEOUT)
            health = health_pb2_grpc.HealthStub(anonymous.channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(ContextEngineError) as caught:
                await anonymous.create_session("billing", "u")
            assert caught.value.reason == "UNAUTHENTICATED"
        async with sidecar.client(WRITER) as agent:
            session = await agent.create_session("billing", "u")
            await agent.append_event("billing", "u", session.id, text_event("hi"))
            with pytest.raises(ContextEngineError) as caught:
                await agent.create_session("payroll", "u")
            assert caught.value.code == grpc.StatusCode.PERMISSION_DENIED
        async with sidecar.client(READER) as dashboard:
            got = await dashboard.get_session("billing", "u", session.id)
            assert [e.content.parts[0].text for e in got.events] == ["hi"]
            with pytest.raises(ContextEngineError) as caught:
                await dashboard.delete_session("billing", "u", session.id)
            assert caught.value.reason == "PERMISSION_DENIED"
        async with sidecar.client(ENV_ADMIN) as admin:
            assert await admin.delete_memory("payroll", "u") == 0
        assert await sidecar.stop() == 0
    finally:
        await sidecar.kill()
    log = sidecar.log()
    assert "tls=mtls, auth=tokens" in log
    assert "CreateSession" in log
    for secret in (WRITER, READER, ENV_ADMIN):
        assert secret not in log
