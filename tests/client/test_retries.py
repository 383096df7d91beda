"""The Python client retries exactly the RPCs whose proto declares an ``idempotency_level``.

The declaration is read three ways and must agree: the proto text (``option idempotency_level``
under each ``rpc``), the generated descriptors the client reads (``_retries``), and the client's
behaviour against a server that answers every call UNAVAILABLE (how many attempts arrive).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.client._retries import ALL_METHODS, RETRYABLE_METHODS, is_retryable
from contextengine.v1 import compaction_service_pb2 as kpb, config_pb2, content_pb2, event_pb2

pytestmark = pytest.mark.service

PROTO_DIR = Path(__file__).resolve().parents[2] / "proto" / "contextengine" / "v1"

#: the RPCs a repeat could do twice: never retried
NEVER_RETRIED = {
    "SessionService/CreateSession",
    "SessionService/RewindSession",
    "CompactionService/Compact",
    "CompactionService/CommitCompaction",
    "ContextToolsService/CallContextTool",
}


def _declared_in_proto_text() -> tuple[set[str], set[str]]:
    """(every RPC, those with an idempotency_level option), from the .proto files' text."""
    every: set[str] = set()
    declared: set[str] = set()
    rpc = re.compile(
        r"rpc (\w+)\([^)]*\) returns \([^)]*\)\s*(;|\{\s*option idempotency_level = "
        r"(NO_SIDE_EFFECTS|IDEMPOTENT);\s*\})"
    )
    for path in sorted(PROTO_DIR.glob("*_service.proto")):
        text = path.read_text()
        service = re.search(r"^service (\w+) \{", text, re.M)
        assert service is not None, path
        for match in rpc.finditer(text):
            name = f"{service.group(1)}/{match.group(1)}"
            every.add(name)
            if match.group(3):
                declared.add(name)
        assert text.count("rpc ") == sum(1 for _ in rpc.finditer(text)), path
    return every, declared


def test_the_retry_set_is_the_protos_declaration() -> None:
    every, declared = _declared_in_proto_text()
    assert every == ALL_METHODS
    assert declared == RETRYABLE_METHODS
    assert ALL_METHODS - RETRYABLE_METHODS == NEVER_RETRIED


def test_an_unknown_method_name_is_an_error_not_a_silent_no_retry() -> None:
    assert is_retryable("SessionService/GetSession")
    assert not is_retryable("SessionService/CreateSession")
    with pytest.raises(KeyError):
        is_retryable("SessionService/GetSesion")


class _Unavailable(grpc.GenericRpcHandler):
    """Answers every call UNAVAILABLE and counts the attempts per method."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[bytes, bytes]:
        method = handler_call_details.method.removeprefix("/contextengine.v1.")

        async def refuse(_request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            self.attempts[method] += 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "try again")
            raise AssertionError("unreachable")

        return grpc.unary_unary_rpc_method_handler(refuse)


@pytest.fixture
async def refusing() -> AsyncIterator[tuple[str, _Unavailable]]:
    handler = _Unavailable()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", handler
    finally:
        await server.stop(None)


ATTEMPTS = 3
_EVENT = event_pb2.Event(author="user")
_PLAN = kpb.CompactionPlan(based_on_sequence=1, first_sequence=1, last_sequence=1)

#: every unary RPC through the client's own method (DeleteSession with allow_missing: its one
#: request-level condition; without it, it is tried once, checked below)
CALLS: dict[str, Callable[[ContextEngineClient], Awaitable[object]]] = {
    "SessionService/CreateSession": lambda c: c.create_session("a", "u", "s"),
    "SessionService/GetSession": lambda c: c.get_session("a", "u", "s"),
    "SessionService/ListSessions": lambda c: c.list_sessions_page("a"),
    "SessionService/DeleteSession": lambda c: c.delete_session("a", "u", "s", allow_missing=True),
    "SessionService/AppendEvent": lambda c: c.append_event("a", "u", "s", _EVENT),
    "SessionService/AppendEvents": lambda c: c.append_events("a", "u", "s", [_EVENT]),
    "SessionService/ListEvents": lambda c: c.list_events_page("a", "u", "s"),
    "SessionService/RewindSession": lambda c: c.rewind_session("a", "u", "s", "i"),
    "SessionService/GetUserState": lambda c: c.get_user_state("a", "u"),
    "SessionService/GetAppConfig": lambda c: c.get_app_config("a"),
    "SessionService/UpdateAppConfig": lambda c: c.update_app_config(
        config_pb2.AppConfig(app_name="a")
    ),
    "SessionService/GetSessionConfig": lambda c: c.get_session_config("a", "u", "s"),
    "SessionService/UpdateSessionConfig": lambda c: c.update_session_config(
        "a", "u", "s", config_pb2.SessionConfig()
    ),
    "ContextService/BuildContext": lambda c: c.build_context("a", "u", "s"),
    "CompactionService/EndInvocation": lambda c: c.end_invocation("a", "u", "s"),
    "CompactionService/Compact": lambda c: c.compact("a", "u", "s"),
    "CompactionService/PlanCompaction": lambda c: c.plan_compaction("a", "u", "s"),
    "CompactionService/CommitCompaction": lambda c: c.commit_compaction(
        "a", "u", "s", _PLAN, "summary"
    ),
    "CompactionService/ExpandSummary": lambda c: c.expand_summary("a", "u", "s", 1),
    "CompactionService/GetCompactionStatus": lambda c: c.compaction_status("a", "u", "s"),
    "MemoryService/AddSessionToMemory": lambda c: c.add_session_to_memory("a", "u", "s"),
    "MemoryService/AddEventsToMemory": lambda c: c.add_events_to_memory("a", "u", "s", [1]),
    "MemoryService/SearchMemory": lambda c: c.search_memory("a", "u", "q"),
    "MemoryService/DeleteMemory": lambda c: c.delete_memory("a", "u"),
    "ContextToolsService/ListContextTools": lambda c: c.list_context_tools("a"),
    "ContextToolsService/CallContextTool": lambda c: c.call_context_tool(
        "a", "u", "s", content_pb2.FunctionCall(name="context_summarize")
    ),
}

STREAMS = {"SubscriptionService/SubscribeEvents", "SubscriptionService/WatchSessionState"}


def test_every_unary_rpc_is_exercised() -> None:
    assert set(CALLS) == ALL_METHODS - STREAMS


async def test_the_client_retries_exactly_the_declared_rpcs(
    refusing: tuple[str, _Unavailable],
) -> None:
    target, handler = refusing
    async with ContextEngineClient(target, attempts=ATTEMPTS, timeout=10.0) as client:
        for name, call in CALLS.items():
            with pytest.raises(ContextEngineError) as raised:
                await call(client)
            assert raised.value.code == grpc.StatusCode.UNAVAILABLE, name
        with pytest.raises(ContextEngineError):
            await client.delete_session("a", "u", "s2")  # without allow_missing: once
    expected = {name: ATTEMPTS if name in RETRYABLE_METHODS else 1 for name in CALLS}
    expected["SessionService/DeleteSession"] += 1
    assert dict(handler.attempts) == expected
