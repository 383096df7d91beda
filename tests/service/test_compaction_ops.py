"""The compaction operations in process (no gRPC): the client-summary protocol (plan, commit,
a second commit of the same plan is stale), expansion, status, and request validation raised as
the domain errors the RPCs map to statuses."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contextengine.core.errors import ContextEngineError
from contextengine.engine import Engine, EngineSettings, open_engine
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    content_pb2,
    context_service_pb2 as cpb,
    session_service_pb2 as spb,
)
from tests.service.helpers import SessionRef, text_event

pytestmark = pytest.mark.unit

REF = SessionRef(app_name="app", user_id="u", session_id="s")
SLIDING = config_pb2.EventsCompactionConfig(compaction_interval=2, overlap_size=1)
CLIENT = config_pb2.SummarizerConfig(client=config_pb2.ClientSummarizerConfig())


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    """An in-memory engine whose app compacts every two invocations with client summaries,
    and a session with two invocations."""
    async with await open_engine(EngineSettings(db=":memory:")) as opened:
        app = config_pb2.AppConfig(
            app_name=REF["app_name"], events_compaction_config=SLIDING, summarizer=CLIENT
        )
        await opened.update_app_config(spb.UpdateAppConfigRequest(config=app))
        await opened.create_session(spb.CreateSessionRequest(**REF))
        for turn in (1, 2):
            for event in (
                text_event(f"question {turn}", invocation_id=f"i{turn}"),
                text_event(f"answer {turn}", author="agent", invocation_id=f"i{turn}"),
            ):
                await opened.append_event(spb.AppendEventRequest(**REF, event=event))
        yield opened


def _summary(text: str) -> content_pb2.Content:
    return content_pb2.Content(role="model", parts=[content_pb2.Part(text=text)])


def _commit(plan: kpb.CompactionPlan, text: str) -> kpb.CommitCompactionRequest:
    return kpb.CommitCompactionRequest(
        **REF,
        based_on_sequence=plan.based_on_sequence,
        first_sequence=plan.first_sequence,
        last_sequence=plan.last_sequence,
        rolls_up_sequence=plan.rolls_up_sequence,
        summary=_summary(text),
    )


async def test_plan_commit_then_the_same_plan_is_stale(engine: Engine) -> None:
    planned = await engine.plan_compaction(kpb.PlanCompactionRequest(**REF, agent_name="agent"))
    plan = planned.plan
    assert (plan.first_sequence, plan.last_sequence, plan.based_on_sequence) == (1, 4, 4)
    committed = await engine.commit_compaction(_commit(plan, "Two questions answered."))
    assert committed.summary.sequence == 5
    assert committed.summary.actions.compaction.end_sequence == 4

    with pytest.raises(ContextEngineError) as stale:
        await engine.commit_compaction(_commit(plan, "again"))
    assert stale.value.reason == "COMPACTION_PLAN_STALE"
    assert stale.value.metadata["conflicting_sequence"] == "5"

    expanded = await engine.expand_summary(kpb.ExpandSummaryRequest(**REF, summary_sequence=5))
    assert [event.sequence for event in expanded.events] == [1, 2, 3, 4]
    built = await engine.build_context(cpb.BuildContextRequest(**REF, agent_name="agent"))
    assert built.response().contents[0].parts[0].text == "Two questions answered."
    status = await engine.get_compaction_status(kpb.GetCompactionStatusRequest(**REF))
    assert not status.running


@pytest.mark.parametrize(
    ("request_message", "reason", "field"),
    [
        (kpb.CommitCompactionRequest(**REF, based_on_sequence=4), "MISSING_FIELD", "summary"),
        (
            kpb.CommitCompactionRequest(**REF, summary=_summary("x")),
            "MISSING_FIELD",
            "based_on_sequence",
        ),
        (
            kpb.CommitCompactionRequest(**REF, summary=_summary("x"), based_on_sequence=99),
            "INVALID_ARGUMENT",
            "based_on_sequence",
        ),
        (
            kpb.CompactRequest(
                **REF, agent_name="agent", trigger=kpb.CompactionTrigger.ValueType(42)
            ),
            "INVALID_ARGUMENT",
            "trigger",
        ),
        (kpb.ExpandSummaryRequest(**REF), "MISSING_FIELD", "summary_sequence"),
    ],
)
async def test_bad_requests_are_domain_errors(
    engine: Engine, request_message: object, reason: str, field: str
) -> None:
    method = {
        kpb.CommitCompactionRequest: engine.commit_compaction,
        kpb.CompactRequest: engine.compact,
        kpb.ExpandSummaryRequest: engine.expand_summary,
    }[type(request_message)]
    with pytest.raises(ContextEngineError) as error:
        await method(request_message)  # type: ignore[operator]
    assert error.value.reason == reason
    assert error.value.metadata["field"] == field
