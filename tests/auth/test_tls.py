"""TLS and mutual TLS handshakes with certificates made by the test (``certs.py``), the token
check over TLS, and certificates rotated on disk served to new connections without a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from tests.auth import certs

pytestmark = pytest.mark.service

TOKEN = "tls-test-token"


async def _create(target: str, **options: object) -> str:
    """Creates a session over a new connection made with ``options``; its id."""
    async with ContextEngineClient(target, attempts=1, timeout=5, **options) as client:  # type: ignore[arg-type]
        return (await client.create_session("a", "u")).id


async def _refused(target: str, **options: object) -> ContextEngineError:
    with pytest.raises(ContextEngineError) as caught:
        await _create(target, **options)
    return caught.value


@pytest.fixture
def pki(tmp_path: Path) -> certs.Files:
    return certs.write(tmp_path / "pki")


@pytest.fixture
async def tls_server(pki: certs.Files) -> AsyncIterator[ContextEngineServer]:
    settings = ServerSettings(tls_cert_file=str(pki.server_cert), tls_key_file=str(pki.server_key))
    async with start_local_server(settings=settings) as srv:
        yield srv


@pytest.fixture
async def mtls_server(pki: certs.Files) -> AsyncIterator[ContextEngineServer]:
    settings = ServerSettings(
        tls_cert_file=str(pki.server_cert),
        tls_key_file=str(pki.server_key),
        tls_client_ca_file=str(pki.ca),
        auth_token=TOKEN,
    )
    async with start_local_server(settings=settings) as srv:
        yield srv


async def test_tls_with_the_right_ca(tls_server: ContextEngineServer, pki: certs.Files) -> None:
    assert await _create(tls_server.target, root_certificates=pki.ca.read_bytes())
    # also by the name the certificate was issued for
    name = f"localhost:{tls_server.port}"
    assert await _create(name, root_certificates=pki.ca.read_bytes())


async def test_tls_refuses_plaintext_and_strangers(
    tls_server: ContextEngineServer, pki: certs.Files, tmp_path: Path
) -> None:
    plaintext = await _refused(tls_server.target)
    assert plaintext.code == grpc.StatusCode.UNAVAILABLE
    other = certs.write(tmp_path / "other")
    stranger = await _refused(tls_server.target, root_certificates=other.ca.read_bytes())
    assert stranger.code == grpc.StatusCode.UNAVAILABLE
    # TLS without roots verifies against the system's, which do not know the test CA
    system = await _refused(tls_server.target, tls=True)
    assert system.code == grpc.StatusCode.UNAVAILABLE


async def test_mtls_needs_a_client_certificate_the_ca_signed(
    mtls_server: ContextEngineServer, pki: certs.Files
) -> None:
    ca = pki.ca.read_bytes()
    good = {
        "root_certificates": ca,
        "certificate_chain": pki.client_cert.read_bytes(),
        "private_key": pki.client_key.read_bytes(),
        "token": TOKEN,
    }
    assert await _create(mtls_server.target, **good)
    without = await _refused(mtls_server.target, root_certificates=ca, token=TOKEN)
    assert without.code == grpc.StatusCode.UNAVAILABLE
    stranger = await _refused(
        mtls_server.target,
        root_certificates=ca,
        certificate_chain=pki.stranger_cert.read_bytes(),
        private_key=pki.stranger_key.read_bytes(),
        token=TOKEN,
    )
    assert stranger.code == grpc.StatusCode.UNAVAILABLE
    # mTLS does not replace the token when tokens are configured
    no_token = await _refused(mtls_server.target, **{**good, "token": None})
    assert (no_token.code, no_token.reason) == (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    wrong = await _refused(mtls_server.target, **{**good, "token": "wrong"})
    assert (wrong.code, wrong.reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID")


async def test_rotated_certificates_are_served_to_new_connections(
    tls_server: ContextEngineServer, pki: certs.Files, tmp_path: Path
) -> None:
    old_ca = pki.ca.read_bytes()
    assert await _create(tls_server.target, root_certificates=old_ca)
    rotated = certs.write(tmp_path / "rotated")
    pki.server_key.write_bytes(rotated.server_key.read_bytes())
    pki.server_cert.write_bytes(rotated.server_cert.read_bytes())
    assert await _create(tls_server.target, root_certificates=rotated.ca.read_bytes())
    refused = await _refused(tls_server.target, root_certificates=old_ca)
    assert refused.code == grpc.StatusCode.UNAVAILABLE


async def test_a_half_written_rotation_keeps_the_old_certificate(
    tls_server: ContextEngineServer, pki: certs.Files
) -> None:
    old_ca = pki.ca.read_bytes()
    pki.server_cert.write_text("not a certificate yet")
    assert await _create(tls_server.target, root_certificates=old_ca)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tls_cert_file": "x.pem"}, "tls_cert_file and tls_key_file must be set together"),
        ({"tls_key_file": "x.key"}, "tls_cert_file and tls_key_file must be set together"),
        ({"tls_client_ca_file": "ca.pem"}, "tls_client_ca_file .* needs tls_cert_file"),
        (
            {"tls_cert_file": "/nonexistent/x.pem", "tls_key_file": "/nonexistent/x.key"},
            "tls_cert_file '/nonexistent/x.pem' cannot be read",
        ),
    ],
)
def test_tls_settings_are_checked_up_front(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServerSettings(**fields)  # type: ignore[arg-type]


def test_a_file_that_is_not_pem_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "x.pem"
    bad.write_text("hello")
    with pytest.raises(ValueError, match="is not a PEM file"):
        ServerSettings(tls_cert_file=str(bad), tls_key_file=str(bad))
