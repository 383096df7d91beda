"""The hook through which the transport observes every RPC (metrics, a span, log fields).

The handler wrapper (``_handlers``) calls ``RpcObserver.begin`` when an RPC starts, in the RPC's
own task (so a span it makes current is the parent of the spans of the work the RPC does), and
``RpcCall.end`` once when it ends. The sidecar's implementation is
``contextengine.observability.rpc``; without one nothing is observed (``generic_handler``'s
default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["Metadata", "RpcCall", "RpcObserver"]

#: the call's invocation metadata: ``(key, value)`` pairs, keys in lower case
Metadata = Iterable[tuple[str, str | bytes]]


class RpcCall(Protocol):
    """One observed RPC."""

    def log_fields(self) -> Mapping[str, str]:
        """Fields for the RPC's log line besides method, code, latency and peer (app, user,
        session, trace id): ids only, never contents or tokens."""
        ...

    def end(self, code: str, seconds: float) -> None:
        """The RPC ended with status ``code`` (a ``grpc.StatusCode`` name) after ``seconds``.
        Called in the RPC's task, except for a stream the client abandoned (``CANCELLED``),
        whose end may run anywhere."""
        ...


class RpcObserver(Protocol):
    """Starts the observation of each RPC."""

    def begin(self, method: str, metadata: Metadata, request: object | None) -> RpcCall:
        """``method`` is the full name (``contextengine.v1.SessionService.AppendEvent``);
        ``request`` the request message (None for client streams, or a request that could not
        be decoded)."""
        ...
