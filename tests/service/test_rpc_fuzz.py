"""Fuzzes every RPC of every service against a real server: bad input gets a clear error and loses
nothing (architecture principle 7).

The RPCs are enumerated from the service descriptors of ``contextengine.v1`` (every
``*_service_pb2`` module), so a new RPC or service is fuzzed without touching this file. Requests
come from strategies built from the request message's descriptor (``proto_strategies``):

* ``test_mutated_requests``: a valid request for a seeded session, with a few fields mutated (or,
  one time in five, a whole request drawn from the descriptor);
* ``test_random_bodies``: random bytes as the request body (and valid requests with byte-level
  edits), through a raw channel with identity serializers.

The property, for every example: the status is not UNKNOWN or INTERNAL; a status other than OK
carries one ErrorInfo of domain "contextengine.v1" whose reason maps to that status code; a unary
call answers within its deadline (streams are read for a few frames under a short client
deadline: DEADLINE_EXCEEDED or CANCELLED from the client itself is fine, a status the server sends
must carry ErrorInfo); a request that failed left the seeded target sessions as they were; and no
request ever changes the sentinel sessions (an app the fuzzer cannot name). See ``harness``.

Budgets (Hypothesis settings, selected by ``CE_FUZZ_PROFILE``):

* default (``make test``): a fixed number of derandomized examples per RPC, the same every run,
  against the SQLite store (the whole suite in well under 90 s on two busy cores);
* ``CE_FUZZ_PROFILE=long``: random examples, many more per RPC (2000 unless
  ``CE_FUZZ_EXAMPLES=N`` says otherwise), against the SQLite and the in-memory store, with no
  per-test time limit. ``CE_FUZZ_STORES=sqlite`` (or ``memory``) picks the stores;
  ``CE_FUZZ_STATS=path`` appends how the examples ended (per RPC, status
  and reason) to a file. For example::

      CE_FUZZ_PROFILE=long CE_FUZZ_EXAMPLES=500 CE_FUZZ_STATS=/tmp/fuzz.txt \\
          .venv/bin/pytest tests/service/test_rpc_fuzz.py -x

A failure prints the falsifying request and a ``@reproduce_failure`` blob.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf import descriptor, message
from hypothesis import HealthCheck, given, note, settings, strategies as st

import contextengine.v1
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import (
    compaction_service_pb2 as cpb,
    config_pb2,
    content_pb2,
    context_service_pb2 as xpb,
    context_tools_service_pb2 as tpb,
    memory_service_pb2 as mpb,
    session_service_pb2 as pb,
    subscription_service_pb2 as spb,
)
from tests.service import harness
from tests.service.helpers import Owner, text_event
from tests.service.proto_strategies import (
    Vocabulary,
    all_methods,
    message_class,
    messages,
    mutated,
    random_bodies,
)

pytestmark = pytest.mark.fuzz

PROFILE = os.environ.get("CE_FUZZ_PROFILE", "default")
LONG = PROFILE == "long"
EXAMPLES = int(os.environ.get("CE_FUZZ_EXAMPLES", "2000" if LONG else "0")) or None

FUZZ = settings(
    max_examples=EXAMPLES or 30,
    derandomize=not LONG,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)
BYTES = settings(FUZZ, max_examples=EXAMPLES or 15)
#: the examples' wall time is mostly the server's: no per-test limit in the long profile
TIMEOUT = pytest.mark.timeout(0 if LONG else 120)


def _service_files() -> list[descriptor.FileDescriptor]:
    return [
        importlib.import_module(f"contextengine.v1.{module.name}").DESCRIPTOR
        for module in pkgutil.iter_modules(contextengine.v1.__path__)
        if module.name.endswith("_service_pb2")
    ]


METHODS = all_methods(_service_files())
SERVICES = {m.containing_service.name for m in METHODS}


def test_every_service_is_fuzzed() -> None:
    assert {
        "SessionService",
        "ContextService",
        "SubscriptionService",
        "CompactionService",
        "MemoryService",
        "ContextToolsService",
    } <= SERVICES
    assert len(METHODS) >= 25


# --- valid requests ----------------------------------------------------------------------------


def _address(request: message.Message, ref: pb.GetSessionRequest) -> message.Message:
    """Fills the request's top-level app_name, user_id and session_id from ``ref``."""
    fields = request.DESCRIPTOR.fields_by_name
    for name in ("app_name", "user_id", "session_id"):
        if name in fields and fields[name].type == descriptor.FieldDescriptor.TYPE_STRING:
            setattr(request, name, getattr(ref, name))
    return request


