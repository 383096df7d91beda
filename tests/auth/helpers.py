"""Shared pieces of the auth tests: token files, one request per RPC, raw calls through the real
gRPC stubs' method paths with or without a bearer token, and the outcome of each."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor, message, message_factory
from google.rpc import error_details_pb2, status_pb2

from contextengine.auth import hash_token
from contextengine.transport import SERVICES
from contextengine.v1 import subscription_service_pb2 as spb

#: what the brief (issue #19) says each RPC needs, written independently of the server's table
EXPECTED_ROLE: dict[str, str] = {
    "SessionService.CreateSession": "write",
    "SessionService.GetSession": "read",
    "SessionService.ListSessions": "read",
    "SessionService.DeleteSession": "write",
    "SessionService.AppendEvent": "write",
    "SessionService.AppendEvents": "write",
    "SessionService.ListEvents": "read",
    "SessionService.RewindSession": "write",
    "SessionService.GetUserState": "read",
    "SessionService.GetAppConfig": "read",
    "SessionService.UpdateAppConfig": "admin",
    "SessionService.GetSessionConfig": "read",
    "SessionService.UpdateSessionConfig": "admin",
    "ContextService.BuildContext": "read",
    "SubscriptionService.SubscribeEvents": "read",
    "SubscriptionService.WatchSessionState": "read",
    "CompactionService.EndInvocation": "write",
    "CompactionService.Compact": "write",
    "CompactionService.PlanCompaction": "read",
    "CompactionService.CommitCompaction": "write",
    "CompactionService.ExpandSummary": "read",
    "ContextToolsService.ListContextTools": "read",
    "ContextToolsService.CallContextTool": "write",
    "CompactionService.GetCompactionStatus": "read",
    "MemoryService.AddSessionToMemory": "write",
    "MemoryService.AddEventsToMemory": "write",
    "MemoryService.SearchMemory": "read",
    "MemoryService.DeleteMemory": "admin",
}
ROLES = ("read", "write", "admin")
RANK = {role: index for index, role in enumerate(ROLES)}

AUTH_CODES = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})


def methods() -> Iterator[descriptor.MethodDescriptor]:
    for service in SERVICES:
        yield from service.methods


def short(method: descriptor.MethodDescriptor) -> str:
    return f"{method.containing_service.name}.{method.name}"


@dataclass(frozen=True)
class Token:
    """One entry of a test token file."""

    token: str
    role: str
    apps: Sequence[str]
    users: Sequence[str] | None = None

    def entry(self, name: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": name,
            "sha256": hash_token(self.token),
            "role": self.role,
            "apps": list(self.apps),
        }
        if self.users is not None:
            entry["users"] = list(self.users)
        return entry


def write_tokens(path: Path, tokens: dict[str, Token]) -> Path:
    """A JSON token file (hashed tokens) with ``tokens`` by name."""
    path.write_text(json.dumps({"tokens": [t.entry(name) for name, t in tokens.items()]}))
    return path


def request(
    method: descriptor.MethodDescriptor,
    app: str,
    user: str,
    session: str = "s1",
    *,
    scope: int | None = None,
) -> message.Message:
    """A request of ``method`` touching ``app``/``user``/``session`` (just the ids: whether it
    is otherwise valid does not matter to the authorization, which runs first)."""
    cls = message_factory.GetMessageClass(method.input_type)
    fields = {f.name for f in method.input_type.fields}
    ids = {"app_name": app, "user_id": user, "session_id": session}
    values = {name: value for name, value in ids.items() if name in fields}
    built = cls(**values)
    if method.name == "UpdateAppConfig":
        built.config.app_name = app  # type: ignore[attr-defined]
    if method.name == "SubscribeEvents":
        # a user scope names no session, an app scope no user either
        built.scope = spb.SUBSCRIPTION_SCOPE_SESSION if scope is None else scope  # type: ignore[attr-defined]
        if scope in (spb.SUBSCRIPTION_SCOPE_USER, spb.SUBSCRIPTION_SCOPE_APP):
            built.session_id = ""  # type: ignore[attr-defined]
        if scope == spb.SUBSCRIPTION_SCOPE_APP:
            built.user_id = ""  # type: ignore[attr-defined]
    return built


@dataclass(frozen=True)
class Outcome:
    code: grpc.StatusCode
    reason: str

    @property
    def denied(self) -> bool:
        return self.code in AUTH_CODES


def reason_of(error: grpc.aio.AioRpcError) -> str:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
    return ""


async def call(
    channel: grpc.aio.Channel,
    method: descriptor.MethodDescriptor,
    body: message.Message,
    token: str | None,
    *,
    metadata: Sequence[tuple[str, str]] | None = None,
    seconds: float = 5.0,
) -> Outcome:
    """Calls ``method`` and reports how it ended (OK once a stream delivered its first message
    or ran into its deadline: the authorization, which runs first, let it through)."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    response_cls = message_factory.GetMessageClass(method.output_type)
    if metadata is None:
        metadata = [] if token is None else [("authorization", f"Bearer {token}")]
    try:
        if method.server_streaming:
            stream = channel.unary_stream(
                path,
                request_serializer=type(body).SerializeToString,
                response_deserializer=response_cls.FromString,
            )
            frames = stream(body, metadata=metadata, timeout=seconds)
            async for _ in frames:
                frames.cancel()
                break
        else:
            unary = channel.unary_unary(
                path,
                request_serializer=type(body).SerializeToString,
                response_deserializer=response_cls.FromString,
            )
            await unary(body, metadata=metadata, timeout=seconds)
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.CANCELLED:
            return Outcome(grpc.StatusCode.OK, "")
        return Outcome(error.code(), reason_of(error))
    return Outcome(grpc.StatusCode.OK, "")
