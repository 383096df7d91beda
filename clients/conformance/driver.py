"""The conformance driver: runs the YAML scenarios against a live sidecar through a harness.

    python clients/conformance/driver.py --target 127.0.0.1:50151 clients/conformance/scenarios
    python clients/conformance/driver.py --target 127.0.0.1:50151 --name typescript \
        --harness 'cd clients/typescript && exec node_modules/.bin/tsx conformance/harness.ts' \
        clients/conformance/scenarios

Everything a scenario means lives here once: loading and shape checks, variables and captures,
the matcher, polls, heartbeats, stream cursors and resumes, and the report. A *harness* only
turns one step into one call of its language's client and gives the answer back, as one JSON
object per line on its stdin and stdout (the protocol is in clients/conformance/README.md,
"Adding a runner for another language"). Without ``--harness`` the driver uses its built-in
reference harness, which talks raw gRPC through generic stubs built from the generated descriptors
(not through a client), so it pins the server's wire contract.

Output: one JSON object per line for every step and every scenario (``runner``, ``scenario``,
``step``, ``status`` pass/fail/skip, ``message``, ``ms``), then a closing line
``conformance (<name>): N passed, M failed``. Exit status 0 when every scenario passed.
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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import grpc
import yaml
from google.protobuf import descriptor_pool, json_format, message, message_factory
from google.rpc import error_details_pb2, status_pb2

import contextengine.v1

# Importing every generated module registers its descriptors (services included) in the default
# pool, so that an RPC added to the protos is callable from scenarios without touching the driver.
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


# --- methods -----------------------------------------------------------------------------------


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


def frame_cursor(frame: Mapping[str, Any]) -> str:
    for kind in ("event", "caught_up", "heartbeat"):
        if kind in frame:
            return str(frame[kind].get("cursor", ""))
    if "events" in frame:
        events = frame["events"].get("events", [])
        return str(events[-1].get("cursor", "")) if events else ""
    return ""


# --- the harness protocol ------------------------------------------------------------------------

Json = dict[str, Any]


class Harness(Protocol):
    """One language's client behind the JSON-lines protocol: ``send`` gives one op, gets its reply."""

    async def send(self, op: Json) -> Json: ...

    async def aclose(self) -> None: ...


class HarnessFaultError(Exception):
    """The harness broke the protocol (exited, no answer, not JSON): the run stops."""


@dataclass
class Failure:
    """A gRPC error as the protocol carries it: code name, message, ErrorInfo reason and metadata."""

    code: str
    message: str = ""
    reason: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> Json:
        return {"code": self.code, "reason": self.reason, "metadata": self.metadata}

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message} {self.metadata}"


def failure(reply: Mapping[str, Any]) -> Failure:
    err = reply["error"]
    return Failure(
        str(err.get("code", "")),
        str(err.get("message", "")),
        str(err.get("reason", "")),
        dict(err.get("metadata") or {}),
    )


def check_error(expected: Mapping[str, Any], got: Failure) -> None:
    unknown = set(expected) - {"code", "reason", "metadata"}
    if unknown:
        raise ScenarioError(f"unknown error key(s) {sorted(unknown)}")
    match(dict(expected), got.as_json(), "error")


class ProcessHarness:
    """A harness process (``command``, a shell string) speaking JSON lines on stdin/stdout."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.process: asyncio.subprocess.Process | None = None

    async def send(self, op: Json) -> Json:
        if self.process is None:
            self.process = await asyncio.create_subprocess_shell(
                self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 26,
            )
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(json.dumps(op, ensure_ascii=False).encode() + b"\n")
        await stdin.drain()
        # The harness answers within the op's own timeout; a generous margin covers a JVM's start.
        wait = float(op.get("timeout_ms", DEFAULT_CALL_TIMEOUT_MS)) / 1000 + 60
        reading = asyncio.ensure_future(stdout.readline())
        if not (await asyncio.wait({reading}, timeout=wait))[0]:
            reading.cancel()
            raise HarnessFaultError(f"no answer to {op['op']} within {wait:.0f} s")
        line = reading.result()
        if not line:
            raise HarnessFaultError(f"the harness exited (status {await self.process.wait()})")
        try:
            return cast(Json, json.loads(line))
        except json.JSONDecodeError:
            raise HarnessFaultError(f"not a JSON line: {line[:200]!r}") from None

    async def aclose(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()
        waiting = asyncio.ensure_future(process.wait())
        if not (await asyncio.wait({waiting}, timeout=10))[0]:
            process.kill()
        await waiting


class LocalHarness:
    """A harness object in this process (``handle(op) -> reply``), its messages passed as JSON."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    async def send(self, op: Json) -> Json:
        reply = await self.handler.handle(json.loads(json.dumps(op)))
        return cast(Json, json.loads(json.dumps(reply)))

    async def aclose(self) -> None:
        await self.handler.handle({"op": "shutdown"})


