"""The client's side of the sidecar's security: a bearer token on every call and TLS / mTLS
channel credentials (``docs/security.md``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from contextengine.client._metadata import MetadataInterceptor
from contextengine.client._tracing import trace_context_interceptor

__all__ = ["BearerToken", "open_channel"]


class BearerToken(MetadataInterceptor):
    """Adds ``authorization: Bearer <token>`` to the metadata of every call (plaintext or TLS:
    grpc's own access-token credentials refuse plaintext channels, and a sidecar on a unix
    socket or loopback address may check tokens without TLS)."""

    def __init__(self, token: str) -> None:
        if not token or any(c.isspace() for c in token) or not token.isascii():
            raise ValueError("token must be printable ASCII without spaces, and not empty")
        self._pair = ("authorization", f"Bearer {token}")

    def __repr__(self) -> str:
        return "BearerToken(<hidden>)"

    def pairs(self) -> Sequence[tuple[str, str]]:
        return (self._pair,)


def open_channel(
    target: str,
    options: Sequence[tuple[str, Any]],
    *,
    token: str | None,
    tls: bool,
    root_certificates: bytes | None,
    certificate_chain: bytes | None,
    private_key: bytes | None,
    server_name: str | None = None,
) -> grpc.aio.Channel:
    """A channel to ``target``: TLS when ``tls`` or any certificate is given (the system's roots
    unless ``root_certificates``), mTLS with ``certificate_chain`` and ``private_key``;
    ``server_name`` is the name the server's certificate must carry when it is not the target's
    host (a unix socket's target is its path)."""
    if (certificate_chain is None) != (private_key is None):
        raise ValueError("certificate_chain and private_key are given together (mTLS)")
    interceptors: list[Any] = [BearerToken(token)] if token is not None else []
    tracing = trace_context_interceptor()  # traceparent of the current span (OpenTelemetry)
    if tracing is not None:
        interceptors.append(tracing)
    secure = tls or root_certificates is not None or certificate_chain is not None
    if server_name is not None:
        if not secure:
            raise ValueError("server_name applies to TLS connections only")
        options = [*options, ("grpc.ssl_target_name_override", server_name)]
    if not secure:
        return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=root_certificates,
        private_key=private_key,
        certificate_chain=certificate_chain,
    )
    return grpc.aio.secure_channel(target, credentials, options=options, interceptors=interceptors)
