"""CommitCompaction accepts exactly what PlanCompaction returned (issue 13, item 9).

The planner applies ADK's dead-call rule (a call that can never be answered does not block a
range forever); the commit check shares it. Each test builds a session through the real gRPC
service, plans with a client summarizer configured, commits the plan unchanged and checks the
summary covers the planned range. Ranges the planner would not propose are rejected with a
message that says why the obligation is open (never "outside the range" when nothing answers it).
"""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.client import ContextEngineClient
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    content_pb2,
    event_pb2,
)
from tests.core.context.context_strategies import Session, sessions
from tests.core.test_compaction_commit_property import compaction_configs, proto_events
from tests.service.helpers import text_event
from tests.service.test_compaction import (
    APP,
    SESSION,
    TOKENS,
    USER,
    Writer,
    engine,
    events_of,
    expect_error,
    summaries,
)

pytestmark = [
    pytest.mark.service,
    pytest.mark.filterwarnings(
        # AuthConfig.__init__ calls its own deprecated get_credential_key() (auth/auth_tool.py).
        r"ignore:This method is deprecated\. Use credential_key instead\.:DeprecationWarning"
    ),
]

CLIENT = config_pb2.SummarizerConfig(client=config_pb2.ClientSummarizerConfig())
TOKEN = kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD


def call(
    call_id: str, *, invocation: str, name: str = "write_file", long_running: bool = False
) -> event_pb2.Event:
    event = event_pb2.Event(
        author="agent",
        invocation_id=invocation,
        content=content_pb2.Content(
            role="model",
            parts=[
                content_pb2.Part(
                    function_call=content_pb2.FunctionCall(
                        id=call_id, name=name, args=dict_to_struct({"path": "notes.txt"})
                    )
                )
            ],
        ),
    )
    if long_running:
        event.long_running_tool_ids.append(call_id)
    return event


def response(
    call_id: str, *, invocation: str, name: str = "write_file", author: str = "agent"
) -> event_pb2.Event:
    return event_pb2.Event(
        author=author,
        invocation_id=invocation,
        content=content_pb2.Content(
            role="user",
            parts=[
                content_pb2.Part(
                    function_response=content_pb2.FunctionResponse(
                        id=call_id, name=name, response=dict_to_struct({"result": "ok"})
                    )
                )
            ],
        ),
    )


def hitl_request(
    call_id: str, request_id: str, *, invocation: str, kind: str
) -> list[event_pb2.Event]:
    """ADK's human-in-the-loop shape: the tool's placeholder response carrying the request, then
    the framework's long-running request call the client is to answer."""
    placeholder = response(call_id, invocation=invocation)
    if kind == "confirmation":
        placeholder.actions.requested_tool_confirmations[call_id].hint = "Write the file?"
        name = "adk_request_confirmation"
    else:
        placeholder.actions.requested_auth_configs[call_id].CopyFrom(
            dict_to_struct({"authScheme": "bearer"})
        )
        name = "adk_request_credential"
    return [placeholder, call(request_id, invocation=invocation, name=name, long_running=True)]


async def plan_of(
    client: ContextEngineClient,
    trigger: kpb.CompactionTrigger.ValueType = kpb.COMPACTION_TRIGGER_SLIDING_WINDOW,
) -> kpb.CompactionPlan:
    response = await client.plan_compaction(APP, USER, SESSION, trigger=trigger)
    assert response.HasField("plan"), response.skipped_reason
    return response.plan


async def commit_accepted(client: ContextEngineClient, plan: kpb.CompactionPlan) -> event_pb2.Event:
    """Commits ``plan`` unchanged; the summary covers exactly its range."""
    summary = await client.commit_compaction(APP, USER, SESSION, plan, "Client summary.")
    compaction = summary.actions.compaction
    assert (compaction.start_sequence, compaction.end_sequence) == (
        plan.first_sequence,
        plan.last_sequence,
    )
    assert (compaction.start_timestamp, compaction.end_timestamp) == (
        plan.start_timestamp,
        plan.end_timestamp,
    )
    assert summaries(await events_of(client)) == [summary]
    return summary


#: what a message about an obligation nothing answers must never say
ANSWERED_ELSEWHERE = ("outside", "after the range")


