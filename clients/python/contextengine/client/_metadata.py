"""``MetadataInterceptor``: the one client interceptor shape that adds metadata to every unary
and server-streaming call (the bearer token, the W3C trace context); subclasses say what to add."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc

__all__ = ["MetadataInterceptor"]


class MetadataInterceptor(
    grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor
):
    """Adds :meth:`pairs` to the metadata of every call (unchanged details when there are none)."""

    @abstractmethod
    def pairs(self) -> Sequence[tuple[str, str]]:
        """The metadata to add to the next call (empty: the call goes out as it is)."""

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        pairs = self.pairs()
        if not pairs:
            return details
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        for key, value in pairs:
            metadata.add(key, value)
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
        call: AsyncIterator[Any] | grpc.aio.UnaryStreamCall[Any, Any] = await continuation(
            self._details(client_call_details), request
        )
        return call
