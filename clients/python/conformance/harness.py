"""The Python client's conformance harness: the driver's ops (clients/conformance/driver.py,
protocol in its README) through ContextEngineClient's method named after the RPC (snake case, or
``METHODS``), its arguments taken from the request's fields of the same name; a request field no
argument takes fails the step rather than being dropped."""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from google.protobuf import json_format, message

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.v1 import compaction_service_pb2 as kpb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance"))
import driver  # the driver's protocol helpers: FrameReader, serve_stdio, resolve

#: RPCs whose client method is not the RPC's name in snake case
METHODS = {
    "ListSessions": "list_sessions_page",
    "ListEvents": "list_events_page",
    "GetCompactionStatus": "compaction_status",
    "CallContextTool": "context_tools",
    "SubscribeEvents": "follow_events",
}
PLAN = ("based_on_sequence", "first_sequence", "last_sequence", "rolls_up_sequence")


def _argument(request: message.Message, name: str, param: inspect.Parameter) -> Any:
    """The request's field ``name`` as the client's argument takes it."""
    field = request.DESCRIPTOR.fields_by_name[name]
    value = getattr(request, name)
    struct = getattr(field.message_type, "full_name", "").startswith("google.protobuf.")
    if field.is_repeated:
        return [json_format.MessageToDict(v) for v in value] if struct else list(value)
    if field.has_presence and not request.HasField(name):
        return None
    if struct:
        return json_format.MessageToDict(value)
    if not field.has_presence and param.default is None and value == field.default_value:
        return None
    return value


def _arguments(fn: Any, request: Any, timeout: float, used: set[str]) -> dict[str, Any]:
    """The client method's arguments from the request (``used``: fields sent some other way)."""
    kwargs: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        value: Any
        if name in request.DESCRIPTOR.fields_by_name:
            value = _argument(request, name, param)
            used.add(name)
        elif name == "request":
            value = request
            used.update(f.name for f, _ in request.ListFields())
        elif name == "plan":  # CommitCompaction: the plan a caller passes, from the range fields
            value = kpb.CompactionPlan(**{k: getattr(request, k) for k in PLAN})
            if request.HasField("isolation_scope"):
                value.isolation_scope = request.isolation_scope
            used.update(PLAN)
        elif name == "deadline_seconds":
            value = timeout
        else:
            continue
        kwargs[name] = value
    unsent = sorted(f.name for f, _ in request.ListFields() if f.name not in used)
    if unsent:
        raise ValueError(f"ContextEngineClient cannot send field(s) {unsent}")
    return kwargs


def _response(method: driver.Method, got: Any) -> message.Message:
    """The RPC's response, around what the client returned when that is one of its fields."""
    if isinstance(got, method.response):
        return got
    for field in method.response.DESCRIPTOR.fields:
        if field.message_type is getattr(got, "DESCRIPTOR", None):
            return method.response(**{field.name: got})
    raise TypeError(f"{type(got).__name__} is no field of {method.response.__name__}")


def _error(err: BaseException) -> dict[str, Any] | None:
    if not isinstance(err, ContextEngineError):
        return None
    fields = ("message", "reason", "metadata")
    return {"code": err.code.name} | {name: getattr(err, name) for name in fields}


class ClientHarness:
    def __init__(self) -> None:
        self.client: ContextEngineClient | None = None
        self.streams: dict[str, driver.FrameReader] = {}

    async def handle(self, op: dict[str, Any]) -> dict[str, Any]:
        kind = op["op"]
        if kind == "connect":
            self.client = ContextEngineClient(op["target"])
            return {}
        if kind in ("close", "shutdown"):
            names = [op["stream"]] if kind == "close" else list(self.streams)
            for name in names:
                if name in self.streams:
                    await self.streams.pop(name).close()
            if kind == "shutdown" and self.client is not None:
                await self.client.close()
            return {}
        if kind == "next":
            return await self.streams[op["stream"]].next(float(op["timeout_ms"]))
        assert self.client is not None
        method = driver.resolve(op["method"])
        rpc = op["method"].split("/")[1]
        fn = getattr(self.client, METHODS.get(rpc, re.sub(r"(?<!^)([A-Z])", r"_\1", rpc).lower()))
        try:
            request: Any = json_format.ParseDict(op.get("request") or {}, method.request())
            timeout = float(op.get("timeout_ms", driver.DEFAULT_CALL_TIMEOUT_MS)) / 1000
            tool = {"call", "invocation_id"} if rpc == "CallContextTool" else set()
            kwargs = _arguments(fn, request, timeout, tool)
        except (json_format.ParseError, ValueError) as err:
            return {"fail": str(err)}
        if kind == "open":
            frames = fn(**kwargs)
            self.streams[op["stream"]] = driver.FrameReader(frames, _error, frames.aclose)
            return {}
        self.client.timeout = timeout  # one deadline over every attempt of this call
        try:
            if rpc == "CallContextTool":  # through the helper a model loop uses
                tools = fn(**kwargs)
                got = await tools.call(request.call, invocation_id=request.invocation_id)
            else:
                got = await fn(**kwargs)
        except ContextEngineError as err:
            return {"error": _error(err)}
        return {"response": driver.to_json(_response(method, got))}


if __name__ == "__main__":
    asyncio.run(driver.serve_stdio(ClientHarness()))
