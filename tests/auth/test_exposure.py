"""Where the sidecar may listen without authentication (loopback and unix sockets only, unless
``insecure``), unix socket permissions, and the refusal of a public address by the real
``contextengine serve`` (one line, exit status 2)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextengine.auth import is_local_address
from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from contextengine.transport import server_edge
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.process

LOCAL = ["127.0.0.1:0", "127.8.9.10:50151", "localhost:1", "[::1]:50151", "unix:/tmp/x.sock"]
PUBLIC = ["0.0.0.0:50151", "[::]:0", "10.1.2.3:50151", "example.com:443", "my-pod:1", ":50151"]


@pytest.mark.parametrize("listen", LOCAL)
def test_local_addresses_need_nothing(listen: str) -> None:
    assert is_local_address(listen)
    assert ServerSettings(listen=listen).listen == listen


@pytest.mark.parametrize("listen", PUBLIC)
def test_a_public_address_needs_auth_or_insecure(listen: str, tmp_path: Path) -> None:
    assert not is_local_address(listen)
    with pytest.raises(
        ValueError, match=f"refusing to listen on {re.escape(listen)} without authentication"
    ):
        ServerSettings(listen=listen)
    assert ServerSettings(listen=listen, insecure=True).insecure
    assert ServerSettings(listen=listen, auth_token="a-token").auth_token == "a-token"


def test_tls_alone_does_not_make_a_public_address_safe(tmp_path: Path) -> None:
    from tests.auth import certs

    pki = certs.write(tmp_path)
    cert, key = str(pki.server_cert), str(pki.server_key)
    with pytest.raises(ValueError, match="refusing to listen"):
        ServerSettings(listen="0.0.0.0:0", tls_cert_file=cert, tls_key_file=key)
    # mTLS authenticates every client
    assert ServerSettings(
        listen="0.0.0.0:0", tls_cert_file=cert, tls_key_file=key, tls_client_ca_file=str(pki.ca)
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"unix_socket_mode": "0660"}, "need a unix: listen address"),
        ({"listen": "unix:/tmp/x.sock", "unix_socket_mode": "rw"}, "not an octal mode"),
        ({"listen": "unix:/tmp/x.sock", "unix_socket_mode": "1777"}, "not a permission mode"),
    ],
)
def test_unix_socket_settings_are_checked(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServerSettings(**fields)  # type: ignore[arg-type]


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A directory with a short path: unix socket paths are limited to about 100 bytes."""
    directory = Path(tempfile.mkdtemp(prefix="ce-auth-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory)


async def test_the_unix_socket_gets_its_mode_and_group(socket_dir: Path) -> None:
    path = socket_dir / "ce.sock"
    listen = f"unix:{path}"
    group = str(os.getgid())  # one the process may give a file it owns
    settings = ServerSettings(listen=listen, unix_socket_mode="0600", unix_socket_group=group)
    async with start_local_server(listen=listen, settings=settings) as srv:
        info = os.stat(path)
        assert stat.S_ISSOCK(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert info.st_gid == int(group)
        async with ContextEngineClient(srv.target, attempts=1) as client:
            assert (await client.create_session("a", "u")).id


def test_an_unknown_group_is_refused() -> None:
    settings = ServerSettings(
        listen="unix:/tmp/x.sock", unix_socket_group="no-such-group-contextengine"
    )
    with pytest.raises(ValueError, match="not a group of this host"):
        server_edge(settings)


async def test_serve_refuses_a_public_address_with_one_line(tmp_path: Path) -> None:
    sidecar = Sidecar(tmp_path, tmp_path / "ce.db", "public", ["--listen", "0.0.0.0:0"])
    assert await sidecar.run_to_exit() == 2
    lines = sidecar.log().strip().splitlines()
    assert len(lines) == 1, lines
    assert "refusing to listen on 0.0.0.0:0 without authentication" in lines[0]
    assert "--insecure" in lines[0]
    assert not (tmp_path / "ce.db").exists()


async def test_serve_starts_on_a_public_address_with_insecure(tmp_path: Path) -> None:
    sidecar = Sidecar(
        tmp_path, tmp_path / "ce.db", "insecure", ["--listen", "0.0.0.0:0", "--insecure"]
    )
    try:
        await sidecar.start()  # health over 127.0.0.1, which 0.0.0.0 includes
    finally:
        await sidecar.kill()


async def test_tokens_and_tls_work_on_a_unix_socket(socket_dir: Path) -> None:
    from tests.auth import certs

    pki = certs.write(socket_dir / "pki")
    listen = f"unix:{socket_dir / 'ce.sock'}"
    settings = ServerSettings(
        listen=listen,
        auth_token="unix-token",
        tls_cert_file=str(pki.server_cert),
        tls_key_file=str(pki.server_key),
    )
    ca = pki.ca.read_bytes()
    async with start_local_server(listen=listen, settings=settings) as srv:
        tls: dict[str, Any] = {"root_certificates": ca, "server_name": "localhost"}
        # (a unix socket's target is its path: the certificate names localhost)
        async with ContextEngineClient(srv.target, attempts=1, token="unix-token", **tls) as client:
            assert (await client.create_session("a", "u")).id
        async with ContextEngineClient(srv.target, attempts=1, **tls) as anonymous:
            with pytest.raises(ContextEngineError) as caught:
                await anonymous.create_session("a", "u")
            assert caught.value.reason == "UNAUTHENTICATED"


def test_the_socket_is_created_with_its_mode_already(socket_dir: Path) -> None:
    """The umask while binding: the socket is never wider than unix_socket_mode, not even
    before its chmod; the process's umask is restored after."""
    import socket

    from contextengine.auth import socket_umask

    before = os.umask(0o022)
    os.umask(before)
    path = socket_dir / "probe.sock"
    with socket_umask(f"unix:{path}", 0o600), socket.socket(socket.AF_UNIX) as probe:
        probe.bind(str(path))
        assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0
    after = os.umask(before)
    assert after == before
