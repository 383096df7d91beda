"""A real server for the fuzz suite, the sessions it is seeded with, and the property checks.

The server (:class:`ContextEngineServer` on 127.0.0.1:0) runs on its own event loop in a
background thread, so that the Hypothesis tests are plain synchronous functions calling it over
a synchronous gRPC channel: one server per store for a whole test module, examples cheap.

Two kinds of seeded sessions:

* *targets* (app :data:`TARGET_APP`): the sessions the fuzzed requests address (their ids are in
  the fuzzer's vocabulary). A request that fails must leave them as they were (a summary the
  engine appends in the background is the one change allowed); successful requests may change
  them, and they are re-seeded when deleted or grown large;
* *sentinels* (an app whose name is random and appears nowhere in the fuzzer's vocabulary): no
  request can address them, so they must never change at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor, message
from google.rpc import error_details_pb2, status_pb2

from contextengine.compaction.summarizers.extractive import ExtractiveSummarizer
from contextengine.core.errors import DOMAIN, REASON_CODES
from contextengine.core.structs import dict_to_struct
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from contextengine.v1 import (
    compaction_service_pb2 as cpb,
    config_pb2,
    content_pb2,
    event_pb2,
    memory_service_pb2 as mpb,
    session_service_pb2 as pb,
)
from tests.service.helpers import text_event
from tests.service.proto_strategies import message_class
from tests.service.test_context import call_event, response_event

TARGET_APP = "fz-app"
TARGET_USER = "fz-user"
TARGET_SESSIONS = ("fz-s1", "fz-s2")
#: request size limit of the fuzz server (small, so that REQUEST_TOO_LARGE is reached)
MAX_REQUEST_BYTES = 256 * 1024
#: seconds a unary call may take before the fuzzer calls it hung
UNARY_DEADLINE = 10.0
#: seconds a stream is read (the client's own deadline: DEADLINE_EXCEEDED then is fine)
STREAM_DEADLINE = 1.5
#: frames read from a stream at most
STREAM_FRAMES = 8
#: a stream frame whose ``frame`` oneof is one of these shows the stream is live: stop reading
_LIVE_FRAMES = {"caught_up", "snapshot", "heartbeat"}
#: re-seed a target whose log grew past this many events
_MAX_TARGET_EVENTS = 60

#: statuses a server must never answer
FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}

#: (method, status code, reason) -> examples, over the run (see ``write_stats``)
STATS: Counter[tuple[str, str, str]] = Counter()


class PropertyError(AssertionError):
    """The property failed (the message says how)."""


# --- the server ---------------------------------------------------------------------------------


class BackgroundServer:
    """A started ContextEngineServer on its own loop and thread."""

    def __init__(self, db: str) -> None:
        self._db = db
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.target = ""
        self._thread = threading.Thread(target=self._run, name="fuzz-server", daemon=True)

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        if not self._ready.wait(60) or not self.target:
            raise RuntimeError(f"the fuzz server did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by __enter__ / the tests
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        settings = ServerSettings(
            max_request_bytes=MAX_REQUEST_BYTES,
            grace_seconds=1.0,
            # no Gemini: a closed local port refuses at once
            gemini_base_url="http://127.0.0.1:9",
            gemini_cache_timeout_seconds=2.0,
        )
        async with start_local_server(
            self._db, settings=settings, summarizers=lambda config: ExtractiveSummarizer()
        ) as server:
            self.target = server.target
            self._ready.set()
            await self._stop.wait()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


def channel(target: str) -> grpc.Channel:
    return grpc.insecure_channel(
        target,
        options=[("grpc.max_receive_message_length", -1), ("grpc.enable_retries", 0)],
    )


# --- outcomes and the property --------------------------------------------------------------


@dataclass
class Outcome:
    """How one fuzzed call ended."""

    code: grpc.StatusCode
    details: str
    info: error_details_pb2.ErrorInfo | None
    #: the status came from the server (not from the client's own deadline or cancellation)
    server_sent: bool = True
    frames: int = 0

    @property
    def ok(self) -> bool:
        return self.code == grpc.StatusCode.OK


def _error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    metadata: Any = err.trailing_metadata() or ()
    raw = dict(metadata).get("grpc-status-details-bin")
    if not isinstance(raw, bytes):
        return None
    status = status_pb2.Status.FromString(raw)
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    return None


def _outcome_of_error(err: grpc.RpcError, server_sent: bool = True, frames: int = 0) -> Outcome:
    code = err.code()
    return Outcome(code, err.details() or "", _error_info(err), server_sent, frames)


def call(chan: grpc.Channel, method: descriptor.MethodDescriptor, body: bytes) -> Outcome:
    """Calls ``method`` with the encoded request ``body`` (whatever its cardinality: a
    client-streaming method gets ``body`` as its one message)."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    identity: Callable[[bytes], bytes] = lambda b: b  # noqa: E731
    response_cls = message_class(method.output_type)
    if not method.server_streaming:
        if method.client_streaming:
            multi = chan.stream_unary(
                path, request_serializer=identity, response_deserializer=identity
            )
            invoke: Callable[[], Any] = lambda: multi(iter([body]), timeout=UNARY_DEADLINE)  # noqa: E731
        else:
            unary = chan.unary_unary(
                path, request_serializer=identity, response_deserializer=identity
            )
            invoke = lambda: unary(body, timeout=UNARY_DEADLINE)  # noqa: E731
        try:
            response_cls.FromString(invoke())
        except grpc.RpcError as err:
            return _outcome_of_error(err)
        return Outcome(grpc.StatusCode.OK, "", None)
    if method.client_streaming:
        bidi = chan.stream_stream(path, request_serializer=identity, response_deserializer=identity)
        stream = bidi(iter([body]), timeout=STREAM_DEADLINE)
    else:
        server_stream = chan.unary_stream(
            path, request_serializer=identity, response_deserializer=identity
        )
        stream = server_stream(body, timeout=STREAM_DEADLINE)
    frames = 0
    try:
        for raw in stream:
            frames += 1
            frame = response_cls.FromString(raw)
            oneofs = frame.DESCRIPTOR.oneofs
            kinds = {frame.WhichOneof(o.name) for o in oneofs}
            if frames >= STREAM_FRAMES or kinds & _LIVE_FRAMES:
                stream.cancel()
                return Outcome(grpc.StatusCode.OK, "", None, frames=frames)
    except grpc.RpcError as err:
        code = err.code()
        own = code == grpc.StatusCode.DEADLINE_EXCEEDED or code == grpc.StatusCode.CANCELLED
        return _outcome_of_error(err, server_sent=not own, frames=frames)
    return Outcome(grpc.StatusCode.OK, "", None, frames=frames)


