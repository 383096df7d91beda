"""The Python client's conformance runner: the shared YAML scenarios through ContextEngineClient.

    python clients/python/conformance/runner.py --target 127.0.0.1:50151 clients/conformance/scenarios

The reference runner (clients/conformance/python_runner.py) sends each step as a raw gRPC call;
this one reads the scenarios, matches and reports with the reference runner's own code, but sends
every step through the client's methods (its deadlines, retries, event ids, error mapping into
``RpcError`` and followed streams), as the TypeScript, Java and Kotlin runners do with theirs. A
request field the client's method cannot send fails the step (it names the field) rather than
being dropped. Same options and output as the reference runner; the records say
``"runner": "python-client"``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

from google.protobuf import json_format, message

from contextengine.client import ContextEngineClient, RpcError
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    memory_service_pb2 as mpb,
    session_service_pb2 as pb,
    subscription_service_pb2 as spb,
)

# The reference runner is a script beside the scenarios, not a package: import it from there.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance"))
import python_runner as ref

NAME = "python-client"

#: (client, request, timeout in seconds) -> what the client's method returns
Adapter = Callable[[ContextEngineClient, Any, float], Awaitable[Any]]


@dataclass(frozen=True)
class Rpc:
    """How one RPC goes through the client: the request fields the adapter sends, the adapter,
    and, when the client's method returns one field of the response rather than the response,
    the response type and that field."""

    fields: frozenset[str]
    call: Adapter
    wrap: tuple[type[message.Message], str] | None = None


def _opt(request: message.Message, name: str) -> Any:
    """The field's value when the request sets it (presence for ``optional`` and message fields,
    a non-default value otherwise), else None: what the client's optional arguments take. A
    message the request leaves out is passed as None too, and the client leaves it out as well
    (the generated constructors skip None), so the server's MISSING_FIELD is what comes back."""
    try:
        present = request.HasField(name)
    except ValueError:  # a plain proto3 scalar: set means not the default
        present = bool(getattr(request, name))
    return getattr(request, name) if present else None


def _json(struct: message.Message) -> Any:
    return json_format.MessageToDict(struct)


def _ids(*more: str) -> frozenset[str]:
    return frozenset({"app_name", "user_id", "session_id", *more})


def _compaction_target(request: Any) -> dict[str, Any]:
    """What ``compact`` and ``plan_compaction`` share: the trigger and which view to compact."""
    return {
        "trigger": request.trigger,
        "agent_name": request.agent_name,
        "branch": _opt(request, "branch"),
        "isolation_scope": _opt(request, "isolation_scope"),
    }


