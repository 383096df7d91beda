"""Which RPCs may be retried: read from the protos, where each method declares it.

Every method of ``proto/contextengine/v1/*_service.proto`` carries the standard
``idempotency_level`` option (NO_SIDE_EFFECTS for reads, IDEMPOTENT for writes a repeat leaves as
one did); the client retries exactly those that declare one, after UNAVAILABLE, and no other.
The generated descriptors hold the option, so the rule is written once, in the contract, and the
TypeScript, Java and Kotlin clients read it the same way.
"""

from __future__ import annotations

from google.protobuf import descriptor, descriptor_pb2

from contextengine.v1 import (
    compaction_service_pb2,
    context_service_pb2,
    context_tools_service_pb2,
    memory_service_pb2,
    session_service_pb2,
    subscription_service_pb2,
)

_FILES = (
    session_service_pb2.DESCRIPTOR,
    context_service_pb2.DESCRIPTOR,
    subscription_service_pb2.DESCRIPTOR,
    compaction_service_pb2.DESCRIPTOR,
    memory_service_pb2.DESCRIPTOR,
    context_tools_service_pb2.DESCRIPTOR,
)

_UNKNOWN = descriptor_pb2.MethodOptions.IDEMPOTENCY_UNKNOWN


def _methods() -> list[descriptor.MethodDescriptor]:
    return [m for f in _FILES for s in f.services_by_name.values() for m in s.methods]


def idempotency_level(method: descriptor.MethodDescriptor) -> int:
    """The method's declared ``idempotency_level`` (a ``MethodOptions.IdempotencyLevel``)."""
    return method.GetOptions().idempotency_level


#: "Service/Method" (e.g. "SessionService/GetSession") of every RPC whose proto declares it safe
#: to repeat (``idempotency_level`` NO_SIDE_EFFECTS or IDEMPOTENT)
RETRYABLE_METHODS: frozenset[str] = frozenset(
    f"{m.containing_service.name}/{m.name}" for m in _methods() if idempotency_level(m) != _UNKNOWN
)

#: "Service/Method" of every RPC of the contract
ALL_METHODS: frozenset[str] = frozenset(f"{m.containing_service.name}/{m.name}" for m in _methods())


def is_retryable(method: str) -> bool:
    """Whether ``method`` ("Service/Method") may be repeated, as its proto declares. KeyError for
    a name that is no RPC of the contract (a typo would otherwise silently disable retries)."""
    if method not in ALL_METHODS:
        raise KeyError(f"no such RPC: {method}")
    return method in RETRYABLE_METHODS