def check_outcome(outcome: Outcome, method: descriptor.MethodDescriptor, body_size: int) -> None:
    """The status property: never UNKNOWN or INTERNAL; every status the server sends other than
    OK carries one ErrorInfo of our domain whose reason maps to that status code; a unary call
    ends within its deadline."""
    name = f"{method.containing_service.name}/{method.name}"
    STATS[(name, outcome.code.name, outcome.info.reason if outcome.info else "")] += 1
    if outcome.code in FORBIDDEN:
        raise PropertyError(f"{name} answered {outcome.code.name}: {outcome.details}")
    if outcome.ok:
        return
    if not outcome.server_sent:
        return  # the client's own deadline or cancellation while the stream was live
    if outcome.code == grpc.StatusCode.DEADLINE_EXCEEDED:
        raise PropertyError(f"{name} did not answer within {UNARY_DEADLINE} s")
    if (
        outcome.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        and body_size > 2 * MAX_REQUEST_BYTES
        and outcome.info is None
    ):
        return  # beyond twice the limit the transport itself refuses (documented)
    if outcome.info is None:
        raise PropertyError(
            f"{name} answered {outcome.code.name} without ErrorInfo: {outcome.details}"
        )
    if outcome.info.domain != DOMAIN:
        raise PropertyError(f"{name}: ErrorInfo domain {outcome.info.domain!r}")
    expected = REASON_CODES.get(outcome.info.reason)
    if expected is None or expected.value != outcome.code.name:
        raise PropertyError(
            f"{name} answered {outcome.code.name} with reason {outcome.info.reason!r}"
        )


