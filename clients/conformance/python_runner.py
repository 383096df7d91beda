"""The reference conformance runner: runs the YAML scenarios against a live sidecar over raw gRPC.

    python clients/conformance/python_runner.py --target 127.0.0.1:50151 clients/conformance/scenarios

It speaks to the server through generic stubs built from the generated descriptors (not through
the Python client), so it pins the server's wire contract; each other language's runner executes
the same files through its own client. The scenario format is in clients/conformance/README.md.

Output: one JSON object per line for every step and every scenario (``runner``, ``scenario``,
``step``, ``status`` pass/fail/skip, ``message``, ``ms``), then a closing line
``conformance (python): N passed, M failed``. Exit status 0 when every scenario passed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import pkgutil
import re
import secrets
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

import grpc
import yaml
from google.protobuf import descriptor_pool, json_format, message, message_factory
from google.rpc import error_details_pb2, status_pb2

import contextengine.v1

# Importing every generated module registers its descriptors (services included) in the default
# pool, so that an RPC added to the protos is callable from scenarios without touching the runner.
for _module in pkgutil.iter_modules(contextengine.v1.__path__):
    if _module.name.endswith("_pb2"):
        importlib.import_module(f"contextengine.v1.{_module.name}")

PACKAGE = "contextengine.v1"
RUNNER = "python"
DEFAULT_CALL_TIMEOUT_MS = 10_000
DEFAULT_FRAME_TIMEOUT_MS = 5_000
DEFAULT_QUIET_MS = 300
DEFAULT_POLL_TIMEOUT_MS = 15_000
DEFAULT_POLL_INTERVAL_MS = 50

STEP_KINDS = (
    "call",
    "poll",
    "subscribe",
    "expect_frames",
    "expect_no_frames",
    "expect_stream_error",
    "disconnect",
    "resume",
    "sleep_ms",
)
COMMON_KEYS = {"name", "note"}
STEP_KEYS: dict[str, set[str]] = {
    "call": {"request", "expect", "expect_error", "capture", "timeout_ms"},
    "poll": {"request", "until", "capture", "timeout_ms", "interval_ms"},
    "subscribe": {"stream", "request"},
    "expect_frames": {"frames", "capture", "timeout_ms"},
    "expect_no_frames": {"within_ms"},
    "expect_stream_error": {"error", "timeout_ms"},
    "disconnect": set(),
    "resume": set(),
    "sleep_ms": set(),
}
SCENARIO_KEYS = {"name", "description", "tags", "steps"}


class StepFailure(Exception):  # noqa: N818 (a failed expectation, not an error)
    """A step did not do what the scenario expects."""


class ScenarioError(Exception):
    """A scenario file is malformed (a bug in the scenario, reported as a failure)."""


# --- matching ----------------------------------------------------------------------------------

MISSING: Any = object()
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NUMERIC = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")


def _is_default(value: Any) -> bool:
    return value is MISSING or value is None or value in ("", 0, False) or value in ([], {})


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and _NUMERIC.match(value):
        return float(value)
    return None


def _show(value: Any) -> str:
    return "<absent>" if value is MISSING else json.dumps(value, ensure_ascii=False)


def match(expected: Any, actual: Any, path: str = "$") -> None:
    """Raises StepFailure unless ``actual`` (proto JSON) matches ``expected`` (see the README)."""
    if isinstance(expected, str) and expected.startswith("$") and not expected.startswith("${"):
        _match_token(expected, actual, path)
        return
    if isinstance(expected, dict) and len(expected) == 1:
        (key,) = expected
        if isinstance(key, str) and key.startswith("$"):
            _match_operator(key, expected[key], actual, path)
            return
    if isinstance(expected, dict):
        if actual is MISSING or actual is None:
            actual = {}
        if not isinstance(actual, dict):
            raise StepFailure(f"{path}: expected an object, got {_show(actual)}")
        for key, value in expected.items():
            match(value, actual.get(key, MISSING), f"{path}.{key}")
        return
    if isinstance(expected, list):
        if actual is MISSING or actual is None:
            actual = []
        if not isinstance(actual, list):
            raise StepFailure(f"{path}: expected a list, got {_show(actual)}")
        if len(actual) != len(expected):
            raise StepFailure(
                f"{path}: expected {len(expected)} item(s), got {len(actual)}: {_show(actual)}"
            )
        for i, (exp, act) in enumerate(zip(expected, actual, strict=True)):
            match(exp, act, f"{path}[{i}]")
        return
    if expected is None:
        if actual is not MISSING and actual is not None:
            raise StepFailure(f"{path}: expected null or absent, got {_show(actual)}")
        return
    if actual is MISSING:
        if _is_default(expected):
            return
        raise StepFailure(f"{path}: expected {_show(expected)}, got <absent>")
    if isinstance(expected, bool) or isinstance(actual, bool):
        if not (isinstance(expected, bool) and isinstance(actual, bool) and expected == actual):
            raise StepFailure(f"{path}: expected {_show(expected)}, got {_show(actual)}")
        return
    exp_num, act_num = _as_number(expected), _as_number(actual)
    if (
        exp_num is not None
        and act_num is not None
        and (not isinstance(expected, str) or not isinstance(actual, str))
    ):
        if exp_num != act_num:
            raise StepFailure(f"{path}: expected {_show(expected)}, got {_show(actual)}")
        return
    if expected != actual:
        raise StepFailure(f"{path}: expected {_show(expected)}, got {_show(actual)}")


def _match_token(token: str, actual: Any, path: str) -> None:
    if token == "$any":
        return
    if token == "$absent":
        if not _is_default(actual):
            raise StepFailure(f"{path}: expected absent, got {_show(actual)}")
        return
    if token == "$present":
        if _is_default(actual):
            raise StepFailure(f"{path}: expected a non-default value, got {_show(actual)}")
        return
    raise ScenarioError(f"{path}: unknown matcher {token!r}")


def _match_operator(op: str, arg: Any, actual: Any, path: str) -> None:
    if op == "$exact":
        if isinstance(arg, dict):
            present = {} if actual is MISSING or actual is None else actual
            if not isinstance(present, dict):
                raise StepFailure(f"{path}: expected an object, got {_show(actual)}")
            extra = sorted(k for k, v in present.items() if k not in arg and not _is_default(v))
            if extra:
                raise StepFailure(f"{path}: unexpected key(s) {extra} in {_show(actual)}")
        match(arg, actual, path)
        return
    if op == "$len":
        items = [] if actual is MISSING or actual is None else actual
        if not isinstance(items, list | dict | str):
            raise StepFailure(f"{path}: expected something with a length, got {_show(actual)}")
        if len(items) != arg:
            raise StepFailure(f"{path}: expected length {arg}, got {len(items)}: {_show(actual)}")
        return
    if op == "$contains":
        if isinstance(actual, str) and isinstance(arg, str):
            if arg not in actual:
                raise StepFailure(f"{path}: {_show(actual)} does not contain {_show(arg)}")
            return
        items = [] if actual is MISSING or actual is None else actual
        if not isinstance(items, list):
            raise StepFailure(f"{path}: expected a list or a string, got {_show(actual)}")
        for item in items:
            try:
                match(arg, item, path)
            except StepFailure:
                continue
            return
        raise StepFailure(f"{path}: no item matches {_show(arg)} in {_show(actual)}")
    if op == "$startsWith":
        if not isinstance(actual, str) or not actual.startswith(arg):
            raise StepFailure(
                f"{path}: expected a string starting with {_show(arg)}, got {_show(actual)}"
            )
        return
    if op in ("$gt", "$gte", "$lt", "$lte"):
        value = _as_number(0 if actual is MISSING else actual)
        bound = _as_number(arg)
        if value is None or bound is None:
            raise StepFailure(f"{path}: expected a number, got {_show(actual)}")
        ok = {
            "$gt": value > bound,
            "$gte": value >= bound,
            "$lt": value < bound,
            "$lte": value <= bound,
        }[op]
        if not ok:
            raise StepFailure(f"{path}: expected {op[1:]} {arg}, got {_show(actual)}")
        return
    if op == "$each":
        items = [] if actual is MISSING or actual is None else actual
        if not isinstance(items, list):
            raise StepFailure(f"{path}: expected a list, got {_show(actual)}")
        for i, item in enumerate(items):
            match(arg, item, f"{path}[{i}]")
        return
    if op == "$prefix":
        items = [] if actual is MISSING or actual is None else actual
        if not isinstance(items, list) or not isinstance(arg, list) or len(items) < len(arg):
            raise StepFailure(
                f"{path}: expected a list starting with {_show(arg)}, got {_show(actual)}"
            )
        for i, exp in enumerate(arg):
            match(exp, items[i], f"{path}[{i}]")
        return
    if op == "$not":
        try:
            match(arg, actual, path)
        except StepFailure:
            return
        raise StepFailure(f"{path}: expected not {_show(arg)}, got {_show(actual)}")
    raise ScenarioError(f"{path}: unknown operator {op!r}")


def lookup(data: Any, path: str) -> Any:
    """The value at a dot path (``session.events.0.id``; ``-1`` is the last item)."""
    value = data
    for part in path.split("."):
        if isinstance(value, list) and re.fullmatch(r"-?\d+", part):
            index = int(part)
            if -len(value) <= index < len(value):
                value = value[index]
                continue
            raise StepFailure(f"capture {path!r}: index {part} out of range")
        if isinstance(value, dict) and part in value:
            value = value[part]
            continue
        raise StepFailure(f"capture {path!r}: {part!r} not found in {_show(value)}")
    return value


def substitute(value: Any, variables: Mapping[str, Any]) -> Any:
    """Replaces ``${name}`` in every string of ``value`` (a whole-string reference keeps the
    variable's type)."""
    if isinstance(value, str):
        whole = _VAR.fullmatch(value)
        if whole:
            return _var(whole.group(1), variables)
        return _VAR.sub(lambda m: _text(_var(m.group(1), variables)), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {substitute(k, variables): substitute(v, variables) for k, v in value.items()}
    return value


def _var(name: str, variables: Mapping[str, Any]) -> Any:
    if name not in variables:
        raise ScenarioError(f"unknown variable ${{{name}}}")
    return variables[name]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# --- gRPC plumbing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    path: str  # /contextengine.v1.SessionService/CreateSession
    name: str  # SessionService/CreateSession
    request: type[message.Message]
    response: type[message.Message]
    streaming: bool


def resolve(name: str) -> Method:
    service_name, _, method_name = name.partition("/")
    pool = descriptor_pool.Default()
    try:
        service = pool.FindServiceByName(f"{PACKAGE}.{service_name}")
    except KeyError:
        raise ScenarioError(f"unknown service {service_name!r}") from None
    method = service.methods_by_name.get(method_name)
    if method is None:
        raise ScenarioError(f"unknown method {name!r}")
    return Method(
        path=f"/{service.full_name}/{method.name}",
        name=name,
        request=message_factory.GetMessageClass(method.input_type),
        response=message_factory.GetMessageClass(method.output_type),
        streaming=method.server_streaming,
    )


def to_json(msg: message.Message) -> Any:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


@dataclass
class Failure:
    """A gRPC error as code name, reason and metadata."""

    code: str
    message: str
    reason: str
    metadata: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason, "metadata": self.metadata}

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message} {self.metadata}"


