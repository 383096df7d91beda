"""The client's side of the sidecar's security: a bearer token on every call and TLS / mTLS
channel credentials (``docs/security.md``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc

from contextengine.client._tracing import trace_context_interceptor

__all__ = ["BearerToken", "open_channel"]


class BearerToken(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to the metadata of every call (plaintext or TLS:
    grpc's own access-token credentials refuse plaintext channels, and a sidecar on a unix
    socket or loopback address may check tokens without TLS)."""

    def __init__(self, token: str) -> None:
        if not token or any(c.isspace() for c in token) or not token.isascii():
            raise ValueError("token must be printable ASCII without spaces, and not empty")
        self._pair = ("authorization", f"Bearer {token}")

    def __repr__(self) -> str:
        return "BearerToken(<hidden>)"

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        metadata.add(*self._pair)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(self._details(client_call_details), request)

    async def intercept_unary_stream(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> AsyncIterator[Any] | grpc.aio.UnaryStreamCall[Any, Any]:
        call: grpc.aio.UnaryStreamCall[Any, Any] = await continuation(
            self._details(client_call_details), request
        )
        return call


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