# --- seeded data --------------------------------------------------------------------------------


@dataclass
class Seeded:
    """What the seeding left on the server, for the fuzzer's vocabulary and the checks."""

    sentinel_app: str
    sentinels: list[pb.GetSessionRequest] = field(default_factory=list)
    #: the sentinels' sessions, configurations and app configuration, encoded, as seeded
    sentinel_snapshot: list[bytes] = field(default_factory=list)
    invocation_ids: list[str] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)


def rpc(
    chan: grpc.Channel,
    service: str,
    method: str,
    request: message.Message,
    response: type[message.Message],
) -> Any:
    fn: grpc.UnaryUnaryMultiCallable[message.Message, Any] = chan.unary_unary(
        f"/contextengine.v1.{service}/{method}",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response.FromString,
    )
    return fn(request, timeout=UNARY_DEADLINE)


def _events(tag: str) -> list[event_pb2.Event]:
    first = text_event(
        f"{tag}: what is the weather in Paris?", invocation_id=f"{tag}-inv-1", event_id=f"{tag}-e1"
    )
    answer = text_event(
        f"{tag}: let me look.", author="agent", invocation_id=f"{tag}-inv-1", event_id=f"{tag}-e2"
    )
    second = text_event(
        f"{tag}: remember my city",
        invocation_id=f"{tag}-inv-2",
        event_id=f"{tag}-e3",
        state_delta={"city": "Paris", "app:seen": 1, "user:lang": "fr", "temp:x": 1},
    )
    call = call_event(f"{tag}-c1", invocation_id=f"{tag}-inv-2")
    call.id = f"{tag}-e4"
    response = response_event(f"{tag}-c1", invocation_id=f"{tag}-inv-2")
    response.id = f"{tag}-e5"
    last = text_event(
        f"{tag}: it is 21 degrees.",
        author="agent",
        invocation_id=f"{tag}-inv-2",
        event_id=f"{tag}-e6",
    )
    return [first, answer, second, call, response, last]


def seed_session(chan: grpc.Channel, app: str, user: str, session_id: str, tag: str) -> None:
    """Creates (or re-creates) a session with a small log: two invocations, a function call and
    its response, state in every scope, a client-committed summary, its own configuration, and its
    events in long-term memory."""
    rpc(
        chan,
        "SessionService",
        "DeleteSession",
        pb.DeleteSessionRequest(
            app_name=app, user_id=user, session_id=session_id, allow_missing=True
        ),
        pb.DeleteSessionResponse,
    )
    rpc(
        chan,
        "SessionService",
        "CreateSession",
        pb.CreateSessionRequest(
            app_name=app,
            user_id=user,
            session_id=session_id,
            state=dict_to_struct({"seed": tag, "app:a": 1, "user:u": 2}),
        ),
        pb.CreateSessionResponse,
    )
    appended = rpc(
        chan,
        "SessionService",
        "AppendEvents",
        pb.AppendEventsRequest(
            app_name=app, user_id=user, session_id=session_id, events=_events(tag)
        ),
        pb.AppendEventsResponse,
    )
    rpc(
        chan,
        "CompactionService",
        "CommitCompaction",
        cpb.CommitCompactionRequest(
            app_name=app,
            user_id=user,
            session_id=session_id,
            based_on_sequence=appended.last_sequence,
            first_sequence=1,
            last_sequence=2,
            summary=content_pb2.Content(
                role="model", parts=[content_pb2.Part(text=f"{tag}: asked about Paris")]
            ),
        ),
        cpb.CommitCompactionResponse,
    )
    rpc(
        chan,
        "SessionService",
        "UpdateSessionConfig",
        pb.UpdateSessionConfigRequest(
            app_name=app,
            user_id=user,
            session_id=session_id,
            config=config_pb2.SessionConfig(
                events_compaction_config=config_pb2.EventsCompactionConfig(
                    compaction_interval=2, overlap_size=1
                )
            ),
        ),
        pb.UpdateSessionConfigResponse,
    )
    rpc(
        chan,
        "MemoryService",
        "AddSessionToMemory",
        mpb.AddSessionToMemoryRequest(app_name=app, user_id=user, session_id=session_id),
        mpb.AddSessionToMemoryResponse,
    )