def failure_of(err: grpc.aio.AioRpcError) -> Failure:
    reason, metadata = "", {}
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    reason, metadata = info.reason, dict(info.metadata)
                    break
    return Failure(err.code().name, err.details() or "", reason, metadata)


def check_error(expected: Mapping[str, Any], got: Failure) -> None:
    unknown = set(expected) - {"code", "reason", "metadata"}
    if unknown:
        raise ScenarioError(f"unknown error key(s) {sorted(unknown)}")
    match(dict(expected), got.as_json(), "error")


# --- streams -------------------------------------------------------------------------------------


def frame_cursor(frame: Mapping[str, Any]) -> str:
    for kind in ("event", "caught_up", "heartbeat"):
        if kind in frame:
            return str(frame[kind].get("cursor", ""))
    if "events" in frame:
        events = frame["events"].get("events", [])
        return str(events[-1].get("cursor", "")) if events else ""
    return ""


@dataclass
class Stream:
    """A server stream opened on a raw channel (``transport``); another runner subclasses it to
    open the stream some other way (``open``, ``read``, ``close``, ``errors``, ``failure``)."""

    #: what a failed read raises
    errors: ClassVar[tuple[type[Exception], ...]] = (grpc.aio.AioRpcError,)

    method: Method
    request: dict[str, Any]
    transport: Any
    call: Any = None
    error: Failure | None = None
    ended: bool = False
    cursor: str = ""
    pending: asyncio.Task[Any] | None = None

    def open(self) -> None:
        request = json_format.ParseDict(self.request, self.method.request())
        callable_: Any = self.transport.unary_stream(
            self.method.path,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=self.method.response.FromString,
        )
        self.call = callable_(request)
        self.error, self.ended, self.pending = None, False, None

    async def read(self) -> message.Message | None:
        """The next message of the open stream; None when it ended."""
        frame = await self.call.read()
        return None if frame is grpc.aio.EOF else cast(message.Message, frame)

    def failure(self, err: Exception) -> Failure:
        return failure_of(cast(grpc.aio.AioRpcError, err))

    async def next_frame(self, timeout_s: float) -> dict[str, Any] | None:
        """The next frame; None when nothing came in time. Raises _StreamEndedError / _StreamFailedError."""
        if self.error is not None:
            raise _StreamFailedError(self.error)
        if self.ended:
            raise _StreamEndedError()
        if self.pending is None:
            self.pending = asyncio.ensure_future(self.read())
        done, _ = await asyncio.wait({self.pending}, timeout=timeout_s)
        if not done:
            return None
        task, self.pending = self.pending, None
        try:
            frame = task.result()
        except self.errors as err:
            self.error = self.failure(err)
            raise _StreamFailedError(self.error) from None
        if frame is None:
            self.ended = True
            raise _StreamEndedError()
        data = to_json(frame)
        self.cursor = frame_cursor(data) or self.cursor
        return cast(dict[str, Any], data)

    async def close(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None
        if self.call is not None:
            self.call.cancel()
            self.call = None


class _StreamEndedError(Exception):
    pass


class _StreamFailedError(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


# --- scenarios -----------------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    path: Path
    data: dict[str, Any]


def load_scenarios(directory: Path, only: Sequence[str] = ()) -> list[Scenario]:
    scenarios: list[Scenario] = []
    for path in sorted(directory.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text("utf-8"))
        name = str(path.relative_to(directory).with_suffix(""))
        if only and not any(o in name for o in only):
            continue
        scenarios.append(Scenario(name, path, data))
    return scenarios


def check_shape(data: Any) -> None:
    """The structural rules of a scenario file (the JSON schema says the same)."""
    if not isinstance(data, dict):
        raise ScenarioError("a scenario is a mapping")
    unknown = set(data) - SCENARIO_KEYS
    if unknown:
        raise ScenarioError(f"unknown scenario key(s) {sorted(unknown)}")
    for key in ("name", "description", "steps"):
        if key not in data:
            raise ScenarioError(f"missing scenario key {key!r}")
    if not isinstance(data["steps"], list) or not data["steps"]:
        raise ScenarioError("steps must be a non-empty list")
    for i, step in enumerate(data["steps"]):
        if not isinstance(step, dict):
            raise ScenarioError(f"step {i}: a step is a mapping")
        kinds = [k for k in STEP_KINDS if k in step]
        if len(kinds) != 1:
            raise ScenarioError(f"step {i}: exactly one of {', '.join(STEP_KINDS)} is required")
        allowed = STEP_KEYS[kinds[0]] | COMMON_KEYS | {kinds[0]}
        extra = set(step) - allowed
        if extra:
            raise ScenarioError(f"step {i} ({kinds[0]}): unknown key(s) {sorted(extra)}")
        if kinds[0] == "call" and "expect" in step and "expect_error" in step:
            raise ScenarioError(f"step {i}: expect and expect_error exclude each other")
        if kinds[0] == "subscribe" and "stream" not in step:
            raise ScenarioError(f"step {i}: subscribe needs a stream name")


def step_kind(step: Mapping[str, Any]) -> str:
    return next(k for k in STEP_KINDS if k in step)


def step_label(step: Mapping[str, Any]) -> str:
    kind = step_kind(step)
    return str(step.get("name") or f"{kind} {step[kind]}")


@dataclass
class Result:
    scenario: str
    step: int | None
    status: str
    message: str
    ms: float
    label: str = ""

    def as_json(self, runner: str = RUNNER) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runner": runner,
            "scenario": self.scenario,
            "step": self.step,
            "status": self.status,
            "message": self.message,
            "ms": round(self.ms, 1),
        }
        if self.label:
            out["label"] = self.label
        return out


@dataclass
class Runner:
    """Runs scenarios over raw gRPC on ``channel``. The runner that goes through the Python client
    (clients/python/conformance/runner.py) subclasses it: ``unary``, ``stream_type``, ``transport``,
    ``rpc_errors`` and ``failure`` are how a step reaches the server."""

    #: the runner's name in the records and in the scenarios' app names
    name: ClassVar[str] = RUNNER
    #: what a failed unary call raises
    rpc_errors: ClassVar[tuple[type[Exception], ...]] = (grpc.aio.AioRpcError,)
    stream_type: ClassVar[type[Stream]] = Stream

    channel: grpc.aio.Channel
    emit: Callable[[Result], None] = field(default=lambda _result: None)

    def transport(self) -> Any:
        """What a stream is opened on."""
        return self.channel

    def failure(self, err: Exception) -> Failure:
        return failure_of(cast(grpc.aio.AioRpcError, err))

    async def run(self, scenario: Scenario) -> bool:
        started = time.perf_counter()
        try:
            check_shape(scenario.data)
        except ScenarioError as err:
            self.emit(Result(scenario.name, None, "fail", f"malformed: {err}", 0.0))
            return False
        run_id = secrets.token_hex(4)
        variables: dict[str, Any] = {"run": run_id, "app": f"conf-{self.name}-{run_id}"}
        streams: dict[str, Stream] = {}
        steps = scenario.data["steps"]
        ok = True
        try:
            for i, step in enumerate(steps):
                t0 = time.perf_counter()
                label = step_label(step)
                if not ok:
                    self.emit(Result(scenario.name, i, "skip", "", 0.0, label))
                    continue
                try:
                    await self.step(step, variables, streams)
                except (StepFailure, ScenarioError) as err:
                    ok = False
                    ms = (time.perf_counter() - t0) * 1000
                    self.emit(Result(scenario.name, i, "fail", str(err), ms, label))
                    continue
                ms = (time.perf_counter() - t0) * 1000
                self.emit(Result(scenario.name, i, "pass", "", ms, label))
        finally:
            for stream in streams.values():
                await stream.close()
        ms = (time.perf_counter() - started) * 1000
        self.emit(Result(scenario.name, None, "pass" if ok else "fail", "", ms))
        return ok

    async def unary(self, method: Method, request: Mapping[str, Any], timeout_ms: float) -> Any:
        if method.streaming:
            raise ScenarioError(f"{method.name} is a stream: use subscribe")
        try:
            req = json_format.ParseDict(dict(request), method.request())
        except json_format.ParseError as err:
            raise ScenarioError(
                f"request does not parse as {method.request.__name__}: {err}"
            ) from None
        callable_: Any = self.channel.unary_unary(
            method.path,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=method.response.FromString,
        )
        return await callable_(req, timeout=timeout_ms / 1000)

    async def step(
        self, step: Mapping[str, Any], variables: dict[str, Any], streams: dict[str, Stream]
    ) -> None:
        kind = step_kind(step)
        if kind == "call":
            await self._call(step, variables)
        elif kind == "poll":
            await self._poll(step, variables)
        elif kind == "subscribe":
            method = resolve(step["subscribe"])
            if not method.streaming:
                raise ScenarioError(f"{method.name} is not a stream")
            name = step["stream"]
            if name in streams:
                await streams[name].close()
            request = substitute(step.get("request") or {}, variables)
            stream = self.stream_type(method, request, self.transport())
            stream.open()
            streams[name] = stream
        elif kind == "expect_frames":
            await self._expect_frames(step, variables, _stream(streams, step["expect_frames"]))
        elif kind == "expect_no_frames":
            await self._expect_no_frames(step, _stream(streams, step["expect_no_frames"]))
        elif kind == "expect_stream_error":
            await self._expect_stream_error(
                step, variables, _stream(streams, step["expect_stream_error"])
            )
        elif kind == "disconnect":
            await _stream(streams, step["disconnect"]).close()
        elif kind == "resume":
            stream = _stream(streams, step["resume"])
            await stream.close()
            if stream.cursor and stream.method.name.endswith("/SubscribeEvents"):
                scope = stream.request.get("scope", "SUBSCRIPTION_SCOPE_UNSPECIFIED")
                if scope in ("SUBSCRIPTION_SCOPE_UNSPECIFIED", "SUBSCRIPTION_SCOPE_SESSION", 0, 1):
                    stream.request["after_sequence"] = stream.cursor
                else:
                    stream.request["after_cursor"] = stream.cursor
            stream.open()
        elif kind == "sleep_ms":
            await asyncio.sleep(float(step["sleep_ms"]) / 1000)

    async def _call(self, step: Mapping[str, Any], variables: dict[str, Any]) -> None:
        method = resolve(step["call"])
        request = substitute(step.get("request") or {}, variables)
        timeout_ms = float(step.get("timeout_ms", DEFAULT_CALL_TIMEOUT_MS))
        try:
            response = await self.unary(method, request, timeout_ms)
        except self.rpc_errors as err:
            failure = self.failure(err)
            if "expect_error" not in step:
                raise StepFailure(f"unexpected error: {failure}") from None
            check_error(substitute(step["expect_error"], variables), failure)
            return
        if "expect_error" in step:
            raise StepFailure(f"expected an error, got {json.dumps(to_json(response))}")
        data = to_json(response)
        if "expect" in step:
            match(substitute(step["expect"], variables), data, "response")
        for name, path in (step.get("capture") or {}).items():
            variables[name] = lookup(data, path)

    async def _poll(self, step: Mapping[str, Any], variables: dict[str, Any]) -> None:
        method = resolve(step["poll"])
        request = substitute(step.get("request") or {}, variables)
        until = substitute(step.get("until") or {}, variables)
        timeout_ms = float(step.get("timeout_ms", DEFAULT_POLL_TIMEOUT_MS))
        interval = float(step.get("interval_ms", DEFAULT_POLL_INTERVAL_MS)) / 1000
        deadline = time.monotonic() + timeout_ms / 1000
        last: Any = None
        while True:
            try:
                response = await self.unary(method, request, DEFAULT_CALL_TIMEOUT_MS)
            except self.rpc_errors as err:
                raise StepFailure(f"unexpected error while polling: {self.failure(err)}") from None
            last = to_json(response)
            try:
                match(until, last, "response")
            except StepFailure as err:
                if time.monotonic() >= deadline:
                    raise StepFailure(f"not reached within {timeout_ms:.0f} ms: {err}") from None
                await asyncio.sleep(interval)
                continue
            break
        for name, path in (step.get("capture") or {}).items():
            variables[name] = lookup(last, path)

    async def _expect_frames(
        self, step: Mapping[str, Any], variables: dict[str, Any], stream: Stream
    ) -> None:
        expected = substitute(step.get("frames") or [], variables)
        timeout_s = float(step.get("timeout_ms", DEFAULT_FRAME_TIMEOUT_MS)) / 1000
        deadline = time.monotonic() + timeout_s
        received: list[Any] = []
        for i, exp in enumerate(expected):
            frame = await self._next_non_heartbeat(stream, deadline, exp, f"frame {i}")
            try:
                match(exp, frame, f"frames[{i}]")
            except StepFailure as err:
                raise StepFailure(f"{err} (frame: {json.dumps(frame)})") from None
            received.append(frame)
        for name, path in (step.get("capture") or {}).items():
            variables[name] = lookup({"frames": received}, path)

    async def _next_non_heartbeat(
        self, stream: Stream, deadline: float, expected: Any, what: str
    ) -> dict[str, Any]:
        wants_heartbeat = isinstance(expected, dict) and "heartbeat" in expected
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StepFailure(f"timed out waiting for {what}")
            try:
                frame = await stream.next_frame(remaining)
            except _StreamEndedError:
                raise StepFailure(f"the stream ended before {what}") from None
            except _StreamFailedError as err:
                raise StepFailure(f"the stream failed before {what}: {err.failure}") from None
            if frame is None:
                raise StepFailure(f"timed out waiting for {what}")
            if "heartbeat" in frame and not wants_heartbeat:
                continue
            return frame

    async def _expect_no_frames(self, step: Mapping[str, Any], stream: Stream) -> None:
        within = float(step.get("within_ms", DEFAULT_QUIET_MS)) / 1000
        deadline = time.monotonic() + within
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                frame = await stream.next_frame(remaining)
            except (_StreamEndedError, _StreamFailedError):
                return
            if frame is None:
                return
            if "heartbeat" not in frame:
                raise StepFailure(f"expected no frame, got {json.dumps(frame)}")

    async def _expect_stream_error(
        self, step: Mapping[str, Any], variables: dict[str, Any], stream: Stream
    ) -> None:
        timeout_s = float(step.get("timeout_ms", DEFAULT_FRAME_TIMEOUT_MS)) / 1000
        deadline = time.monotonic() + timeout_s
        expected = substitute(step.get("error") or {}, variables)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StepFailure("timed out waiting for the stream to fail")
            try:
                frame = await stream.next_frame(remaining)
            except _StreamEndedError:
                raise StepFailure("the stream ended without an error") from None
            except _StreamFailedError as err:
                check_error(expected, err.failure)
                return
            if frame is None:
                raise StepFailure("timed out waiting for the stream to fail")
            if "heartbeat" not in frame:
                raise StepFailure(f"expected the stream to fail, got {json.dumps(frame)}")


def _stream(streams: Mapping[str, Stream], name: str) -> Stream:
    if name not in streams:
        raise ScenarioError(f"no stream named {name!r} (subscribe first)")
    return streams[name]


# --- command line --------------------------------------------------------------------------------


async def run_all(
    target: str,
    scenarios: Sequence[Scenario],
    emit: Callable[[Result], None],
) -> tuple[int, int]:
    async with grpc.aio.insecure_channel(target) as channel:
        return await run_scenarios(Runner(channel, emit), scenarios)


async def run_scenarios(runner: Runner, scenarios: Sequence[Scenario]) -> tuple[int, int]:
    """Runs the scenarios one after the other: (passed, failed)."""
    passed = failed = 0
    for scenario in scenarios:
        if await runner.run(scenario):
            passed += 1
        else:
            failed += 1
    return passed, failed


#: runs the scenarios against a target, emitting every result: (passed, failed)
RunAll = Callable[
    [str, Sequence[Scenario], Callable[[Result], None]], Coroutine[Any, Any, tuple[int, int]]
]


def main(
    argv: Sequence[str] | None = None,
    *,
    name: str = RUNNER,
    run: RunAll = run_all,
    description: str = __doc__.split("\n")[0],
) -> int:
    """The command line of a runner called ``name`` that runs scenarios with ``run``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--target", required=True, help="host:port of a running sidecar")
    parser.add_argument(
        "--only", action="append", default=[], help="run scenarios whose name contains this"
    )
    parser.add_argument(
        "--report",
        type=Path,
        help="write the JSON lines here; stdout then shows only failures and the totals",
    )
    parser.add_argument("scenarios", type=Path, help="the scenario directory")
    args = parser.parse_args(argv)
    scenarios = load_scenarios(args.scenarios, args.only)
    if not scenarios:
        print(f"no scenarios found in {args.scenarios}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        report = None
        if args.report is not None:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            report = stack.enter_context(args.report.open("w", encoding="utf-8"))

        def emit(result: Result) -> None:
            line = json.dumps(result.as_json(name), ensure_ascii=False)
            if report is None:
                print(line, flush=True)
                return
            report.write(line + "\n")
            if result.status == "fail" and result.step is not None:
                print(
                    f"FAIL {result.scenario} step {result.step} ({result.label}): {result.message}"
                )

        try:
            passed, failed = asyncio.run(run(args.target, scenarios, emit))
        except KeyboardInterrupt:
            return 130
    print(f"conformance ({name}): {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