RPCS: dict[str, Rpc] = {
    "SessionService/CreateSession": Rpc(
        _ids("state", "config"),
        lambda c, r, _t: c.create_session(
            r.app_name, r.user_id, r.session_id, _json(r.state), config=_opt(r, "config")
        ),
        (pb.CreateSessionResponse, "session"),
    ),
    "SessionService/GetSession": Rpc(
        _ids("num_recent_events", "after_timestamp", "after_sequence"),
        lambda c, r, _t: c.get_session(
            r.app_name,
            r.user_id,
            r.session_id,
            num_recent_events=_opt(r, "num_recent_events"),
            after_timestamp=_opt(r, "after_timestamp"),
            after_sequence=_opt(r, "after_sequence"),
        ),
        (pb.GetSessionResponse, "session"),
    ),
    "SessionService/ListSessions": Rpc(
        frozenset({"app_name", "user_id", "page_size", "page_token"}),
        lambda c, r, _t: c.list_sessions_page(
            r.app_name, r.user_id, page_size=r.page_size, page_token=r.page_token
        ),
    ),
    "SessionService/DeleteSession": Rpc(
        _ids("allow_missing"),
        lambda c, r, _t: c.delete_session(
            r.app_name, r.user_id, r.session_id, allow_missing=r.allow_missing
        ),
        (pb.DeleteSessionResponse, "deleted"),
    ),
    "SessionService/AppendEvent": Rpc(
        _ids("event", "expected_last_sequence"),
        lambda c, r, _t: c.append_event(
            r.app_name,
            r.user_id,
            r.session_id,
            _opt(r, "event"),
            expected_last_sequence=_opt(r, "expected_last_sequence"),
        ),
    ),
    "SessionService/AppendEvents": Rpc(
        _ids("events", "expected_last_sequence"),
        lambda c, r, _t: c.append_events(
            r.app_name,
            r.user_id,
            r.session_id,
            list(r.events),
            expected_last_sequence=_opt(r, "expected_last_sequence"),
        ),
    ),
    "SessionService/ListEvents": Rpc(
        _ids("after_sequence", "page_size", "page_token"),
        lambda c, r, _t: c.list_events_page(
            r.app_name,
            r.user_id,
            r.session_id,
            after_sequence=r.after_sequence,
            page_size=r.page_size,
            page_token=r.page_token,
        ),
    ),
    "SessionService/RewindSession": Rpc(
        _ids("rewind_before_invocation_id"),
        lambda c, r, _t: c.rewind_session(
            r.app_name, r.user_id, r.session_id, r.rewind_before_invocation_id
        ),
        (pb.RewindSessionResponse, "event"),
    ),
    "SessionService/GetAppConfig": Rpc(
        frozenset({"app_name"}),
        lambda c, r, _t: c.get_app_config(r.app_name),
        (pb.GetAppConfigResponse, "config"),
    ),
    "SessionService/UpdateAppConfig": Rpc(
        frozenset({"config"}),
        lambda c, r, _t: c.update_app_config(_opt(r, "config")),
        (pb.UpdateAppConfigResponse, "config"),
    ),
    "SessionService/GetSessionConfig": Rpc(
        _ids(), lambda c, r, _t: c.get_session_config(r.app_name, r.user_id, r.session_id)
    ),
    "SessionService/UpdateSessionConfig": Rpc(
        _ids("config"),
        lambda c, r, _t: c.update_session_config(
            r.app_name, r.user_id, r.session_id, _opt(r, "config")
        ),
    ),
    "ContextService/BuildContext": Rpc(
        _ids(
            "agent_name",
            "branch",
            "isolation_scope",
            "include_contents",
            "model",
            "include_thoughts_from_other_agents",
            "user_content",
            "preload_memory",
            "memory_query",
            "system_instruction",
            "tools",
            "tool_config",
            "invocation_id",
            "skip_compaction",
            "since",
            "render",
        ),
        lambda c, r, _t: c.build_context(
            r.app_name,
            r.user_id,
            r.session_id,
            agent_name=r.agent_name,
            branch=_opt(r, "branch"),
            isolation_scope=_opt(r, "isolation_scope"),
            include_contents=r.include_contents,
            model=_opt(r, "model"),
            include_thoughts_from_other_agents=r.include_thoughts_from_other_agents,
            user_content=_opt(r, "user_content"),
            preload_memory=r.preload_memory,
            memory_query=_opt(r, "memory_query"),
            system_instruction=_opt(r, "system_instruction"),
            tools=[_json(tool) for tool in r.tools],
            tool_config=_json(r.tool_config) if r.HasField("tool_config") else None,
            invocation_id=r.invocation_id,
            skip_compaction=r.skip_compaction,
            since=_opt(r, "since"),
            render=_opt(r, "render"),
        ),
    ),
    "MemoryService/AddSessionToMemory": Rpc(
        _ids(), lambda c, r, _t: c.add_session_to_memory(r.app_name, r.user_id, r.session_id)
    ),
    "MemoryService/AddEventsToMemory": Rpc(
        _ids("sequences"),
        lambda c, r, _t: c.add_events_to_memory(
            r.app_name, r.user_id, r.session_id, list(r.sequences)
        ),
    ),
    "MemoryService/SearchMemory": Rpc(
        frozenset({"app_name", "user_id", "query", "limit"}),
        lambda c, r, _t: c.search_memory(r.app_name, r.user_id, r.query, limit=r.limit),
    ),
    "MemoryService/DeleteMemory": Rpc(
        _ids(),
        lambda c, r, _t: c.delete_memory(r.app_name, r.user_id, r.session_id),
        (mpb.DeleteMemoryResponse, "deleted_count"),
    ),
    "CompactionService/EndInvocation": Rpc(
        _ids("invocation_id"),
        lambda c, r, _t: c.end_invocation(r.app_name, r.user_id, r.session_id, r.invocation_id),
        (kpb.EndInvocationResponse, "scheduled"),
    ),
    "CompactionService/Compact": Rpc(
        _ids("trigger", "agent_name", "branch", "isolation_scope"),
        lambda c, r, t: c.compact(
            r.app_name, r.user_id, r.session_id, **_compaction_target(r), deadline_seconds=t
        ),
    ),
    "CompactionService/PlanCompaction": Rpc(
        _ids("trigger", "agent_name", "branch", "isolation_scope", "ignore_trigger"),
        lambda c, r, _t: c.plan_compaction(
            r.app_name,
            r.user_id,
            r.session_id,
            **_compaction_target(r),
            ignore_trigger=r.ignore_trigger,
        ),
    ),
    "CompactionService/CommitCompaction": Rpc(
        _ids(
            "based_on_sequence",
            "first_sequence",
            "last_sequence",
            "rolls_up_sequence",
            "isolation_scope",
            "summary",
            "usage_metadata",
        ),
        lambda c, r, _t: c.commit_compaction(
            r.app_name,
            r.user_id,
            r.session_id,
            _plan_of(r),
            _opt(r, "summary"),
            usage_metadata=_opt(r, "usage_metadata"),
        ),
        (kpb.CommitCompactionResponse, "summary"),
    ),
    "CompactionService/ExpandSummary": Rpc(
        _ids("summary_sequence"),
        lambda c, r, _t: c.expand_summary(r.app_name, r.user_id, r.session_id, r.summary_sequence),
    ),
    "CompactionService/GetCompactionStatus": Rpc(
        _ids(), lambda c, r, _t: c.compaction_status(r.app_name, r.user_id, r.session_id)
    ),
    "ContextToolsService/ListContextTools": Rpc(
        frozenset({"app_name", "user_id"}),
        lambda c, r, _t: c.list_context_tools(r.app_name, r.user_id),
    ),
    "ContextToolsService/CallContextTool": Rpc(
        _ids("agent_name", "branch", "isolation_scope", "call", "invocation_id"),
        lambda c, r, _t: c.context_tools(
            r.app_name,
            r.user_id,
            r.session_id,
            agent_name=r.agent_name,
            branch=_opt(r, "branch"),
            isolation_scope=_opt(r, "isolation_scope"),
        ).call(r.call, invocation_id=r.invocation_id),
    ),
}


