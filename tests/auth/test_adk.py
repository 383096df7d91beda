"""The ADK drop-ins over a sidecar with mTLS and tokens: ``target=`` plus the Python client's
``token=`` and certificate options, passed through by the sidecar backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextengine.adk import ContextEngineSessionService, sidecar_backend
from contextengine.client import ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from tests.auth import certs
from tests.auth.helpers import Token, write_tokens

pytestmark = pytest.mark.service


async def test_the_drop_ins_pass_token_and_certificates_through(tmp_path: Path) -> None:
    pki = certs.write(tmp_path / "pki")
    tokens = write_tokens(
        tmp_path / "tokens.json", {"agent": Token("adk-agent-token", "write", ["my-agent"])}
    )
    settings = ServerSettings(
        auth_tokens_file=str(tokens),
        tls_cert_file=str(pki.server_cert),
        tls_key_file=str(pki.server_key),
        tls_client_ca_file=str(pki.ca),
    )
    tls: dict[str, Any] = {
        "root_certificates": pki.ca.read_bytes(),
        "certificate_chain": pki.client_cert.read_bytes(),
        "private_key": pki.client_key.read_bytes(),
    }
    async with start_local_server(settings=settings) as srv:
        service = ContextEngineSessionService(target=srv.target, token="adk-agent-token", **tls)
        try:
            session = await service.create_session(app_name="my-agent", user_id="u")
            got = await service.get_session(app_name="my-agent", user_id="u", session_id=session.id)
            assert got is not None
            with pytest.raises(ContextEngineError) as caught:
                await service.create_session(app_name="other-agent", user_id="u")
            assert caught.value.reason == "PERMISSION_DENIED"
        finally:
            await service.close()
        backend = sidecar_backend(srv.target, token="wrong", **tls)
        service = ContextEngineSessionService(backend=backend)
        try:
            with pytest.raises(ContextEngineError) as caught:
                await service.create_session(app_name="my-agent", user_id="u")
            assert caught.value.reason == "TOKEN_INVALID"
            assert "wrong" not in backend.description
        finally:
            await backend.aclose()