def _specific(ref: pb.GetSessionRequest) -> dict[str, list[message.Message]]:
    """Valid requests beyond the address, for the RPCs that need more; other RPCs (a new one
    too) start from the request with only its address fields set. A template without an
    app_name gets the target's address; one with an app_name is taken as it is."""
    owner: Owner = {"app_name": ref.app_name, "user_id": ref.user_id}
    tag = "t0" if ref.session_id == harness.TARGET_SESSIONS[0] else "t1"
    app_config = harness.app_config(ref.app_name)
    summary = content_pb2.Content(role="model", parts=[content_pb2.Part(text="a summary")])
    return {
        "SessionService.CreateSession": [
            pb.CreateSessionRequest(**owner),
            pb.CreateSessionRequest(state=dict_to_struct({"k": [1, "x"], "app:z": None}), **owner),
        ],
        "SessionService.GetSession": [
            pb.GetSessionRequest(num_recent_events=3, after_sequence=1, after_timestamp=1.0)
        ],
        "SessionService.ListSessions": [pb.ListSessionsRequest(page_size=1, **owner)],
        "SessionService.AppendEvent": [
            pb.AppendEventRequest(event=text_event("hello", invocation_id=f"{tag}-inv-3")),
        ],
        "SessionService.AppendEvents": [
            pb.AppendEventsRequest(events=[text_event("a"), text_event("b", author="agent")])
        ],
        "SessionService.ListEvents": [pb.ListEventsRequest(page_size=2, after_sequence=1)],
        "SessionService.RewindSession": [
            pb.RewindSessionRequest(rewind_before_invocation_id=f"{tag}-inv-2")
        ],
        "SessionService.UpdateAppConfig": [pb.UpdateAppConfigRequest(config=app_config)],
        "SessionService.UpdateSessionConfig": [
            pb.UpdateSessionConfigRequest(
                config=config_pb2.SessionConfig(
                    events_compaction_config=app_config.events_compaction_config
                )
            )
        ],
        "ContextService.BuildContext": [
            xpb.BuildContextRequest(agent_name="agent", preload_memory=True, memory_query="Paris"),
            xpb.BuildContextRequest(
                agent_name="agent",
                include_contents=xpb.INCLUDE_CONTENTS_NONE,
                user_content=content_pb2.Content(role="user", parts=[content_pb2.Part(text="q")]),
            ),
        ],
        "SubscriptionService.SubscribeEvents": [
            spb.SubscribeEventsRequest(scope=spb.SUBSCRIPTION_SCOPE_SESSION, after_sequence=2),
            spb.SubscribeEventsRequest(
                scope=spb.SUBSCRIPTION_SCOPE_USER, after_cursor="1", max_events_per_frame=3, **owner
            ),
        ],
        "SubscriptionService.WatchSessionState": [spb.WatchSessionStateRequest()],
        "CompactionService.EndInvocation": [cpb.EndInvocationRequest(invocation_id=f"{tag}-inv-2")],
        "CompactionService.Compact": [
            cpb.CompactRequest(trigger=cpb.COMPACTION_TRIGGER_SLIDING_WINDOW)
        ],
        "CompactionService.PlanCompaction": [cpb.PlanCompactionRequest(ignore_trigger=True)],
        "CompactionService.CommitCompaction": [
            cpb.CommitCompactionRequest(
                based_on_sequence=7, first_sequence=3, last_sequence=6, summary=summary
            )
        ],
        "CompactionService.ExpandSummary": [cpb.ExpandSummaryRequest(summary_sequence=7)],
        "MemoryService.AddEventsToMemory": [mpb.AddEventsToMemoryRequest(sequences=[1, 2, 6])],
        "MemoryService.SearchMemory": [mpb.SearchMemoryRequest(query="Paris", limit=3, **owner)],
        "ContextToolsService.ListContextTools": [tpb.ListContextToolsRequest(**owner)],
        "ContextToolsService.CallContextTool": [
            tpb.CallContextToolRequest(
                agent_name="agent",
                invocation_id=f"{tag}-inv-3",
                call=content_pb2.FunctionCall(
                    id=f"{tag}-tool", name=name, args=dict_to_struct(args)
                ),
            )
            for name, args in (
                ("context_status", {}),
                ("context_pin", {"first": 1, "last": 2}),
                ("context_hide", {"first": 3, "last": 4, "stub": "x"}),
                ("context_summarize", {"first": 3, "last": 6, "summary": "s"}),
                ("context_expand", {"sequence": 2, "max_chars": 50}),
                ("context_search", {"query": "Paris", "limit": 3}),
            )
        ],
    }


def valid_requests(method: descriptor.MethodDescriptor) -> list[message.Message]:
    """Valid requests of ``method`` for each target session."""
    key = f"{method.containing_service.name}.{method.name}"
    out: list[message.Message] = []
    for ref in harness.target_refs():
        specific = _specific(ref).get(key)
        cls = message_class(method.input_type)
        for request in specific or [cls()]:
            assert request.DESCRIPTOR is method.input_type, key
            copy = cls()
            copy.CopyFrom(request)
            if not getattr(copy, "app_name", ""):  # else the template addresses itself
                _address(copy, ref)
            out.append(copy)
    return out


# --- the environment -------------------------------------------------------------------------


