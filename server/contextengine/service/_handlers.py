"""Builds gRPC method handlers for a servicer, with the cross-cutting behaviour every RPC shares.

Done once per service at start-up (no per-call interceptor dispatch):

* the request size limit, checked on the raw bytes (RESOURCE_EXHAUSTED / REQUEST_TOO_LARGE with
  an ErrorInfo, instead of the transport's bare status);
* undecodable requests become INVALID_ARGUMENT instead of INTERNAL;
* with tokens configured, the one authorization check (``contextengine.auth.Authorizer``) of
  the caller's bearer token against what the request touches, before the servicer runs
  (UNAUTHENTICATED / PERMISSION_DENIED with ErrorInfo);
* :class:`ContextEngineError` becomes a status with ErrorInfo; any other exception becomes
  INTERNAL (logged with its traceback);
* one log line per RPC: method, status code, duration, peer (and, with an observer, the
  fields it adds: app, user, session, trace id), also given to the log record as the ``extra``
  ``rpc`` (a dict) for structured formatters;
* an optional :class:`RpcObserver` (``_observe``) told of each RPC's start and end (metrics,
  traces).

The call object must not be touched once the client may have gone away: grpc releases the core
call as soon as the RPC's task ends, and a server-streaming handler whose task was cancelled in
the middle of a write is finalized later (its generator closed by the garbage collector), when
``context.peer()`` or ``abort`` would dereference a released call and crash the process
(SIGSEGV). So the peer is read once when the RPC starts, and an RPC that ends by cancellation or
by its generator being closed touches nothing on the context.
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

from contextengine.auth import Authorizer
from contextengine.core.errors import ContextEngineError
from contextengine.service._observe import RpcCall, RpcObserver
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
    # ``code()`` is None until a status is set, although the stubs say otherwise. It reads the
    # Python-side state of the call only.
    name: str | None = getattr(context.code(), "name", None)
    return name or "OK"


class _RpcScope:
    """Wraps one RPC: maps errors to statuses, tells the observer, logs one line when it ends."""

    __slots__ = ("_call", "_context", "_method", "_peer", "_start")

    def __init__(
        self,
        method: str,
        context: Context,
        observer: RpcObserver | None = None,
        request: object | None = None,
    ) -> None:
        self._method = method
        self._context = context
        self._start = time.perf_counter()
        # Read now, while the call is certainly alive (see the module docstring).
        self._peer = context.peer() if _LOG.isEnabledFor(logging.INFO) else ""
        self._call: RpcCall | None = None
        if observer is not None:
            metadata = context.invocation_metadata() or ()
            self._call = observer.begin(
                method, metadata, None if isinstance(request, _Rejected) else request
            )

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        code = "OK"
        context = self._context
        try:
            if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
                # The client went away (cancel, deadline, disconnect) or grpc stopped reading
                # the stream's generator: the call may be released already.
                code = "CANCELLED"
            elif isinstance(exc, grpc.aio.AbortError):
                code = _status_name(context)
            elif isinstance(exc, Exception):
                error = exc if isinstance(exc, ContextEngineError) else internal_error(exc)
                code = error.code.value
                # ``done()`` (Python-side state): a status was already sent, nothing more may go
                # to the call.
                if not context.done():
                    await context.abort_with_status(to_status(error))  # raises AbortError
            elif exc is not None:
                code = type(exc).__name__
            return False
        finally:
            seconds = time.perf_counter() - self._start
            call = self._call
            if _LOG.isEnabledFor(logging.INFO):
                fields = {
                    "method": self._method,
                    "code": code,
                    "ms": round(seconds * 1000.0, 3),
                    "peer": self._peer,
                }
                if call is not None:
                    fields.update(call.log_fields())
                _LOG.info(
                    "rpc method=%s code=%s ms=%.2f peer=%s",
                    self._method,
                    code,
                    seconds * 1000.0,
                    self._peer,
                    extra={"rpc": fields},
                )
            if call is not None:
                call.end(code, seconds)


def _admit(method: str, request: Any, metadata: Any, guard: Authorizer | None) -> None:
    """Raises what keeps ``request`` from running: with auth, a missing or unknown token first
    (a caller without one learns nothing, not even that its request was malformed or too
    large), then a request that could not be accepted, then the grant's check."""
    if isinstance(request, _Rejected):
        if guard is not None:
            guard.authenticate(metadata)
        raise request.error
    if guard is not None:
        guard.check(method, request, metadata)


def _metadata(context: Context, guard: Authorizer | None) -> Any:
    """The call's metadata, read only when there is a guard to check it."""
    return None if guard is None else context.invocation_metadata()


def _unary(
    method: str,
    fn: Callable[[Any, Context], Awaitable[Any]],
    guard: Authorizer | None,
    observer: RpcObserver | None = None,
) -> Callable[..., Any]:
    async def behavior(request: Any, context: Context) -> Any:
        async with _RpcScope(method, context, observer, request):
            _admit(method, request, _metadata(context, guard), guard)
            return await fn(request, context)

    return behavior


def _server_stream(
    method: str,
    fn: Callable[[Any, Context], AsyncIterator[Any]],
    guard: Authorizer | None,
    observer: RpcObserver | None = None,
) -> Callable[..., Any]:
    async def behavior(request: Any, context: Context) -> AsyncIterator[Any]:
        async with _RpcScope(method, context, observer, request):
            _admit(method, request, _metadata(context, guard), guard)
            async for item in fn(request, context):
                yield item

    return behavior


async def _checked(
    requests: AsyncIterator[Any], method: str, context: Context, guard: Authorizer | None
) -> AsyncIterator[Any]:
    """A client's request stream, failing the RPC at the first rejected message (or, with
    auth, the first message the caller may not send)."""
    metadata = context.invocation_metadata() if guard is not None else None
    async for request in requests:
        _admit(method, request, metadata, guard)
        yield request


def _client_stream(
    method: str,
    fn: Callable[[AsyncIterator[Any], Context], Awaitable[Any]],
    guard: Authorizer | None,
    observer: RpcObserver | None = None,
) -> Callable[..., Any]:
    async def behavior(requests: AsyncIterator[Any], context: Context) -> Any:
        async with _RpcScope(method, context, observer):
            return await fn(_checked(requests, method, context, guard), context)

    return behavior


def _bidi_stream(
    method: str,
    fn: Callable[[AsyncIterator[Any], Context], AsyncIterator[Any]],
    guard: Authorizer | None,
    observer: RpcObserver | None = None,
) -> Callable[..., Any]:
    async def behavior(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
        async with _RpcScope(method, context, observer):
            async for item in fn(_checked(requests, method, context, guard), context):
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
    service: descriptor.ServiceDescriptor,
    servicer: object,
    max_request_bytes: int,
    guard: Authorizer | None = None,
    observer: RpcObserver | None = None,
) -> grpc.GenericRpcHandler:
    """A handler serving every method of ``service`` from the same-named servicer methods;
    ``guard`` (tokens configured) authorizes every call first; ``observer`` (if any) is told of
    every call (``_observe``: metrics, traces, log fields)."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for m in service.methods:
        request_cls = message_factory.GetMessageClass(m.input_type)
        response_cls = message_factory.GetMessageClass(m.output_type)
        wrap, make_handler = _WRAPPERS[(m.client_streaming, m.server_streaming)]
        handlers[m.name] = make_handler(
            wrap(m.full_name, getattr(servicer, m.name), guard, observer),
            request_deserializer=_deserializer(request_cls, max_request_bytes),
            response_serializer=_serializer(response_cls),
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)