class FrameReader:
    """A stream's frames one ``next`` at a time (for Python harnesses): a read that outlives its
    timeout stays pending for the next ``next``; ``error_of`` turns a failure into the protocol's
    error object (other exceptions propagate)."""

    def __init__(
        self,
        frames: AsyncIterator[message.Message],
        error_of: Callable[[BaseException], Json | None],
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.frames, self.error_of, self._close = frames, error_of, close
        self.pending: asyncio.Future[message.Message] | None = None

    async def next(self, timeout_ms: float) -> Json:
        if self.pending is None:
            self.pending = asyncio.ensure_future(anext(self.frames))
        done, _ = await asyncio.wait({self.pending}, timeout=max(timeout_ms, 0) / 1000)
        if not done:
            return {"timeout": True}
        task, self.pending = self.pending, None
        try:
            return {"frame": to_json(task.result())}
        except StopAsyncIteration:
            return {"end": True}
        except Exception as err:
            error = self.error_of(err)
            if error is None:
                raise
            return {"error": error}

    async def close(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
            with contextlib.suppress(BaseException):
                await self.pending
            self.pending = None
        if self._close is not None:
            await self._close()


async def serve_stdio(handler: Any) -> None:
    """A Python harness's main loop: one op per stdin line, one reply per stdout line."""
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            try:
                reply = await handler.handle(json.loads(line))
            except Exception as err:  # a bug of the harness: the step fails, the run goes on
                reply = {"fail": f"harness: {type(err).__name__}: {err}"}
            print(json.dumps(reply, ensure_ascii=False), flush=True)
    finally:
        await handler.handle({"op": "shutdown"})


# --- the reference harness: raw gRPC -------------------------------------------------------------


def grpc_error(err: BaseException) -> Json | None:
    """A grpc.aio error as the protocol's error object (ErrorInfo from grpc-status-details-bin)."""
    if not isinstance(err, grpc.aio.AioRpcError):
        return None
    out: Json = {"code": err.code().name, "message": err.details() or ""}
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            for detail in status_pb2.Status.FromString(value).details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    out.update(reason=info.reason, metadata=dict(info.metadata))
                    break
    return out


def parse_request(method: Method, request: Any) -> message.Message:
    try:
        return json_format.ParseDict(request or {}, method.request())
    except json_format.ParseError as err:
        raise ScenarioError(f"request does not parse as {method.request.__name__}: {err}") from None


class RawHarness:
    """Every op as a raw gRPC call on one channel, through generic stubs (the reference)."""

    def __init__(self) -> None:
        self.channel: grpc.aio.Channel | None = None
        self.streams: dict[str, FrameReader] = {}

    async def handle(self, op: Json) -> Json:
        kind = op["op"]
        if kind == "connect":
            self.channel = grpc.aio.insecure_channel(op["target"])
            return {}
        if kind == "shutdown":
            for name in list(self.streams):
                await self.streams.pop(name).close()
            if self.channel is not None:
                await self.channel.close()
            return {}
        assert self.channel is not None
        if kind == "close":
            stream = self.streams.pop(op["stream"], None)
            if stream is not None:
                await stream.close()
            return {}
        if kind == "next":
            return await self.streams[op["stream"]].next(float(op["timeout_ms"]))
        method = resolve(op["method"])
        try:
            request = parse_request(method, op.get("request"))
        except ScenarioError as err:
            return {"fail": str(err)}
        if kind == "open":
            opener: Any = self.channel.unary_stream(
                method.path,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=method.response.FromString,
            )
            call = opener(request)

            async def cancel() -> None:
                call.cancel()

            self.streams[op["stream"]] = FrameReader(aiter(call), grpc_error, cancel)
            return {}
        unary: Any = self.channel.unary_unary(
            method.path,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=method.response.FromString,
        )
        try:
            response = await unary(request, timeout=float(op["timeout_ms"]) / 1000)
        except grpc.aio.AioRpcError as err:
            return {"error": grpc_error(err)}
        return {"response": to_json(response)}


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


# --- the driver ----------------------------------------------------------------------------------


@dataclass
class Stream:
    """A stream the scenario opened: the harness holds the call, the driver its cursor and end."""

    method: Method
    request: Json
    cursor: str = ""
    outcome: Json | None = None  # the end or the failure, once seen


class _EndedError(Exception):
    pass


class _FailedError(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


@dataclass
class Driver:
    """Runs scenarios through ``harness``; ``name`` is the runner's name in the records and apps."""

    harness: Harness
    name: str = RUNNER
    emit: Callable[[Result], None] = field(default=lambda _result: None)

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
        ok = True
        try:
            for i, step in enumerate(scenario.data["steps"]):
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
            for name in streams:
                await self.harness.send({"op": "close", "stream": name})
        ms = (time.perf_counter() - started) * 1000
        self.emit(Result(scenario.name, None, "pass" if ok else "fail", "", ms))
        return ok

    async def send(self, op: Json) -> Json:
        reply = await self.harness.send(op)
        if "fail" in reply:
            raise StepFailure(str(reply["fail"]))
        return reply

    async def unary(self, name: str, request: Any, timeout_ms: float) -> Json:
        """The reply to a unary call: ``response`` or ``error``."""
        if resolve(name).streaming:
            raise ScenarioError(f"{name} is a stream: use subscribe")
        op = {"op": "call", "method": name, "request": request, "timeout_ms": timeout_ms}
        return await self.send(op)

    async def open(self, name: str, stream: Stream) -> None:
        op = {"op": "open", "stream": name, "method": stream.method.name, "request": stream.request}
        reply = await self.send(op)
        stream.outcome = reply if "error" in reply else None

    async def next_frame(self, name: str, stream: Stream, timeout_s: float) -> Json | None:
        """The next frame; None when nothing came in time. Raises _EndedError / _FailedError."""
        if stream.outcome is None:
            op = {"op": "next", "stream": name, "timeout_ms": round(timeout_s * 1000)}
            reply = await self.send(op)
            if "frame" in reply:
                frame = cast(Json, reply["frame"])
                stream.cursor = frame_cursor(frame) or stream.cursor
                return frame
            if "timeout" in reply:
                return None
            stream.outcome = reply
        if "error" in stream.outcome:
            raise _FailedError(failure(stream.outcome))
        raise _EndedError()

    async def step(
        self, step: Mapping[str, Any], variables: Json, streams: dict[str, Stream]
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
                await self.send({"op": "close", "stream": name})
            streams[name] = Stream(method, substitute(step.get("request") or {}, variables))
            await self.open(name, streams[name])
        elif kind == "sleep_ms":
            await asyncio.sleep(float(step["sleep_ms"]) / 1000)
        else:
            name = step[kind]
            if name not in streams:
                raise ScenarioError(f"no stream named {name!r} (subscribe first)")
            stream = streams[name]
            if kind == "expect_frames":
                await self._expect_frames(step, variables, name, stream)
            elif kind == "expect_no_frames":
                await self._expect_no_frames(step, name, stream)
            elif kind == "expect_stream_error":
                await self._expect_stream_error(step, variables, name, stream)
            elif kind == "disconnect":
                await self.send({"op": "close", "stream": name})
            elif kind == "resume":
                await self.send({"op": "close", "stream": name})
                if stream.cursor and stream.method.name.endswith("/SubscribeEvents"):
                    scope = stream.request.get("scope", "SUBSCRIPTION_SCOPE_UNSPECIFIED")
                    session = ("SUBSCRIPTION_SCOPE_UNSPECIFIED", "SUBSCRIPTION_SCOPE_SESSION", 0, 1)
                    key = "after_sequence" if scope in session else "after_cursor"
                    stream.request[key] = stream.cursor
                await self.open(name, stream)

    async def _call(self, step: Mapping[str, Any], variables: Json) -> None:
        request = substitute(step.get("request") or {}, variables)
        timeout_ms = float(step.get("timeout_ms", DEFAULT_CALL_TIMEOUT_MS))
        reply = await self.unary(step["call"], request, timeout_ms)
        if "error" in reply:
            if "expect_error" not in step:
                raise StepFailure(f"unexpected error: {failure(reply)}")
            check_error(substitute(step["expect_error"], variables), failure(reply))
            return
        data = reply["response"]
        if "expect_error" in step:
            raise StepFailure(f"expected an error, got {json.dumps(data)}")
        if "expect" in step:
            match(substitute(step["expect"], variables), data, "response")
        for name, path in (step.get("capture") or {}).items():
            variables[name] = lookup(data, path)

    async def _poll(self, step: Mapping[str, Any], variables: Json) -> None:
        request = substitute(step.get("request") or {}, variables)
        until = substitute(step.get("until") or {}, variables)
        timeout_ms = float(step.get("timeout_ms", DEFAULT_POLL_TIMEOUT_MS))
        interval = float(step.get("interval_ms", DEFAULT_POLL_INTERVAL_MS)) / 1000
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            reply = await self.unary(step["poll"], request, DEFAULT_CALL_TIMEOUT_MS)
            if "error" in reply:
                raise StepFailure(f"unexpected error while polling: {failure(reply)}")
            last = reply["response"]
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
        self, step: Mapping[str, Any], variables: Json, name: str, stream: Stream
    ) -> None:
        expected = substitute(step.get("frames") or [], variables)
        deadline = time.monotonic() + float(step.get("timeout_ms", DEFAULT_FRAME_TIMEOUT_MS)) / 1000
        received: list[Any] = []
        for i, exp in enumerate(expected):
            wants_heartbeat = isinstance(exp, dict) and "heartbeat" in exp
            what = f"frame {i}"
            while True:
                remaining = deadline - time.monotonic()
                try:
                    frame = (
                        await self.next_frame(name, stream, remaining) if remaining > 0 else None
                    )
                except _EndedError:
                    raise StepFailure(f"the stream ended before {what}") from None
                except _FailedError as err:
                    raise StepFailure(f"the stream failed before {what}: {err.failure}") from None
                if frame is None:
                    raise StepFailure(f"timed out waiting for {what}")
                if "heartbeat" not in frame or wants_heartbeat:
                    break
            try:
                match(exp, frame, f"frames[{i}]")
            except StepFailure as err:
                raise StepFailure(f"{err} (frame: {json.dumps(frame)})") from None
            received.append(frame)
        for var, path in (step.get("capture") or {}).items():
            variables[var] = lookup({"frames": received}, path)

    async def _expect_no_frames(self, step: Mapping[str, Any], name: str, stream: Stream) -> None:
        deadline = time.monotonic() + float(step.get("within_ms", DEFAULT_QUIET_MS)) / 1000
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                frame = await self.next_frame(name, stream, remaining)
            except (_EndedError, _FailedError):
                return
            if frame is None:
                return
            if "heartbeat" not in frame:
                raise StepFailure(f"expected no frame, got {json.dumps(frame)}")

    async def _expect_stream_error(
        self, step: Mapping[str, Any], variables: Json, name: str, stream: Stream
    ) -> None:
        deadline = time.monotonic() + float(step.get("timeout_ms", DEFAULT_FRAME_TIMEOUT_MS)) / 1000
        expected = substitute(step.get("error") or {}, variables)
        while True:
            remaining = deadline - time.monotonic()
            try:
                frame = await self.next_frame(name, stream, remaining) if remaining > 0 else None
            except _EndedError:
                raise StepFailure("the stream ended without an error") from None
            except _FailedError as err:
                check_error(expected, err.failure)
                return
            if frame is None:
                raise StepFailure("timed out waiting for the stream to fail")
            if "heartbeat" not in frame:
                raise StepFailure(f"expected the stream to fail, got {json.dumps(frame)}")


# --- command line --------------------------------------------------------------------------------


async def run_all(
    harness: Harness,
    target: str,
    scenarios: Sequence[Scenario],
    emit: Callable[[Result], None],
    name: str = RUNNER,
) -> tuple[int, int]:
    """Connects ``harness`` to ``target`` and runs the scenarios one after the other:
    (passed, failed)."""
    passed = failed = 0
    try:
        reply = await harness.send({"op": "connect", "target": target})
        if "fail" in reply:
            raise HarnessFaultError(f"connect: {reply['fail']}")
        driver = Driver(harness, name, emit)
        for scenario in scenarios:
            if await driver.run(scenario):
                passed += 1
            else:
                failed += 1
    finally:
        await harness.aclose()
    return passed, failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", required=True, help="host:port of a running sidecar")
    parser.add_argument(
        "--harness",
        help="the harness command (a shell string); default: the built-in raw gRPC reference",
    )
    parser.add_argument("--name", default=RUNNER, help="the runner's name in the records")
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
    harness: Harness = (
        LocalHarness(RawHarness()) if args.harness is None else ProcessHarness(args.harness)
    )
    with contextlib.ExitStack() as stack:
        report = None
        if args.report is not None:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            report = stack.enter_context(args.report.open("w", encoding="utf-8"))

        def emit(result: Result) -> None:
            line = json.dumps(result.as_json(args.name), ensure_ascii=False)
            if report is None:
                print(line, flush=True)
                return
            report.write(line + "\n")
            if result.status == "fail" and result.step is not None:
                print(
                    f"FAIL {result.scenario} step {result.step} ({result.label}): {result.message}"
                )

        try:
            passed, failed = asyncio.run(run_all(harness, args.target, scenarios, emit, args.name))
        except HarnessFaultError as err:
            print(f"conformance ({args.name}): the harness failed: {err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
    print(f"conformance ({args.name}): {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