def _response(wrap: tuple[type[message.Message], str], got: Any) -> message.Message:
    """The RPC's response around what the client's method returned (its one field)."""
    response, field = wrap
    out = response()
    if isinstance(got, message.Message):
        getattr(out, field).CopyFrom(got)
    else:
        setattr(out, field, got)
    return out


def _plan_of(request: kpb.CommitCompactionRequest) -> kpb.CompactionPlan:
    """The plan a caller of ``commit_compaction`` passes: the request's range fields."""
    plan = kpb.CompactionPlan(
        based_on_sequence=request.based_on_sequence,
        first_sequence=request.first_sequence,
        last_sequence=request.last_sequence,
        rolls_up_sequence=request.rolls_up_sequence,
    )
    if request.HasField("isolation_scope"):
        plan.isolation_scope = request.isolation_scope
    return plan


def _check_fields(name: str, request: message.Message, sent: frozenset[str]) -> None:
    unsent = sorted(f.name for f, _ in request.ListFields() if f.name not in sent)
    if unsent:
        raise ref.StepFailure(f"ContextEngineClient cannot send {name} field(s) {unsent}")


def _failure(err: Exception) -> ref.Failure:
    rpc = cast(RpcError, err)
    return ref.Failure(rpc.code.name, rpc.message, rpc.reason, rpc.metadata)


