"""Builds gRPC method handlers for a servicer, with the cross-cutting behaviour every RPC shares.

Done once per service at start-up (no per-call interceptor dispatch):

* the request size limit, checked on the raw bytes (RESOURCE_EXHAUSTED / REQUEST_TOO_LARGE with
  an ErrorInfo, instead of the transport's bare status);
* undecodable requests become INVALID_ARGUMENT instead of INTERNAL;
* :class:`ContextEngineError` becomes a status with ErrorInfo; any other exception becomes
  INTERNAL (logged with its traceback);
* one log line per RPC: method, status code, duration, peer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor, message, message_factory

from contextengine.errors import ContextEngineError
from contextengine.service._status import internal_error, to_status

_LOG = logging.getLogger("contextengine.rpc")

Context = grpc.aio.ServicerContext[Any, Any]


@dataclass(frozen=True)
class _Rejected:
    """Stands in for a request that could not be accepted; the behaviour turns it into an error."""

    error: ContextEngineError


def _deserializer(cls: type[message.Message], limit: int) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        if len(data) > limit:
            return _Rejected(
                ContextEngineError(
                    "REQUEST_TOO_LARGE",
                    f"request of {len(data)} bytes exceeds the limit of {limit} bytes",
                    limit_bytes=limit,
                    request_bytes=len(data),
                )
            )
        try:
            return cls.FromString(data)
        except message.DecodeError:
            return _Rejected(
                ContextEngineError(
                    "INVALID_ARGUMENT", "request is not a valid protobuf message", field="request"
                )
            )

    return deserialize


def _serializer(cls: type[message.Message]) -> Callable[[Any], bytes]:
    """Serializes a response message; a servicer may also return the encoded bytes itself (used
    where responses are assembled from cached encoded pieces)."""

    def serialize(response: Any) -> bytes:
        if isinstance(response, bytes):
            return response
        data: bytes = cls.SerializeToString(response)
        return data

    return serialize


def _status_name(context: Context) -> str:
    # ``code()`` is None until a status is set, although the stubs say otherwise.
    name: str | None = getattr(context.code(), "name", None)
    return name or "OK"


def _log(method: str, code: str, start: float, context: Context) -> None:
    if _LOG.isEnabledFor(logging.INFO):
        _LOG.info(
            "rpc method=%s code=%s ms=%.2f peer=%s",
            method,
            code,
            (time.perf_counter() - start) * 1000.0,
            context.peer(),
        )


class _RpcScope:
    """Wraps one RPC: maps errors to statuses and logs one line when it ends."""

    def __init__(self, method: str, context: Context) -> None:
        self._method = method
        self._context = context
        self._start = time.perf_counter()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        code = "OK"
        context = self._context
        try:
            if isinstance(exc, ContextEngineError):
                code = exc.code.value
                await context.abort_with_status(to_status(exc))  # raises AbortError
            elif isinstance(exc, asyncio.CancelledError):
                code = "CANCELLED"
            elif isinstance(exc, grpc.aio.AbortError):
                code = _status_name(context)
            elif isinstance(exc, Exception):
                code = "INTERNAL"
                await context.abort_with_status(to_status(internal_error(exc)))
            elif exc is not None:
                code = type(exc).__name__
            return False
        finally:
            _log(self._method, code, self._start, context)


def _unary(method: str, fn: Callable[[Any, Context], Awaitable[Any]]) -> Callable[..., Any]:
    async def behavior(request: Any, context: Context) -> Any:
        async with _RpcScope(method, context):
            if isinstance(request, _Rejected):
                raise request.error
            return await fn(request, context)

    return behavior


def _server_stream(
    method: str, fn: Callable[[Any, Context], AsyncIterator[Any]]
) -> Callable[..., Any]:
    async def behavior(request: Any, context: Context) -> AsyncIterator[Any]:
        async with _RpcScope(method, context):
            if isinstance(request, _Rejected):
                raise request.error
            async for item in fn(request, context):
                yield item

    return behavior


async def _checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A client's request stream, failing the RPC at the first rejected message."""
    async for request in requests:
        if isinstance(request, _Rejected):
            raise request.error
        yield request


def _client_stream(
    method: str, fn: Callable[[AsyncIterator[Any], Context], Awaitable[Any]]
) -> Callable[..., Any]:
    async def behavior(requests: AsyncIterator[Any], context: Context) -> Any:
        async with _RpcScope(method, context):
            return await fn(_checked(requests), context)

    return behavior


def _bidi_stream(
    method: str, fn: Callable[[AsyncIterator[Any], Context], AsyncIterator[Any]]
) -> Callable[..., Any]:
    async def behavior(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
        async with _RpcScope(method, context):
            async for item in fn(_checked(requests), context):
                yield item

    return behavior


_WRAPPERS: dict[tuple[bool, bool], tuple[Callable[..., Any], Callable[..., Any]]] = {
    # (client streaming, server streaming) -> (behaviour wrapper, grpc handler factory)
    (False, False): (_unary, grpc.unary_unary_rpc_method_handler),
    (False, True): (_server_stream, grpc.unary_stream_rpc_method_handler),
    (True, False): (_client_stream, grpc.stream_unary_rpc_method_handler),
    (True, True): (_bidi_stream, grpc.stream_stream_rpc_method_handler),
}


def generic_handler(
    service: descriptor.ServiceDescriptor, servicer: object, max_request_bytes: int
) -> grpc.GenericRpcHandler:
    """A handler serving every method of ``service`` from the same-named servicer methods."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for m in service.methods:
        request_cls = message_factory.GetMessageClass(m.input_type)
        response_cls = message_factory.GetMessageClass(m.output_type)
        wrap, make_handler = _WRAPPERS[(m.client_streaming, m.server_streaming)]
        handlers[m.name] = make_handler(
            wrap(m.full_name, getattr(servicer, m.name)),
            request_deserializer=_deserializer(request_cls, max_request_bytes),
            response_serializer=_serializer(response_cls),
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)