def app_config(app: str) -> config_pb2.AppConfig:
    return config_pb2.AppConfig(
        app_name=app,
        events_compaction_config=config_pb2.EventsCompactionConfig(
            compaction_interval=2, overlap_size=1, token_threshold=50_000, event_retention_size=2
        ),
        summarizer=config_pb2.SummarizerConfig(extractive=config_pb2.ExtractiveSummarizerConfig()),
        memory=config_pb2.MemoryConfig(max_results=5),
        context_tools=config_pb2.ContextToolsConfig(
            enabled=True, min_tokens_freed=1, max_hidden_fraction=1.0
        ),
    )


def seed(chan: grpc.Channel) -> Seeded:
    """Seeds the targets and the sentinels."""
    seeded = Seeded(sentinel_app=f"sentinel-{uuid.uuid4().hex}")
    for app in (TARGET_APP, seeded.sentinel_app):
        rpc(
            chan,
            "SessionService",
            "UpdateAppConfig",
            pb.UpdateAppConfigRequest(config=app_config(app)),
            pb.UpdateAppConfigResponse,
        )
    for i, session_id in enumerate(TARGET_SESSIONS):
        tag = f"t{i}"
        seed_session(chan, TARGET_APP, TARGET_USER, session_id, tag)
        seeded.invocation_ids += [f"{tag}-inv-1", f"{tag}-inv-2"]
        seeded.event_ids += [f"{tag}-e{n}" for n in range(1, 7)]
    for i in range(2):
        ref = pb.GetSessionRequest(
            app_name=seeded.sentinel_app,
            user_id=f"sentinel-user-{uuid.uuid4().hex}",
            session_id=f"sentinel-{i}-{uuid.uuid4().hex}",
        )
        seed_session(chan, ref.app_name, ref.user_id, ref.session_id, f"sentinel{i}")
        seeded.sentinels.append(ref)
    seeded.sentinel_snapshot = sentinel_snapshot(chan, seeded)
    return seeded


def sentinel_snapshot(chan: grpc.Channel, seeded: Seeded) -> list[bytes]:
    out: list[bytes] = []
    for ref in seeded.sentinels:
        session = rpc(chan, "SessionService", "GetSession", ref, pb.GetSessionResponse)
        out.append(session.SerializeToString(deterministic=True))
        config = rpc(
            chan,
            "SessionService",
            "GetSessionConfig",
            pb.GetSessionConfigRequest(
                app_name=ref.app_name, user_id=ref.user_id, session_id=ref.session_id
            ),
            pb.GetSessionConfigResponse,
        )
        out.append(config.SerializeToString(deterministic=True))
        memory = rpc(
            chan,
            "MemoryService",
            "SearchMemory",
            mpb.SearchMemoryRequest(app_name=ref.app_name, user_id=ref.user_id, query="Paris"),
            mpb.SearchMemoryResponse,
        )
        for hit in memory.memories:
            hit.ClearField("score")  # BM25 scores follow the whole index's statistics
        out.append(memory.SerializeToString(deterministic=True))
    app = rpc(
        chan,
        "SessionService",
        "GetAppConfig",
        pb.GetAppConfigRequest(app_name=seeded.sentinel_app),
        pb.GetAppConfigResponse,
    )
    out.append(app.SerializeToString(deterministic=True))
    return out


def check_sentinels(chan: grpc.Channel, seeded: Seeded, cheap: bool = False) -> None:
    """No request may change a session it cannot address. ``cheap``: the first session only."""
    if cheap:
        ref = seeded.sentinels[0]
        session = rpc(chan, "SessionService", "GetSession", ref, pb.GetSessionResponse)
        if session.SerializeToString(deterministic=True) != seeded.sentinel_snapshot[0]:
            raise PropertyError("a sentinel session changed")
        return
    now = sentinel_snapshot(chan, seeded)
    if now != seeded.sentinel_snapshot:
        changed = [
            i for i, (a, b) in enumerate(zip(now, seeded.sentinel_snapshot, strict=True)) if a != b
        ]
        raise PropertyError(f"sentinel data changed (snapshot items {changed})")