class ClientStream(ref.Stream):
    """A stream followed by the client (``follow_events`` / ``watch_session_state``): the
    client resubscribes by itself; a scenario's ``resume`` opens a new one."""

    errors: ClassVar[tuple[type[Exception], ...]] = (RpcError,)

    def open(self) -> None:
        client = cast(ContextEngineClient, self.transport)
        request = json_format.ParseDict(self.request, self.method.request())
        frames: AsyncGenerator[message.Message, None]
        if self.method.name == "SubscriptionService/SubscribeEvents":
            frames = client.follow_events(cast(spb.SubscribeEventsRequest, request))
        elif self.method.name == "SubscriptionService/WatchSessionState":
            watch = cast(spb.WatchSessionStateRequest, request)
            _check_fields(self.method.name, watch, _ids("heartbeat_seconds"))
            frames = client.watch_session_state(
                watch.app_name,
                watch.user_id,
                watch.session_id,
                heartbeat_seconds=watch.heartbeat_seconds,
            )
        else:
            raise ref.ScenarioError(f"ContextEngineClient has no stream {self.method.name}")
        self.call = frames
        self.error, self.ended, self.pending = None, False, None

    async def read(self) -> message.Message | None:
        frames = cast(AsyncGenerator[message.Message, None], self.call)
        try:
            return await anext(frames)
        except StopAsyncIteration:
            return None

    def failure(self, err: Exception) -> ref.Failure:
        return _failure(err)

    async def close(self) -> None:
        pending, frames = self.pending, self.call
        self.pending = self.call = None
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        if frames is not None:
            await cast(AsyncGenerator[message.Message, None], frames).aclose()


class ClientRunner(ref.Runner):
    """The reference runner's steps, sent through ``client``."""

    name: ClassVar[str] = NAME
    rpc_errors: ClassVar[tuple[type[Exception], ...]] = (RpcError,)
    stream_type: ClassVar[type[ref.Stream]] = ClientStream

    def __init__(self, client: ContextEngineClient, emit: Callable[[ref.Result], None]) -> None:
        super().__init__(client.channel, emit)
        self.client = client

    def transport(self) -> Any:
        return self.client

    def failure(self, err: Exception) -> ref.Failure:
        return _failure(err)

    async def unary(self, method: ref.Method, request: Mapping[str, Any], timeout_ms: float) -> Any:
        if method.streaming:
            raise ref.ScenarioError(f"{method.name} is a stream: use subscribe")
        rpc = RPCS.get(method.name)
        if rpc is None:
            raise ref.StepFailure(f"ContextEngineClient has no method for {method.name}")
        try:
            req = json_format.ParseDict(dict(request), method.request())
        except json_format.ParseError as err:
            raise ref.ScenarioError(
                f"request does not parse as {method.request.__name__}: {err}"
            ) from None
        _check_fields(method.name, req, rpc.fields)
        # The step's deadline is the client's for this call (one deadline over every attempt).
        self.client.timeout = timeout_ms / 1000
        got = await rpc.call(self.client, req, timeout_ms / 1000)
        return got if rpc.wrap is None else _response(rpc.wrap, got)


async def run_all(
    target: str,
    scenarios: Sequence[ref.Scenario],
    emit: Callable[[ref.Result], None],
) -> tuple[int, int]:
    async with ContextEngineClient(target) as client:
        return await ref.run_scenarios(ClientRunner(client, emit), scenarios)


if __name__ == "__main__":
    sys.exit(ref.main(name=NAME, run=run_all, description=__doc__.split("\n")[0]))