async def rejected(
    client: ContextEngineClient,
    first: int,
    last: int,
    based_on: int,
    call_id: str,
    *,
    says: tuple[str, ...],
    never: tuple[str, ...] = ANSWERED_ELSEWHERE,
) -> None:
    """Commits ``first..last``: INVALID_COMPACTION_RANGE naming ``call_id``, with a message that
    holds every word of ``says`` and none of ``never``."""
    plan = kpb.CompactionPlan(based_on_sequence=based_on, first_sequence=first, last_sequence=last)
    error = await expect_error(
        client.commit_compaction(APP, USER, SESSION, plan, "nope"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_COMPACTION_RANGE",
    )
    assert error.metadata["call_id"] == call_id, error
    assert error.metadata["field"] == "last_sequence", error
    for word in says:
        assert word in error.message, error
    for word in never:
        assert word not in error.message, error


# -- calls that can never be answered: the plan holds them, the commit must accept it ---------


async def test_a_crashed_invocations_call_is_committed_with_the_plan() -> None:
    async with engine(summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.add(
            text_event("Save my notes.", invocation_id="i1"),  # 1
            call("c1", invocation="i1"),  # 2: the process died before answering
        )
        await writer.turn(2)  # 3, 4
        plan = await plan_of(client)
        assert (plan.first_sequence, plan.last_sequence) == (1, 4)
        await commit_accepted(client, plan)


async def test_a_crashed_invocations_call_in_a_token_threshold_plan() -> None:
    async with engine(config=TOKENS, summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.add(
            text_event("Save my notes.", invocation_id="i1"),  # 1
            call("c1", invocation="i1"),  # 2
        )
        await writer.turn(2, tokens=150)  # 3, 4
        plan = await plan_of(client, TOKEN)
        assert (plan.first_sequence, plan.last_sequence) == (1, 3)
        await commit_accepted(client, plan)


@pytest.mark.parametrize("kind", ["confirmation", "auth"])
async def test_an_abandoned_request_is_committed_with_the_plan(kind: str) -> None:
    async with engine(summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.add(
            text_event("Save my notes.", invocation_id="i1"),  # 1
            call("c1", invocation="i1"),  # 2
            *hitl_request("c1", "adk-r1", invocation="i1", kind=kind),  # 3, 4
        )
        await writer.turn(2)  # 5, 6: the user moved on without answering
        plan = await plan_of(client)
        assert (plan.first_sequence, plan.last_sequence) == (1, 6)
        await commit_accepted(client, plan)


async def test_an_abandoned_long_running_input_request_is_committed_with_the_plan() -> None:
    async with engine(summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.add(
            text_event("Book a table.", invocation_id="i1"),  # 1
            call("adk-in1", invocation="i1", name="adk_request_input", long_running=True),  # 2
        )
        await writer.turn(2)  # 3, 4
        plan = await plan_of(client)
        assert (plan.first_sequence, plan.last_sequence) == (1, 4)
        await commit_accepted(client, plan)


async def test_a_rolled_up_plan_over_a_dead_call_commits() -> None:
    async with engine(config=TOKENS, summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=150)  # 1, 2
        first = await plan_of(client, TOKEN)
        earlier = await commit_accepted(client, first)  # 3
        await writer.add(
            text_event("Save my notes.", invocation_id="i2"),  # 4
            call("c1", invocation="i2"),  # 5
        )
        await writer.turn(3, tokens=150)  # 6, 7
        plan = await plan_of(client, TOKEN)
        assert (plan.first_sequence, plan.last_sequence, plan.rolls_up_sequence) == (
            2,
            6,
            earlier.sequence,
        )
        summary = await client.commit_compaction(APP, USER, SESSION, plan, "Rolled up.")
        assert (
            summary.actions.compaction.start_timestamp == earlier.actions.compaction.start_timestamp
        )


# -- calls that may still be answered: the plan stops before them ------------------------------


async def test_a_pending_confirmation_stays_out_of_the_plan() -> None:
    async with engine(summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.turn(1)  # 1, 2
        await writer.turn(2)  # 3, 4
        await writer.add(
            text_event("Save my notes.", invocation_id="i3"),  # 5
            call("c1", invocation="i3"),  # 6
            *hitl_request("c1", "adk-r1", invocation="i3", kind="confirmation"),  # 7, 8
        )
        plan = await plan_of(client)
        assert (plan.first_sequence, plan.last_sequence) == (1, 5)
        await rejected(client, 1, 7, 8, "c1", says=("confirmation", "pending"))
        await rejected(client, 1, 8, 8, "adk-r1", says=("pending",))
        await commit_accepted(client, plan)


async def test_a_running_long_running_call_stays_out_of_the_plan() -> None:
    async with engine(summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.add(
            text_event("Render the video.", invocation_id="i1"),  # 1
            call("lr1", invocation="i1", name="render", long_running=True),  # 2
        )
        await writer.turn(2)  # 3, 4
        plan = await plan_of(client)
        assert (plan.first_sequence, plan.last_sequence) == (1, 1)
        await rejected(client, 1, 4, 4, "lr1", says=("long-running",))
        await commit_accepted(client, plan)


async def test_a_long_running_call_answered_later_is_planned_with_its_answer() -> None:
    async with engine(summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.add(
            text_event("Render the video.", invocation_id="i1"),  # 1
            call("lr1", invocation="i1", name="render", long_running=True),  # 2
            response("lr1", invocation="i2", name="render", author="user"),  # 3
            text_event("The video is ready.", author="agent", invocation_id="i2"),  # 4
        )
        plan = await plan_of(client)
        assert (plan.first_sequence, plan.last_sequence) == (1, 4)
        await rejected(client, 1, 2, 4, "lr1", says=("event 3", "after the range"), never=())
        await commit_accepted(client, plan)


async def test_the_newest_invocations_open_call_is_named_as_such() -> None:
    async with engine(summarizer=CLIENT) as (_, client):
        writer = Writer(client)
        await writer.turn(1)  # 1, 2
        await writer.add(
            text_event("Save my notes.", invocation_id="i2"),  # 3
            call("c2", invocation="i2"),  # 4: i2 may still be running
        )
        await rejected(client, 1, 4, 4, "c2", says=("newest", "'i2'"))


# -- generated sessions through the service ---------------------------------------------------


async def _replay(session: Session, config: config_pb2.EventsCompactionConfig, seed: int) -> int:
    """Appends the session's events one by one; after each, plans with every configured trigger
    (the token threshold for the root scope and each isolation scope so far) and commits one of
    the plans unchanged, which must be accepted. Returns how many plans were committed."""
    rng = random.Random(seed)
    committed = 0
    async with engine(config=config, summarizer=CLIENT) as (_, client):
        scopes: set[str] = set()
        for event in proto_events(session.events, rng):
            await client.append_event(APP, USER, SESSION, event)
            if event.HasField("isolation_scope"):
                scopes.add(event.isolation_scope)
            asks: list[tuple[kpb.CompactionTrigger.ValueType, str | None]] = [
                (kpb.COMPACTION_TRIGGER_AFTER_INVOCATION, None)
            ]
            if config.HasField("compaction_interval"):
                asks.append((kpb.COMPACTION_TRIGGER_SLIDING_WINDOW, None))
            if config.HasField("token_threshold"):
                asks += [(TOKEN, scope) for scope in [None, *sorted(scopes)]]
            plans = []
            for trigger, scope in asks:
                response = await client.plan_compaction(
                    APP,
                    USER,
                    SESSION,
                    trigger=trigger,
                    isolation_scope=scope,
                    ignore_trigger=rng.random() < 0.5,
                )
                if response.HasField("plan"):
                    plans.append(response.plan)
            if plans:
                plan = rng.choice(plans)
                summary = await client.commit_compaction(APP, USER, SESSION, plan, "Summary.")
                compaction = summary.actions.compaction
                assert compaction.end_sequence == plan.last_sequence
                assert (compaction.start_timestamp, compaction.end_timestamp) == (
                    plan.start_timestamp,
                    plan.end_timestamp,
                )
                committed += 1
    return committed


#: plans committed by the generated gRPC check (a run that commits none checks nothing)
COMMITTED: list[int] = []


@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    session=st.sampled_from(("tools", "compaction", "rewind")).flatmap(sessions),
    config=compaction_configs(),
    seed=st.integers(0, 2**32 - 1),
)
def test_generated_sessions_commit_every_plan_over_grpc(
    session: Session, config: config_pb2.EventsCompactionConfig, seed: int
) -> None:
    """After every event of a generated session (long-running calls, confirmations, auth
    requests, calls never answered, rewinds, imported summaries, pins), one of the plans
    PlanCompaction returns is committed unchanged: CommitCompaction accepts it."""
    COMMITTED.append(asyncio.run(_replay(session, config, seed)))
