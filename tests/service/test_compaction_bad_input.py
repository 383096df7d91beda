"""Every CompactionService RPC with invalid input, and invalid summarizer / compaction configs:
a clear status and an ErrorInfo reason."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from contextengine.core.validate import MAX_ID_CHARS
from contextengine.testing import start_local_server
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    compaction_service_pb2_grpc,
    config_pb2,
    content_pb2,
    session_service_pb2 as spb,
    session_service_pb2_grpc,
)
from tests.service.helpers import text_event
from tests.service.test_bad_input import expect

pytestmark = pytest.mark.service

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION

#: an app with a compaction configuration, and one without
APP = "app"
BARE = "bare"
USER = "u1"
SESSION = "s1"
SLIDING = config_pb2.EventsCompactionConfig(compaction_interval=1, overlap_size=0)


@dataclass
class Stubs:
    # Any: the generated stubs are typed for the synchronous API.
    compaction: Any
    sessions: Any


@pytest.fixture
async def stubs() -> AsyncIterator[Stubs]:
    async with (
        start_local_server() as server,
        grpc.aio.insecure_channel(server.target) as channel,
    ):
        s = Stubs(
            compaction_service_pb2_grpc.CompactionServiceStub(channel),
            session_service_pb2_grpc.SessionServiceStub(channel),
        )
        await s.sessions.UpdateAppConfig(
            spb.UpdateAppConfigRequest(
                config=config_pb2.AppConfig(app_name=APP, events_compaction_config=SLIDING)
            )
        )
        for app in (APP, BARE):
            await s.sessions.CreateSession(
                spb.CreateSessionRequest(app_name=app, user_id=USER, session_id=SESSION)
            )
            for text in ("Hello", "Hi there, how can I help?"):
                author = "user" if text == "Hello" else "agent"
                await s.sessions.AppendEvent(
                    spb.AppendEventRequest(
                        app_name=app,
                        user_id=USER,
                        session_id=SESSION,
                        event=text_event(text, author=author),
                    )
                )
        yield s


def _summary() -> content_pb2.Content:
    return content_pb2.Content(role="model", parts=[content_pb2.Part(text="summary")])


#: RPC name -> a call that is valid apart from the address fields it is given
CALLS: dict[str, Callable[[Stubs, dict[str, Any]], Any]] = {
    "EndInvocation": lambda s, a: s.compaction.EndInvocation(kpb.EndInvocationRequest(**a)),
    "Compact": lambda s, a: s.compaction.Compact(kpb.CompactRequest(**a)),
    "PlanCompaction": lambda s, a: s.compaction.PlanCompaction(kpb.PlanCompactionRequest(**a)),
    "CommitCompaction": lambda s, a: s.compaction.CommitCompaction(
        kpb.CommitCompactionRequest(
            based_on_sequence=1, first_sequence=1, last_sequence=1, summary=_summary(), **a
        )
    ),
    "ExpandSummary": lambda s, a: s.compaction.ExpandSummary(
        kpb.ExpandSummaryRequest(summary_sequence=1, **a)
    ),
    "GetCompactionStatus": lambda s, a: s.compaction.GetCompactionStatus(
        kpb.GetCompactionStatusRequest(**a)
    ),
}

ADDRESS: dict[str, Any] = {"app_name": APP, "user_id": USER, "session_id": SESSION}

BAD_ADDRESSES = [
    ({"app_name": ""}, "MISSING_FIELD", "app_name"),
    ({"user_id": ""}, "MISSING_FIELD", "user_id"),
    ({"session_id": ""}, "MISSING_FIELD", "session_id"),
    ({"app_name": "app\x00"}, "INVALID_ID", "app_name"),
    ({"user_id": " u1"}, "INVALID_ID", "user_id"),
    ({"session_id": "s" * (MAX_ID_CHARS + 1)}, "INVALID_ID", "session_id"),
]


@pytest.mark.parametrize("rpc", list(CALLS))
@pytest.mark.parametrize(("change", "reason", "field"), BAD_ADDRESSES)
async def test_bad_session_address(
    stubs: Stubs, rpc: str, change: dict[str, Any], reason: str, field: str
) -> None:
    await expect(CALLS[rpc](stubs, {**ADDRESS, **change}), INVALID, reason, field)


@pytest.mark.parametrize("rpc", list(CALLS))
async def test_unknown_session(stubs: Stubs, rpc: str) -> None:
    await expect(
        CALLS[rpc](stubs, {**ADDRESS, "session_id": "nope"}), NOT_FOUND, "SESSION_NOT_FOUND"
    )


async def test_unknown_session_without_compaction_config(stubs: Stubs) -> None:
    # NOT_FOUND comes before the configuration check.
    for rpc in ("EndInvocation", "Compact", "PlanCompaction"):
        await expect(
            CALLS[rpc](stubs, {**ADDRESS, "app_name": BARE, "session_id": "nope"}),
            NOT_FOUND,
            "SESSION_NOT_FOUND",
        )


async def test_end_invocation_bad_input(stubs: Stubs) -> None:
    await expect(
        stubs.compaction.EndInvocation(kpb.EndInvocationRequest(invocation_id="inv\n1", **ADDRESS)),
        INVALID,
        "INVALID_ID",
        "invocation_id",
    )
    # Without a compaction configuration nothing is scheduled (not an error).
    response = await stubs.compaction.EndInvocation(
        kpb.EndInvocationRequest(invocation_id="i1", **{**ADDRESS, "app_name": BARE})
    )
    assert not response.scheduled


VIEW_ERRORS = [
    ({"trigger": 99}, "INVALID_ARGUMENT", "trigger"),
    ({"trigger": -1}, "INVALID_ARGUMENT", "trigger"),
    ({"agent_name": "the agent"}, "INVALID_ID", "agent_name"),
    ({"agent_name": "agent\t"}, "INVALID_ID", "agent_name"),
    ({"branch": "root..coder"}, "INVALID_ID", "branch"),
    ({"branch": "root/coder"}, "INVALID_ID", "branch"),
    ({"isolation_scope": " scope"}, "INVALID_ID", "isolation_scope"),
]


@pytest.mark.parametrize(("fields", "reason", "field"), VIEW_ERRORS)
async def test_compact_and_plan_bad_view(
    stubs: Stubs, fields: dict[str, Any], reason: str, field: str
) -> None:
    await expect(
        stubs.compaction.Compact(kpb.CompactRequest(**ADDRESS, **fields)), INVALID, reason, field
    )
    await expect(
        stubs.compaction.PlanCompaction(kpb.PlanCompactionRequest(**ADDRESS, **fields)),
        INVALID,
        reason,
        field,
    )


async def test_compact_and_plan_without_compaction_config(stubs: Stubs) -> None:
    bare = {**ADDRESS, "app_name": BARE}
    for call in (
        stubs.compaction.Compact(kpb.CompactRequest(**bare)),
        stubs.compaction.PlanCompaction(kpb.PlanCompactionRequest(**bare)),
        stubs.compaction.PlanCompaction(kpb.PlanCompactionRequest(ignore_trigger=True, **bare)),
    ):
        await expect(call, PRECONDITION, "COMPACTION_NOT_CONFIGURED")


@pytest.mark.parametrize(
    ("config", "trigger"),
    [
        (SLIDING, kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD),
        (
            config_pb2.EventsCompactionConfig(token_threshold=10, event_retention_size=0),
            kpb.COMPACTION_TRIGGER_SLIDING_WINDOW,
        ),
    ],
)
async def test_trigger_without_its_pair(
    stubs: Stubs,
    config: config_pb2.EventsCompactionConfig,
    trigger: kpb.CompactionTrigger.ValueType,
) -> None:
    await stubs.sessions.UpdateAppConfig(
        spb.UpdateAppConfigRequest(
            config=config_pb2.AppConfig(app_name=APP, events_compaction_config=config)
        )
    )
    await expect(
        stubs.compaction.Compact(kpb.CompactRequest(trigger=trigger, **ADDRESS)),
        PRECONDITION,
        "COMPACTION_NOT_CONFIGURED",
    )
    await expect(
        stubs.compaction.PlanCompaction(
            kpb.PlanCompactionRequest(trigger=trigger, ignore_trigger=True, **ADDRESS)
        ),
        PRECONDITION,
        "COMPACTION_NOT_CONFIGURED",
    )


async def test_commit_bad_input(stubs: Stubs) -> None:
    def commit(**fields: Any) -> Any:
        request = kpb.CommitCompactionRequest(
            based_on_sequence=2, first_sequence=1, last_sequence=2, summary=_summary(), **ADDRESS
        )
        for name, value in fields.items():
            if value is None:
                request.ClearField(name)  # type: ignore[arg-type]
            elif name == "summary":
                request.summary.CopyFrom(value)
            else:
                setattr(request, name, value)
        return stubs.compaction.CommitCompaction(request)

    await expect(commit(summary=None), INVALID, "MISSING_FIELD", "summary")
    await expect(
        commit(summary=content_pb2.Content(role="model")), INVALID, "MISSING_FIELD", "summary"
    )
    await expect(commit(based_on_sequence=0), INVALID, "MISSING_FIELD", "based_on_sequence")
    await expect(commit(based_on_sequence=-4), INVALID, "MISSING_FIELD", "based_on_sequence")
    await expect(commit(based_on_sequence=3), INVALID, "INVALID_ARGUMENT", "based_on_sequence")
    await expect(commit(isolation_scope="a\x01"), INVALID, "INVALID_ID", "isolation_scope")
    await expect(commit(first_sequence=-1), INVALID, "INVALID_COMPACTION_RANGE", "first_sequence")
    await expect(commit(last_sequence=3), INVALID, "INVALID_COMPACTION_RANGE", "last_sequence")
    await expect(
        commit(rolls_up_sequence=1), INVALID, "INVALID_COMPACTION_RANGE", "rolls_up_sequence"
    )
    await expect(
        commit(rolls_up_sequence=7), INVALID, "INVALID_COMPACTION_RANGE", "rolls_up_sequence"
    )
    # None of these appended anything; the valid request does.
    response = await commit()
    assert response.summary.sequence == 3


async def test_expand_bad_input(stubs: Stubs) -> None:
    for sequence in (0, -1):
        await expect(
            stubs.compaction.ExpandSummary(
                kpb.ExpandSummaryRequest(summary_sequence=sequence, **ADDRESS)
            ),
            INVALID,
            "MISSING_FIELD",
            "summary_sequence",
        )
    await expect(
        stubs.compaction.ExpandSummary(kpb.ExpandSummaryRequest(summary_sequence=3, **ADDRESS)),
        NOT_FOUND,
        "EVENT_NOT_FOUND",
    )
    await expect(
        stubs.compaction.ExpandSummary(kpb.ExpandSummaryRequest(summary_sequence=1, **ADDRESS)),
        PRECONDITION,
        "NOT_A_SUMMARY",
    )


# -- app configurations -----------------------------------------------------------------------


def _gemini(**fields: Any) -> config_pb2.SummarizerConfig:
    fields.setdefault("model", "gemini-2.5-flash")
    return config_pb2.SummarizerConfig(gemini=config_pb2.GeminiSummarizerConfig(**fields))


BAD_SUMMARIZERS = [
    (
        config_pb2.SummarizerConfig(extractive=config_pb2.ExtractiveSummarizerConfig(max_chars=0)),
        "extractive.max_chars",
    ),
    (
        config_pb2.SummarizerConfig(
            extractive=config_pb2.ExtractiveSummarizerConfig(max_chars=-10)
        ),
        "extractive.max_chars",
    ),
    (_gemini(model=""), "gemini.model"),
    (_gemini(model="   "), "gemini.model"),
    (_gemini(timeout_seconds=0), "gemini.timeout_seconds"),
    (_gemini(timeout_seconds=-1.5), "gemini.timeout_seconds"),
    (_gemini(timeout_seconds=math.nan), "gemini.timeout_seconds"),
    (_gemini(timeout_seconds=math.inf), "gemini.timeout_seconds"),
    (_gemini(max_attempts=0), "gemini.max_attempts"),
    (_gemini(max_attempts=11), "gemini.max_attempts"),
    (_gemini(prompt_template="Summarise the conversation."), "gemini.prompt_template"),
    (
        _gemini(prompt_template="{conversation_history}\n{conversation_history}"),
        "gemini.prompt_template",
    ),
    (_gemini(prompt_template="{language}: {conversation_history}"), "gemini.prompt_template"),
    (_gemini(prompt_template='{"a": 1} {conversation_history}'), "gemini.prompt_template"),
    (_gemini(prompt_template="{conversation_history} }"), "gemini.prompt_template"),
    (_gemini(prompt_template="{} {conversation_history}"), "gemini.prompt_template"),
    (_gemini(prompt_template="{conversation_history"), "gemini.prompt_template"),
]


@pytest.mark.parametrize(("summarizer", "field"), BAD_SUMMARIZERS)
async def test_invalid_summarizer_config(
    stubs: Stubs, summarizer: config_pb2.SummarizerConfig, field: str
) -> None:
    config = config_pb2.AppConfig(
        app_name=APP, events_compaction_config=SLIDING, summarizer=summarizer
    )
    await expect(
        stubs.sessions.UpdateAppConfig(spb.UpdateAppConfigRequest(config=config)),
        INVALID,
        "INVALID_SUMMARIZER_CONFIG",
        f"config.summarizer.{field}",
    )
    # Nothing was stored.
    stored = await stubs.sessions.GetAppConfig(spb.GetAppConfigRequest(app_name=APP))
    assert not stored.config.HasField("summarizer")


@pytest.mark.parametrize(
    "summarizer",
    [
        config_pb2.SummarizerConfig(),
        config_pb2.SummarizerConfig(extractive=config_pb2.ExtractiveSummarizerConfig()),
        config_pb2.SummarizerConfig(extractive=config_pb2.ExtractiveSummarizerConfig(max_chars=1)),
        config_pb2.SummarizerConfig(client=config_pb2.ClientSummarizerConfig()),
        _gemini(),
        _gemini(
            prompt_template='Reply as {{"summary": ...}}.\n{conversation_history}',
            timeout_seconds=0.5,
            max_attempts=10,
        ),
    ],
)
async def test_valid_summarizer_config(
    stubs: Stubs, summarizer: config_pb2.SummarizerConfig
) -> None:
    config = config_pb2.AppConfig(
        app_name=APP, events_compaction_config=SLIDING, summarizer=summarizer
    )
    await stubs.sessions.UpdateAppConfig(spb.UpdateAppConfigRequest(config=config))
    stored = await stubs.sessions.GetAppConfig(spb.GetAppConfigRequest(app_name=APP))
    assert stored.config.summarizer == summarizer


# tests/service/test_app_config.py checks the messages of the other rule breaks.
BAD_COMPACTION = [
    ({"token_threshold": 0, "event_retention_size": 1}, "token_threshold"),
    ({"token_threshold": 100}, "token_threshold"),
    ({"token_threshold": -5, "event_retention_size": 1}, "token_threshold"),
    ({"token_threshold": 5, "event_retention_size": -1}, "event_retention_size"),
    ({"compaction_interval": -3, "overlap_size": 0}, "compaction_interval"),
    ({"overlap_size": 2}, "compaction_interval"),
    (
        {"compaction_interval": 2, "overlap_size": 1, "token_threshold": 0},
        "token_threshold",
    ),
]


@pytest.mark.parametrize(("fields", "field"), BAD_COMPACTION)
async def test_invalid_compaction_config_names_the_field(
    stubs: Stubs, fields: dict[str, int], field: str
) -> None:
    config = config_pb2.AppConfig(
        app_name=APP, events_compaction_config=config_pb2.EventsCompactionConfig(**fields)
    )
    await expect(
        stubs.sessions.UpdateAppConfig(spb.UpdateAppConfigRequest(config=config)),
        INVALID,
        "INVALID_COMPACTION_CONFIG",
        f"config.events_compaction_config.{field}",
    )
    stored = await stubs.sessions.GetAppConfig(spb.GetAppConfigRequest(app_name=APP))
    assert stored.config.events_compaction_config == SLIDING