def target_refs() -> list[pb.GetSessionRequest]:
    return [
        pb.GetSessionRequest(app_name=TARGET_APP, user_id=TARGET_USER, session_id=s)
        for s in TARGET_SESSIONS
    ]


@dataclass
class TargetState:
    """The targets as read after an example (the state the next example starts from)."""

    #: per target session: the session, or None when it does not exist
    sessions: list[pb.GetSessionResponse | None]
    #: per target session: its own configuration, encoded (None when it does not exist)
    configs: list[bytes | None]
    #: the targets' app configuration, encoded
    app_config: bytes


def _or_none(
    chan: grpc.Channel,
    method: str,
    request: message.Message,
    response: type[message.Message],
) -> Any:
    """``rpc`` of SessionService, None for NOT_FOUND."""
    try:
        return rpc(chan, "SessionService", method, request, response)
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.NOT_FOUND:
            raise
        return None


def target_state(chan: grpc.Channel) -> TargetState:
    sessions: list[pb.GetSessionResponse | None] = []
    configs: list[bytes | None] = []
    for ref in target_refs():
        sessions.append(_or_none(chan, "GetSession", ref, pb.GetSessionResponse))
        request = pb.GetSessionConfigRequest(
            app_name=ref.app_name, user_id=ref.user_id, session_id=ref.session_id
        )
        config = _or_none(chan, "GetSessionConfig", request, pb.GetSessionConfigResponse)
        configs.append(None if config is None else config.SerializeToString(deterministic=True))
    app = rpc(
        chan,
        "SessionService",
        "GetAppConfig",
        pb.GetAppConfigRequest(app_name=TARGET_APP),
        pb.GetAppConfigResponse,
    )
    return TargetState(sessions, configs, app.SerializeToString(deterministic=True))


def _is_summary(event: event_pb2.Event) -> bool:
    return event.actions.HasField("compaction")


def check_targets_unchanged(before: TargetState, after: TargetState, method: str) -> None:
    """After a failed request: the targets are as they were (sessions, events, state, their
    configurations and their app's), except for summaries the engine may have appended in the
    background."""
    for old, new in zip(before.sessions, after.sessions, strict=True):
        if old is None:
            continue
        if new is None:
            raise PropertyError(f"a failed {method} deleted a target session")
        old_events, new_events = list(old.session.events), list(new.session.events)
        if new_events[: len(old_events)] != old_events or not all(
            _is_summary(e) for e in new_events[len(old_events) :]
        ):
            raise PropertyError(f"a failed {method} changed the events of {old.session.id}")
        if old.session.state != new.session.state:
            raise PropertyError(f"a failed {method} changed the state of {old.session.id}")
    if before.configs != after.configs:
        raise PropertyError(f"a failed {method} changed a session configuration")
    if before.app_config != after.app_config:
        raise PropertyError(f"a failed {method} changed the app configuration")


def restore_targets(chan: grpc.Channel, after: TargetState) -> bool:
    """Re-seeds the targets that were deleted or grew large (so requests keep finding them);
    True when it did."""
    restored = False
    for i, (session_id, now) in enumerate(zip(TARGET_SESSIONS, after.sessions, strict=True)):
        if now is None or len(now.session.events) > _MAX_TARGET_EVENTS or now.ByteSize() > 1 << 20:
            seed_session(chan, TARGET_APP, TARGET_USER, session_id, f"t{i}")
            restored = True
    return restored


def write_stats(path: str) -> None:
    """Appends the outcome counts to ``path`` (one line per method, code and reason)."""
    with open(path, "a", encoding="utf-8") as out:
        for (name, code, reason), count in sorted(STATS.items()):
            out.write(f"{count:8d} {name} {code} {reason}\n")
    STATS.clear()


@contextlib.contextmanager
def running(db: str) -> Iterator[tuple[BackgroundServer, grpc.Channel, Seeded]]:
    with BackgroundServer(db) as server, channel(server.target) as chan:
        yield server, chan, seed(chan)