@dataclass
class Env:
    server: harness.BackgroundServer
    chan: grpc.Channel
    seeded: harness.Seeded
    vocab: Vocabulary
    #: the targets as the last example left them
    targets: harness.TargetState


def _vocabulary(chan: grpc.Channel, seeded: harness.Seeded) -> Vocabulary:
    known = [
        harness.TARGET_APP,
        harness.TARGET_USER,
        *harness.TARGET_SESSIONS,
        *seeded.invocation_ids,
        *seeded.event_ids,
        "user",
        "agent",
        "model",
        "get_weather",
        "gemini-2.5-flash",
        "1",
        "7",
    ]
    ref = harness.target_refs()[0]
    events = harness.rpc(
        chan,
        "SessionService",
        "ListEvents",
        pb.ListEventsRequest(
            app_name=ref.app_name, user_id=ref.user_id, session_id=ref.session_id, page_size=1
        ),
        pb.ListEventsResponse,
    )
    sessions = harness.rpc(
        chan,
        "SessionService",
        "ListSessions",
        pb.ListSessionsRequest(app_name=ref.app_name, user_id=ref.user_id, page_size=1),
        pb.ListSessionsResponse,
    )
    known += [events.next_page_token, sessions.next_page_token]
    assert seeded.sentinel_app not in known
    return Vocabulary(known=[k for k in known if k])


STORES = os.environ.get("CE_FUZZ_STORES", "sqlite,memory" if LONG else "sqlite").split(",")


@pytest.fixture(scope="module", params=STORES)
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    db = ":memory:" if request.param == "memory" else str(tmp_path_factory.mktemp("fuzz") / "f.db")
    with harness.running(db) as (server, chan, seeded):
        yield Env(server, chan, seeded, _vocabulary(chan, seeded), harness.target_state(chan))
        harness.check_sentinels(chan, seeded)
    stats = os.environ.get("CE_FUZZ_STATS")
    if stats:
        harness.write_stats(stats)


def _example(env: Env, method: descriptor.MethodDescriptor, body: bytes) -> None:
    before = env.targets
    outcome = harness.call(env.chan, method, body)
    note(f"outcome: {outcome.code.name} {outcome.details[:300]!r} frames={outcome.frames}")
    harness.check_outcome(outcome, method, len(body))
    after = env.targets = harness.target_state(env.chan)
    if not outcome.ok:
        harness.check_targets_unchanged(before, after, method.name)
    harness.check_sentinels(env.chan, env.seeded, cheap=True)
    if harness.restore_targets(env.chan, after):
        env.targets = harness.target_state(env.chan)
    assert env.server.alive, "the server thread died"


@pytest.mark.parametrize("method", METHODS, ids=lambda m: _method_id(m))
def test_valid_requests_are_valid(env: Env, method: descriptor.MethodDescriptor) -> None:
    """The requests the mutations start from succeed (else the fuzzer would mostly meet the
    first check of each RPC)."""
    for request in valid_requests(method):
        body = request.SerializeToString()
        outcome = harness.call(env.chan, method, body)
        assert outcome.ok, (outcome.code, outcome.details, request)
        env.targets = harness.target_state(env.chan)
        if harness.restore_targets(env.chan, env.targets):
            env.targets = harness.target_state(env.chan)


def _method_id(method: descriptor.MethodDescriptor) -> str:
    return f"{method.containing_service.name}.{method.name}"


def _requests(
    method: descriptor.MethodDescriptor, vocab: Vocabulary
) -> st.SearchStrategy[message.Message]:
    bases = valid_requests(method)
    return st.one_of(
        st.sampled_from(bases).flatmap(lambda base: mutated(base, vocab)),
        st.sampled_from(bases).flatmap(lambda base: mutated(base, vocab, max_mutations=1)),
        st.sampled_from(bases).flatmap(lambda base: mutated(base, vocab)),
        st.sampled_from(bases),
        messages(method.input_type, vocab),
    )


def _serialize(request: message.Message) -> bytes | None:
    try:
        return request.SerializeToString()
    except (ValueError, TypeError, RecursionError, message.EncodeError):
        return None


@TIMEOUT
@pytest.mark.parametrize("method", METHODS, ids=_method_id)
def test_mutated_requests(env: Env, method: descriptor.MethodDescriptor) -> None:
    strategy = _requests(method, env.vocab)

    @FUZZ
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        request = data.draw(strategy, label="request")
        body = _serialize(request)
        if body is None:
            return
        _example(env, method, body)

    run()
    harness.check_sentinels(env.chan, env.seeded)


@TIMEOUT
@pytest.mark.parametrize("method", METHODS, ids=_method_id)
def test_random_bodies(env: Env, method: descriptor.MethodDescriptor) -> None:
    valid = [body for body in map(_serialize, valid_requests(method)) if body is not None]

    @BYTES
    @given(body=random_bodies(valid))
    def run(body: bytes) -> None:
        _example(env, method, body)

    run()
    harness.check_sentinels(env.chan, env.seeded)
