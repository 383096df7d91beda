"""Everything the transport needs from the auth settings, built and checked once at start-up."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextengine.auth._authorizer import Authorizer
from contextengine.auth._exposure import exposure_problem, group_id, parse_mode
from contextengine.auth._tls import check_pem_files, server_credentials
from contextengine.auth._tokens import TokenTable

# Only building the credentials needs grpc (``server_credentials`` imports it): the checks the
# settings run do not load it (tests/test_startup_imports.py).
if TYPE_CHECKING:
    import grpc

__all__ = ["Edge", "build_edge", "check_edge_files", "check_edge_settings"]


@dataclass(frozen=True)
class Edge:
    """How the API port is secured."""

    #: checks every RPC (None: no tokens configured, every caller may do everything)
    authorizer: Authorizer | None
    #: TLS credentials for the port (None: plaintext)
    credentials: grpc.ServerCredentials | None
    #: the unix socket's file mode and group id (None: left as created)
    socket_mode: int | None
    socket_gid: int | None


def check_edge_settings(
    *,
    listen: str,
    tokens: bool,
    cert_file: str,
    key_file: str,
    client_ca_file: str,
    unix_socket_mode: str,
    unix_socket_group: str,
    insecure: bool,
) -> None:
    """The checks that need no file: ValueError naming the setting (settings' construction)."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("tls_cert_file and tls_key_file must be set together")
    if client_ca_file and not cert_file:
        raise ValueError("tls_client_ca_file (mTLS) needs tls_cert_file and tls_key_file")
    if (unix_socket_mode or unix_socket_group) and not listen.startswith("unix:"):
        raise ValueError("unix_socket_mode and unix_socket_group need a unix: listen address")
    parse_mode(unix_socket_mode)
    problem = exposure_problem(listen, tokens=tokens, mtls=bool(client_ca_file), insecure=insecure)
    if problem is not None:
        raise ValueError(problem)


def check_edge_files(
    *,
    tokens_file: str,
    token: str,
    cert_file: str,
    key_file: str,
    client_ca_file: str,
    unix_socket_group: str,
) -> None:
    """What :func:`build_edge` reads, read and checked without building anything (no grpc):
    ValueError naming the setting when a token or certificate file, or the group, is unusable."""
    TokenTable.from_settings(tokens_file, token)
    if cert_file:
        check_pem_files(cert_file, key_file, client_ca_file)
    group_id(unix_socket_group)


def build_edge(
    *,
    methods: Iterable[str],
    tokens_file: str,
    token: str,
    cert_file: str,
    key_file: str,
    client_ca_file: str,
    unix_socket_mode: str,
    unix_socket_group: str,
) -> Edge:
    """Reads the token file and certificates; ValueError naming the setting when one is unusable."""
    table = TokenTable.from_settings(tokens_file, token)
    authorizer = Authorizer(table, methods) if len(table) else None
    credentials = server_credentials(cert_file, key_file, client_ca_file) if cert_file else None
    return Edge(
        authorizer=authorizer,
        credentials=credentials,
        socket_mode=parse_mode(unix_socket_mode),
        socket_gid=group_id(unix_socket_group),
    )
