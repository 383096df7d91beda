"""CompactionService end to end over gRPC: triggers, summarizers, faults, plans, expansion."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.compaction.compactor import View
from contextengine.compaction.summarizers.summarizer import (
    DEFAULT_PROMPT_TEMPLATE,
    Summarizer,
    SummarizerError,
    Summary,
    SummaryInput,
)
from contextengine.settings import MEMORY_DB, ServerSettings
from contextengine.store import SessionKey
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    content_pb2,
    context_service_pb2 as cpb,
    context_service_pb2_grpc,
    event_pb2,
)
from tests.service.helpers import text_event
from tests.service.test_context import call_event, response_event

pytestmark = pytest.mark.service

APP = "app"
USER = "u1"
SESSION = "s1"

SLIDING = config_pb2.EventsCompactionConfig(compaction_interval=2, overlap_size=1)
TOKENS = config_pb2.EventsCompactionConfig(token_threshold=100, event_retention_size=1)

# -- a deterministic summarizer ----------------------------------------------------------------


class FakeSummarizer:
    """Records what it is given; can block on an event and fail in every way a model can."""

    name = "fake"

    def __init__(self) -> None:
        self.inputs: list[SummaryInput] = []
        self.active = 0
        self.max_active = 0
        self.entered = asyncio.Event()
        #: when set, each call waits for this event before answering
        self.gate: asyncio.Event | None = None
        #: "", "raise", "timeout", "none", "no_text"
        self.fault = ""
        #: how long the "timeout" fault waits before giving up
        self.deadline = 0.05
        self.usage: event_pb2.UsageMetadata | None = None

    async def summarize(self, request: SummaryInput) -> Summary | None:
        self.inputs.append(request)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        self.entered.set()
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.fault == "raise":
                raise SummarizerError("model unavailable")
            if self.fault == "timeout":
                async with asyncio.timeout(self.deadline):
                    await asyncio.Event().wait()  # never answers
            if self.fault == "none":
                return None
            if self.fault == "no_text":
                parts = [
                    content_pb2.Part(text="   "),
                    content_pb2.Part(text="hidden reasoning", thought=True),
                ]
                return Summary(content_pb2.Content(role="model", parts=parts))
            text = f"Fake summary {len(self.inputs)}."
            # The engine, not the summarizer, decides the role.
            content = content_pb2.Content(role="assistant", parts=[content_pb2.Part(text=text)])
            return Summary(content, self.usage)
        finally:
            self.active -= 1


def fake_factory(
    fake: FakeSummarizer,
) -> Callable[[config_pb2.SummarizerConfig | None], Summarizer | None]:
    def make(config: config_pb2.SummarizerConfig | None) -> Summarizer | None:
        if config is not None and config.WhichOneof("kind") == "client":
            return None
        return fake

    return make


# -- helpers -----------------------------------------------------------------------------------


@asynccontextmanager
async def engine(
    fake: FakeSummarizer | None = None,
    *,
    db: str = MEMORY_DB,
    backoff: float = 60.0,
    config: config_pb2.EventsCompactionConfig | None = SLIDING,
    summarizer: config_pb2.SummarizerConfig | None = None,
) -> AsyncIterator[tuple[ContextEngineServer, ContextEngineClient]]:
    """A server (with ``fake`` as every summarizer when given), a client, the app configured and
    session SESSION created."""
    settings = ServerSettings(compaction_backoff_seconds=backoff)
    factory = fake_factory(fake) if fake is not None else None
    async with (
        start_local_server(db, settings=settings, summarizers=factory) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        app = config_pb2.AppConfig(app_name=APP)
        if config is not None:
            app.events_compaction_config.CopyFrom(config)
        if summarizer is not None:
            app.summarizer.CopyFrom(summarizer)
        await client.update_app_config(app)
        await client.create_session(APP, USER, SESSION)
        yield server, client


class Writer:
    """Appends events with strictly increasing timestamps (ranges are timestamp ranges)."""

    def __init__(self, client: ContextEngineClient, start: float | None = None) -> None:
        self.client = client
        self.clock = time.time() - 10_000.0 if start is None else start

    async def add(self, *events: event_pb2.Event) -> list[event_pb2.Event]:
        recorded = []
        for event in events:
            self.clock += 1.0
            copy = event_pb2.Event()
            copy.CopyFrom(event)
            copy.timestamp = self.clock
            response = await self.client.append_event(APP, USER, SESSION, copy)
            recorded.append(response.event)
        return recorded

    async def turn(self, n: int, *, tokens: int | None = None) -> list[event_pb2.Event]:
        """One invocation: a user question and the agent's answer."""
        answer = text_event(
            f"On day {n} the weather in Paris is {20 + n} degrees and sunny.",
            author="agent",
            invocation_id=f"i{n}",
        )
        if tokens is not None:
            answer.usage_metadata.prompt_token_count = tokens
        return await self.add(
            text_event(f"What is the weather in Paris on day {n}?", invocation_id=f"i{n}"), answer
        )


async def events_of(client: ContextEngineClient) -> list[event_pb2.Event]:
    return [event async for event in client.list_events(APP, USER, SESSION)]


def summaries(events: list[event_pb2.Event]) -> list[event_pb2.Event]:
    return [event for event in events if event.actions.HasField("compaction")]


def summary_text(event: event_pb2.Event) -> str:
    return event.actions.compaction.compacted_content.parts[0].text


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    """Polls ``check`` until it is true (fails after ``seconds``)."""
    async with asyncio.timeout(seconds):
        while True:
            if await check():
                return
            await asyncio.sleep(0.01)


async def summary_appears(client: ContextEngineClient, count: int = 1) -> list[event_pb2.Event]:
    async def check() -> bool:
        return len(summaries(await events_of(client))) >= count

    await eventually(check)
    return summaries(await events_of(client))


async def texts_in_context(client: ContextEngineClient, **kwargs: object) -> list[str]:
    response = await client.build_context(APP, USER, SESSION, agent_name="agent", **kwargs)  # type: ignore[arg-type]
    return [part.text for content in response.contents for part in content.parts]


def contexts(client: ContextEngineClient) -> Any:
    """A raw stub (the client has no ``skip_compaction`` parameter)."""
    return context_service_pb2_grpc.ContextServiceStub(client.channel)


def context_request(**kwargs: object) -> cpb.BuildContextRequest:
    return cpb.BuildContextRequest(
        app_name=APP,
        user_id=USER,
        session_id=SESSION,
        agent_name="agent",
        **kwargs,  # type: ignore[arg-type]
    )


async def expect_error(
    call: Awaitable[object], code: grpc.StatusCode, reason: str
) -> ContextEngineError:
    with pytest.raises(ContextEngineError) as err:
        await call
    assert (err.value.code, err.value.reason) == (code, reason), err.value
    return err.value


def render_turn(n: int) -> str:
    return (
        f"user: What is the weather in Paris on day {n}?\n"
        f"agent: On day {n} the weather in Paris is {20 + n} degrees and sunny."
    )


# -- sliding window with the default (extractive) summarizer -----------------------------------


async def test_sliding_window_after_invocations(client: ContextEngineClient) -> None:
    await client.update_app_config(
        config_pb2.AppConfig(app_name=APP, events_compaction_config=SLIDING)
    )
    await client.create_session(APP, USER, SESSION)
    writer = Writer(client)
    stream = client.subscribe_events(APP, USER, SESSION)
    async with contextlib.aclosing(stream):
        assert (await anext(stream)).WhichOneof("frame") == "caught_up"

        first = await writer.turn(1)
        assert await client.end_invocation(APP, USER, SESSION, "i1")
        await eventually(
            lambda: _not_running(client)  # one invocation: below the interval, nothing to do
        )
        assert summaries(await events_of(client)) == []

        second = await writer.turn(2)
        assert await client.end_invocation(APP, USER, SESSION, "i2")
        (summary,) = await summary_appears(client)

        # The subscription sees the four raw events, then the summary.
        seen: list[event_pb2.Event] = []
        async with asyncio.timeout(10):
            while len(seen) < 5:
                frame = await anext(stream)
                if frame.WhichOneof("frame") == "event":
                    seen.append(frame.event.event)
        assert [e.sequence for e in seen] == [1, 2, 3, 4, 5]
        assert seen[-1] == summary

    raw = first + second
    assert summary.sequence == 5
    assert summary.author == "user"
    assert not summary.HasField("content")
    assert summary.invocation_id not in {"i1", "i2"}
    compaction = summary.actions.compaction
    assert compaction.start_timestamp == raw[0].timestamp
    assert compaction.end_timestamp == raw[-1].timestamp
    assert (compaction.start_sequence, compaction.end_sequence) == (1, 4)
    assert compaction.compacted_content.role == "model"
    text = summary_text(summary)
    assert "What is the weather in Paris on day 1?" in text
    assert "22 degrees" in text

    status = await client.compaction_status(APP, USER, SESSION)
    assert (status.attempts, status.summaries, status.failures, status.last_error) == (1, 1, 0, "")

    # The context shows the summary instead of the four covered events.
    assert await texts_in_context(client) == [text]

    # Two more invocations: the next window starts one invocation back (overlap_size 1).
    await writer.turn(3)
    fourth = await writer.turn(4)
    assert await client.end_invocation(APP, USER, SESSION, "i4")
    _, later = await summary_appears(client, 2)
    assert (later.actions.compaction.start_sequence, later.actions.compaction.end_sequence) == (
        3,
        9,
    )
    assert later.actions.compaction.start_timestamp == second[0].timestamp
    assert later.actions.compaction.end_timestamp == fourth[-1].timestamp


async def _not_running(client: ContextEngineClient) -> bool:
    return not (await client.compaction_status(APP, USER, SESSION)).running


# -- what a summarizer is given and what is recorded -------------------------------------------


async def test_summarizer_input_and_summary_event() -> None:
    fake = FakeSummarizer()
    fake.usage = event_pb2.UsageMetadata(
        prompt_token_count=42, candidates_token_count=7, total_token_count=49
    )
    config = config_pb2.EventsCompactionConfig(compaction_interval=1, overlap_size=0)
    async with engine(fake, config=config) as (_, client):
        writer = Writer(client)
        raw = await writer.add(
            text_event("Weather in Paris?", invocation_id="i1"),
            call_event("c1"),
            response_event("c1"),
            text_event("It is 21 degrees.", author="agent"),
        )
        response = await client.compact(APP, USER, SESSION)
        assert response.skipped_reason == ""
        summary = response.summary

        (given,) = fake.inputs
        assert list(given.events) == raw
        assert given.conversation_history == (
            "user: Weather in Paris?\n"
            "agent called tool: get_weather({'city': 'Paris'})\n"
            "Tool response from get_weather: {'temp': 21}\n"
            "agent: It is 21 degrees."
        )
        assert summary.sequence == 5
        assert summary.author == "user"
        assert summary.usage_metadata == fake.usage
        compaction = summary.actions.compaction
        assert compaction.compacted_content == content_pb2.Content(
            role="model", parts=[content_pb2.Part(text="Fake summary 1.")]
        )
        assert (compaction.start_sequence, compaction.end_sequence) == (1, 4)
        assert (compaction.start_timestamp, compaction.end_timestamp) == (
            raw[0].timestamp,
            raw[-1].timestamp,
        )
        assert (await events_of(client))[-1] == summary
        assert await texts_in_context(client) == ["Fake summary 1."]


# -- token threshold before BuildContext --------------------------------------------------------


async def test_token_threshold_compacts_before_build_context() -> None:
    fake = FakeSummarizer()
    async with engine(fake, config=TOKENS) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=60)
        await writer.turn(2, tokens=150)
        stub = contexts(client)

        skipped = await stub.BuildContext(context_request(skip_compaction=True))
        assert skipped.compaction_sequence == 0
        assert len(skipped.contents) == 4
        assert summaries(await events_of(client)) == []
        assert fake.inputs == []

        built = await stub.BuildContext(context_request())
        assert built.compaction_sequence == 5
        assert built.last_sequence == 5
        (summary,) = summaries(await events_of(client))
        assert summary.sequence == 5
        # Everything but the retained last event is summarised.
        assert (
            summary.actions.compaction.start_sequence,
            summary.actions.compaction.end_sequence,
        ) == (
            1,
            3,
        )
        (given,) = fake.inputs
        assert [e.sequence for e in given.events] == [1, 2, 3]
        texts = [part.text for content in built.contents for part in content.parts]
        assert texts == [
            "Fake summary 1.",
            "On day 2 the weather in Paris is 22 degrees and sunny.",
        ]

        # The recorded count is older than the summary now: nothing more to do.
        again = await stub.BuildContext(context_request())
        assert again.compaction_sequence == 0
        assert len(fake.inputs) == 1


async def test_below_threshold_never_waits_for_a_background_compaction() -> None:
    fake = FakeSummarizer()
    fake.gate = asyncio.Event()
    config = config_pb2.EventsCompactionConfig(
        compaction_interval=1, overlap_size=0, token_threshold=10_000, event_retention_size=1
    )
    async with engine(fake, config=config) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=50)
        assert await client.end_invocation(APP, USER, SESSION, "i1")
        async with asyncio.timeout(10):
            await fake.entered.wait()
        assert (await client.compaction_status(APP, USER, SESSION)).running

        # While the summarizer is blocked, reads and writes of the session go through.
        async with asyncio.timeout(5):
            built = await contexts(client).BuildContext(context_request())
            late = await writer.add(text_event("Another question", invocation_id="i2"))
            built_after = await contexts(client).BuildContext(context_request())
        assert built.compaction_sequence == 0
        assert len(built.contents) == 2
        assert built_after.last_sequence == late[0].sequence == 3
        assert fake.active == 1  # still blocked
        assert summaries(await events_of(client)) == []

        fake.gate.set()
        (summary,) = await summary_appears(client)
        # A plain append does not invalidate the plan; the late event is not covered.
        assert summary.sequence == 4
        assert summary.actions.compaction.end_sequence == 2
        assert await texts_in_context(client) == ["Fake summary 1.", "Another question"]


# -- single flight ----------------------------------------------------------------------------


async def test_concurrent_triggers_make_one_summary() -> None:
    fake = FakeSummarizer()
    fake.gate = asyncio.Event()
    async with engine(fake) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        first, second = await asyncio.gather(
            client.end_invocation(APP, USER, SESSION, "i2"),
            client.end_invocation(APP, USER, SESSION, "i2"),
        )
        assert first
        assert second
        async with asyncio.timeout(10):
            await fake.entered.wait()
        compact = asyncio.create_task(client.compact(APP, USER, SESSION))
        compact_sliding = asyncio.create_task(
            client.compact(APP, USER, SESSION, trigger=kpb.COMPACTION_TRIGGER_SLIDING_WINDOW)
        )

        async def blocked() -> bool:
            status = await client.compaction_status(APP, USER, SESSION)
            return status.running and fake.active == 1

        await eventually(blocked)
        fake.gate.set()
        results = await asyncio.gather(compact, compact_sliding)
        await eventually(lambda: _not_running(client))

        (summary,) = summaries(await events_of(client))
        for result in results:
            # A joining Compact either returns the summary or finds nothing left to do.
            assert result.summary == summary or result.skipped_reason == "not_enough_invocations"
        assert len(fake.inputs) == 1
        assert fake.max_active == 1
        status = await client.compaction_status(APP, USER, SESSION)
        assert (status.attempts, status.summaries, status.running) == (1, 1, False)


# -- faults -----------------------------------------------------------------------------------


FAULTS = [
    ("raise", "summarizer_failed", "model unavailable"),
    ("timeout", "summarizer_failed", "TimeoutError"),
    ("none", "summarizer_returned_nothing", "no summary text"),
    ("no_text", "summarizer_returned_nothing", "no summary text"),
]


@pytest.mark.parametrize(("fault", "reason", "error"), FAULTS)
async def test_summarizer_fault_appends_nothing(fault: str, reason: str, error: str) -> None:
    fake = FakeSummarizer()
    fake.fault = fault
    async with engine(fake, backoff=60.0) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        before = await events_of(client)

        started = time.time()
        response = await client.compact(APP, USER, SESSION)
        assert not response.HasField("summary")
        assert response.skipped_reason == reason
        assert await events_of(client) == before

        status = await client.compaction_status(APP, USER, SESSION)
        assert (status.attempts, status.failures, status.summaries) == (1, 1, 0)
        assert error in status.last_error
        assert status.retry_after >= started + 59.0
        assert not status.running

        # In backoff: triggers are refused, the session keeps working.
        assert not await client.end_invocation(APP, USER, SESSION, "i2")
        late = await writer.turn(3)
        assert await events_of(client) == before + late
        assert len(await texts_in_context(client)) == 6
        assert len(fake.inputs) == 1
        assert (await client.compaction_status(APP, USER, SESSION)).failures == 1


async def test_background_failure_backs_off_then_recovers() -> None:
    fake = FakeSummarizer()
    fake.fault = "raise"
    fake.gate = asyncio.Event()
    async with engine(fake, backoff=1.0) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        before = await events_of(client)
        assert await client.end_invocation(APP, USER, SESSION, "i2")
        async with asyncio.timeout(10):
            await fake.entered.wait()
        # A trigger while the failing pass runs is queued, but falls in the backoff.
        assert await client.end_invocation(APP, USER, SESSION, "i2")
        fake.gate.set()

        statuses: list[kpb.GetCompactionStatusResponse] = []

        async def failed() -> bool:
            statuses.append(await client.compaction_status(APP, USER, SESSION))
            return statuses[-1].failures == 1 and not statuses[-1].running

        await eventually(failed)
        status = statuses[-1]
        assert status.retry_after > 0
        assert "model unavailable" in status.last_error
        assert len(fake.inputs) == 1  # the queued trigger did not call the summarizer again
        scheduled = await client.end_invocation(APP, USER, SESSION, "i2")
        if time.time() < status.retry_after:  # same clock as the server's: still in backoff
            assert not scheduled
        assert await events_of(client) == before
        assert len(await texts_in_context(client)) == 4

        # After the backoff the next trigger summarises.
        fake.fault = ""

        async def backoff_over() -> bool:
            return (await client.compaction_status(APP, USER, SESSION)).retry_after == 0

        await eventually(backoff_over)
        assert await client.end_invocation(APP, USER, SESSION, "i2")
        (summary,) = await summary_appears(client)
        await eventually(lambda: _not_running(client))
        status = await client.compaction_status(APP, USER, SESSION)
        assert (status.attempts, status.summaries, status.failures) == (2, 1, 1)
        assert (status.last_error, status.retry_after) == ("", 0)
        assert await events_of(client) == [*before, summary]


async def test_failing_summarizer_before_build_context() -> None:
    fake = FakeSummarizer()
    fake.fault = "raise"
    async with engine(fake, config=TOKENS) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=150)
        await writer.turn(2, tokens=150)
        before = await events_of(client)
        stub = contexts(client)
        built = await stub.BuildContext(context_request())
        assert built.compaction_sequence == 0
        assert len(built.contents) == 4
        assert len(fake.inputs) == 1
        status = await client.compaction_status(APP, USER, SESSION)
        assert (status.failures, status.summaries) == (1, 0)
        assert status.retry_after > 0
        # In backoff: the next context does not try again.
        again = await stub.BuildContext(context_request())
        assert (again.compaction_sequence, len(again.contents)) == (0, 4)
        assert len(fake.inputs) == 1
        assert await events_of(client) == before


async def test_compact_deadline_while_summarizing_appends_nothing() -> None:
    fake = FakeSummarizer()
    fake.gate = asyncio.Event()
    async with engine(fake) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        before = await events_of(client)
        await expect_error(
            client.compact(APP, USER, SESSION, deadline_seconds=0.2),
            grpc.StatusCode.DEADLINE_EXCEEDED,
            "",
        )
        await eventually(lambda: _not_running(client))
        assert await events_of(client) == before
        # The session is not left locked: the next Compact summarises.
        fake.gate.set()
        response = await client.compact(APP, USER, SESSION)
        assert response.summary.sequence == 5


async def test_rewind_while_summarizing_discards_the_summary() -> None:
    fake = FakeSummarizer()
    fake.gate = asyncio.Event()
    async with engine(fake) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        compact = asyncio.create_task(client.compact(APP, USER, SESSION))
        async with asyncio.timeout(10):
            await fake.entered.wait()
        rewind = await client.rewind_session(APP, USER, SESSION, "i2")
        fake.gate.set()
        response = await compact
        assert not response.HasField("summary")
        assert response.skipped_reason == "plan_stale"
        log = await events_of(client)
        assert summaries(log) == []
        assert log[-1] == rewind
        status = await client.compaction_status(APP, USER, SESSION)
        assert (status.summaries, status.failures) == (0, 0)
        assert len(await texts_in_context(client)) == 2


# -- plan and commit --------------------------------------------------------------------------


async def test_plan_and_commit_a_client_summary() -> None:
    async with engine(config=SLIDING) as (_, client):
        writer = Writer(client)
        first = await writer.turn(1)
        empty = await client.plan_compaction(APP, USER, SESSION)
        assert not empty.HasField("plan")
        assert empty.skipped_reason == "not_enough_invocations"

        forced = (await client.plan_compaction(APP, USER, SESSION, ignore_trigger=True)).plan
        assert (forced.first_sequence, forced.last_sequence, forced.based_on_sequence) == (1, 2, 2)
        assert forced.conversation_history == render_turn(1)

        second = await writer.turn(2)
        plan = (await client.plan_compaction(APP, USER, SESSION)).plan
        assert plan.trigger == kpb.COMPACTION_TRIGGER_SLIDING_WINDOW
        assert (plan.first_sequence, plan.last_sequence, plan.based_on_sequence) == (1, 4, 4)
        assert plan.rolls_up_sequence == 0
        assert plan.event_count == 4
        assert not plan.HasField("isolation_scope")
        assert (plan.start_timestamp, plan.end_timestamp) == (
            first[0].timestamp,
            second[-1].timestamp,
        )
        history = f"{render_turn(1)}\n{render_turn(2)}"
        assert plan.conversation_history == history
        assert plan.prompt == DEFAULT_PROMPT_TEMPLATE.format(conversation_history=history)
        assert summaries(await events_of(client)) == []  # planning appends nothing

        usage = event_pb2.UsageMetadata(prompt_token_count=300, candidates_token_count=20)
        summary = await client.commit_compaction(
            APP, USER, SESSION, plan, "The user asked about the weather.", usage_metadata=usage
        )
        assert summary.sequence == 5
        assert summary.author == "user"
        assert summary.usage_metadata == usage
        compaction = summary.actions.compaction
        assert (compaction.start_sequence, compaction.end_sequence) == (1, 4)
        assert (compaction.start_timestamp, compaction.end_timestamp) == (
            plan.start_timestamp,
            plan.end_timestamp,
        )
        assert compaction.compacted_content.role == "model"
        assert await texts_in_context(client) == ["The user asked about the weather."]

        # A second commit of the same plan is stale: a summary was appended after it.
        error = await expect_error(
            client.commit_compaction(APP, USER, SESSION, plan, "again"),
            grpc.StatusCode.FAILED_PRECONDITION,
            "COMPACTION_PLAN_STALE",
        )
        assert error.metadata == {"based_on_sequence": "4", "conflicting_sequence": "5"}


async def test_plan_uses_the_apps_gemini_prompt_template() -> None:
    template = "Summarise this, in French:\n{conversation_history}\n-- end --"
    gemini = config_pb2.SummarizerConfig(
        gemini=config_pb2.GeminiSummarizerConfig(model="gemini-2.5-flash", prompt_template=template)
    )
    async with engine(summarizer=gemini) as (_, client):
        await Writer(client).turn(1)
        plan = (await client.plan_compaction(APP, USER, SESSION, ignore_trigger=True)).plan
        assert plan.prompt == f"Summarise this, in French:\n{render_turn(1)}\n-- end --"


async def test_rolled_up_token_threshold_plan_commits() -> None:
    async with engine(config=TOKENS) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=150)
        plan = (
            await client.plan_compaction(
                APP, USER, SESSION, trigger=kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD
            )
        ).plan
        assert plan.trigger == kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD
        assert (plan.first_sequence, plan.last_sequence, plan.rolls_up_sequence) == (1, 1, 0)
        earlier = await client.commit_compaction(APP, USER, SESSION, plan, "Day one: sunny.")
        assert earlier.sequence == 3

        await writer.turn(2, tokens=150)
        plan = (
            await client.plan_compaction(
                APP, USER, SESSION, trigger=kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD
            )
        ).plan
        assert (plan.first_sequence, plan.last_sequence, plan.rolls_up_sequence) == (2, 4, 3)
        assert plan.event_count == 3  # the rolled-up summary and the raw events 2 and 4
        assert plan.conversation_history.startswith("model: Day one: sunny.\nagent: On day 1")
        rolled = await client.commit_compaction(APP, USER, SESSION, plan, "Days one and two.")
        compaction = rolled.actions.compaction
        assert (compaction.start_sequence, compaction.end_sequence) == (1, 4)
        assert compaction.start_timestamp == earlier.actions.compaction.start_timestamp
        assert await texts_in_context(client) == [
            "Days one and two.",
            "On day 2 the weather in Paris is 22 degrees and sunny.",
        ]


async def test_commit_after_a_rewind_is_stale() -> None:
    async with engine() as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        plan = (await client.plan_compaction(APP, USER, SESSION)).plan
        rewind = await client.rewind_session(APP, USER, SESSION, "i2")
        error = await expect_error(
            client.commit_compaction(APP, USER, SESSION, plan, "stale"),
            grpc.StatusCode.FAILED_PRECONDITION,
            "COMPACTION_PLAN_STALE",
        )
        assert error.metadata["conflicting_sequence"] == str(rewind.sequence)
        assert summaries(await events_of(client)) == []


async def test_summary_over_a_rewound_stretch_expands_to_live_events() -> None:
    async with engine() as (_, client):
        writer = Writer(client)
        live = await writer.turn(1)
        await writer.turn(2)
        await client.rewind_session(APP, USER, SESSION, "i2")  # hides 3, 4 and the rewind (5)
        live += await writer.turn(3)
        plan = kpb.CompactionPlan(based_on_sequence=7, first_sequence=1, last_sequence=7)
        summary = await client.commit_compaction(APP, USER, SESSION, plan, "Days one and three.")
        assert summary.actions.compaction.start_timestamp == live[0].timestamp
        assert summary.actions.compaction.end_timestamp == live[-1].timestamp
        expanded = await client.expand_summary(APP, USER, SESSION, summary.sequence)
        assert list(expanded.events) == live
        assert await texts_in_context(client) == ["Days one and three."]


async def test_plan_and_commit_in_an_isolation_scope() -> None:
    async with engine(config=TOKENS) as (_, client):
        writer = Writer(client)
        root = await writer.turn(1)
        scoped = []
        for n in (2, 3):
            for event in (
                text_event(f"Sub-task {n}?", invocation_id=f"i{n}"),
                text_event(f"Sub-task {n} is done.", author="agent", invocation_id=f"i{n}"),
            ):
                event.isolation_scope = "sub"
                event.usage_metadata.prompt_token_count = 500
                scoped += await writer.add(event)
        token = kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD
        plan = (
            await client.plan_compaction(
                APP, USER, SESSION, trigger=token, agent_name="agent", isolation_scope="sub"
            )
        ).plan
        assert plan.isolation_scope == "sub"
        assert (plan.first_sequence, plan.last_sequence) == (3, 5)
        summary = await client.commit_compaction(APP, USER, SESSION, plan, "Sub-tasks 2 and 3.")
        assert summary.isolation_scope == "sub"
        sub = await client.build_context(
            APP, USER, SESSION, agent_name="agent", isolation_scope="sub"
        )
        assert [p.text for c in sub.contents for p in c.parts] == [
            "Sub-tasks 2 and 3.",
            "Sub-task 3 is done.",
        ]
        # The root scope is untouched.
        assert await texts_in_context(client) == [e.content.parts[0].text for e in root]
        expanded = await client.expand_summary(APP, USER, SESSION, summary.sequence)
        assert list(expanded.events) == scoped[:-1]


async def test_commit_rejects_bad_ranges() -> None:
    async with engine() as (_, client):
        writer = Writer(client)
        await writer.add(
            text_event("Weather in Paris?", invocation_id="i1"),  # 1
            call_event("c1"),  # 2
            response_event("c1"),  # 3
            text_event("It is 21 degrees.", author="agent"),  # 4
        )
        pinned = text_event("My account id is 42.", invocation_id="i2")
        pinned.pinned = True
        await writer.add(pinned)  # 5
        await writer.turn(3)  # 6, 7
        await writer.turn(4)  # 8, 9
        summary = await client.commit_compaction(
            APP,
            USER,
            SESSION,
            kpb.CompactionPlan(based_on_sequence=9, first_sequence=6, last_sequence=7),
            "Day three.",
        )  # 10
        await client.rewind_session(APP, USER, SESSION, "i4")  # 11

        async def bad(first: int, last: int, **metadata: str) -> None:
            plan = kpb.CompactionPlan(
                based_on_sequence=11, first_sequence=first, last_sequence=last
            )
            error = await expect_error(
                client.commit_compaction(APP, USER, SESSION, plan, "nope"),
                grpc.StatusCode.INVALID_ARGUMENT,
                "INVALID_COMPACTION_RANGE",
            )
            for key, value in metadata.items():
                assert error.metadata[key] == value, error

        await bad(1, 2, call_id="c1", field="last_sequence")  # call inside, response after
        await bad(3, 1)  # reversed
        await bad(0, 0)  # empty
        await bad(1, 8, sequence="8")  # a rewound event as the end
        await bad(6, summary.sequence, sequence="10")  # a summary as the end
        await bad(4, 6, sequence="5")  # a pinned event inside
        await bad(5, 5, sequence="5")  # ... or as the whole range
        assert len(summaries(await events_of(client))) == 1

        # The call with its response is fine.
        ok = kpb.CompactionPlan(based_on_sequence=11, first_sequence=1, last_sequence=4)
        good = await client.commit_compaction(APP, USER, SESSION, ok, "Paris: 21 degrees.")
        assert (good.actions.compaction.start_sequence, good.actions.compaction.end_sequence) == (
            1,
            4,
        )


async def test_client_summarizer_only_commits() -> None:
    client_kind = config_pb2.SummarizerConfig(client=config_pb2.ClientSummarizerConfig())
    fake = FakeSummarizer()
    async with engine(fake, summarizer=client_kind) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        await client.end_invocation(APP, USER, SESSION, "i2")
        await eventually(lambda: _not_running(client))
        response = await client.compact(APP, USER, SESSION)
        assert not response.HasField("summary")
        assert response.skipped_reason == "client_summarizer"
        assert summaries(await events_of(client)) == []
        assert fake.inputs == []

        plan = (await client.plan_compaction(APP, USER, SESSION)).plan
        summary = await client.commit_compaction(APP, USER, SESSION, plan, "Client side.")
        assert await texts_in_context(client) == ["Client side."]
        assert summaries(await events_of(client)) == [summary]


# -- expansion --------------------------------------------------------------------------------


async def test_expand_summary_returns_covered_and_subsumed() -> None:
    fake = FakeSummarizer()
    async with engine(fake, config=TOKENS) as (_, client):
        writer = Writer(client)
        raw = await writer.turn(1, tokens=150)
        raw += await writer.turn(2, tokens=150)
        token = kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD
        first = (
            await client.compact(APP, USER, SESSION, trigger=token, agent_name="agent")
        ).summary
        assert first.sequence == 5
        raw += await writer.turn(3, tokens=150)
        raw += await writer.turn(4, tokens=150)
        plan = (await client.plan_compaction(APP, USER, SESSION, trigger=token)).plan
        assert plan.rolls_up_sequence == first.sequence
        second = (
            await client.compact(APP, USER, SESSION, trigger=token, agent_name="agent")
        ).summary
        assert second.sequence == 10
        # The rolled-up summary is given first, as a "model" event.
        assert fake.inputs[1].conversation_history.startswith("model: Fake summary 1.\n")
        compaction = second.actions.compaction
        assert (compaction.start_sequence, compaction.end_sequence) == (1, 8)
        assert await texts_in_context(client) == [
            "Fake summary 2.",
            "On day 4 the weather in Paris is 24 degrees and sunny.",
        ]

        expanded = await client.expand_summary(APP, USER, SESSION, second.sequence)
        assert expanded.summary == second
        assert list(expanded.events) == raw[:-1]  # log order, the retained event excluded
        assert list(expanded.subsumed_summaries) == [first]
        inner = await client.expand_summary(APP, USER, SESSION, first.sequence)
        assert list(inner.events) == raw[:3]
        assert list(inner.subsumed_summaries) == []

        await expect_error(
            client.expand_summary(APP, USER, SESSION, 99),
            grpc.StatusCode.NOT_FOUND,
            "EVENT_NOT_FOUND",
        )
        error = await expect_error(
            client.expand_summary(APP, USER, SESSION, 2),
            grpc.StatusCode.FAILED_PRECONDITION,
            "NOT_A_SUMMARY",
        )
        assert error.metadata["sequence"] == "2"


# -- pinned events ----------------------------------------------------------------------------


async def test_engine_summaries_never_cover_a_pinned_event() -> None:
    config = config_pb2.EventsCompactionConfig(
        compaction_interval=3, overlap_size=0, token_threshold=100, event_retention_size=0
    )
    async with engine(config=config) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        pinned = text_event("Remember: my account id is 42.", invocation_id="i2")
        pinned.pinned = True
        (pin,) = await writer.add(pinned)
        assert pin.pinned
        await writer.add(text_event("Noted, account 42.", author="agent", invocation_id="i2"))
        await writer.turn(3)
        assert await client.end_invocation(APP, USER, SESSION, "i3")
        (summary,) = await summary_appears(client)
        await eventually(lambda: _not_running(client))

        def covers(summary: event_pb2.Event) -> bool:
            c = summary.actions.compaction
            return (
                c.start_sequence <= pin.sequence <= c.end_sequence
                or c.start_timestamp <= pin.timestamp <= c.end_timestamp
            )

        # The window (three invocations) is cut at the pin: only the events before it.
        assert (
            summary.actions.compaction.start_sequence,
            summary.actions.compaction.end_sequence,
        ) == (
            1,
            2,
        )
        assert not covers(summary)
        assert "Remember: my account id is 42." in await texts_in_context(client)

        # The token threshold compacts around the pin, too.
        await writer.turn(4, tokens=500)
        token = kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD
        after = (await client.compact(APP, USER, SESSION, trigger=token)).summary
        # The range starts after the pin (so the earlier summary is not rolled in across it).
        assert (after.actions.compaction.start_sequence, after.actions.compaction.end_sequence) == (
            pin.sequence + 1,
            after.sequence - 1,
        )
        assert not covers(after)
        assert await texts_in_context(client) == [
            summary_text(summary),
            "Remember: my account id is 42.",
            summary_text(after),
        ]


# -- restart ----------------------------------------------------------------------------------


async def test_summaries_survive_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "ce.db")
    async with engine(db=db) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        summary = (await client.compact(APP, USER, SESSION)).summary
        assert summary.sequence == 5
        before = await events_of(client)
        expanded = await client.expand_summary(APP, USER, SESSION, 5)
        context = await texts_in_context(client)

    async with (
        start_local_server(db) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        assert await events_of(client) == before
        assert await client.expand_summary(APP, USER, SESSION, 5) == expanded
        assert list(expanded.events) == before[:4]
        assert await texts_in_context(client) == context == [summary_text(summary)]
        status = await client.compaction_status(APP, USER, SESSION)
        assert (status.attempts, status.summaries, status.running) == (0, 0, False)


# -- when nothing is appended: reasons, backoff, rewinds, re-created sessions ------------------


CLIENT_KIND = config_pb2.SummarizerConfig(client=config_pb2.ClientSummarizerConfig())


@pytest.mark.parametrize(
    ("fault", "summarizer", "reason"),
    [("raise", None, "summarizer_failed"), ("", CLIENT_KIND, "client_summarizer")],
)
async def test_after_invocation_says_why_the_token_threshold_appended_nothing(
    tmp_path: Path, fault: str, summarizer: config_pb2.SummarizerConfig | None, reason: str
) -> None:
    """Token threshold only: the post-invocation pass planned a summary but appended none; the
    response says why (it used to be empty, as if a summary had been appended)."""
    fake = FakeSummarizer()
    fake.fault = fault
    db = str(tmp_path / "ce.db")
    async with engine(fake, db=db, config=TOKENS, summarizer=summarizer) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=150)
        await writer.turn(2, tokens=150)
        response = await client.compact(APP, USER, SESSION)
        assert not response.HasField("summary")
        assert response.skipped_reason == reason
        assert summaries(await events_of(client)) == []


async def test_build_context_behind_a_failing_compaction_respects_its_backoff(
    tmp_path: Path,
) -> None:
    """A BuildContext that reached the threshold while a background compaction ran waits for
    it; when that compaction failed, the session is in backoff and the context is built without
    calling the summarizer again."""
    fake = FakeSummarizer()
    fake.fault = "raise"
    fake.gate = asyncio.Event()
    async with engine(fake, db=str(tmp_path / "ce.db"), config=TOKENS) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=150)
        await writer.turn(2, tokens=150)
        assert await client.end_invocation(APP, USER, SESSION, "i2")
        async with asyncio.timeout(10):
            await fake.entered.wait()
        stub = contexts(client)

        async def build() -> cpb.BuildContextResponse:
            response: cpb.BuildContextResponse = await stub.BuildContext(context_request())
            return response

        built = asyncio.create_task(build())
        await asyncio.sleep(0.5)  # the context reached the threshold: it waits for the lock
        assert not built.done()
        fake.gate.set()
        async with asyncio.timeout(10):
            response = await built
        assert response.compaction_sequence == 0
        assert len(response.contents) == 4
        assert len(fake.inputs) == 1  # only the background pass called the summarizer
        status = await client.compaction_status(APP, USER, SESSION)
        assert (status.attempts, status.failures) == (1, 1)


async def test_an_empty_root_scope_after_rewinds_has_nothing_to_compact(tmp_path: Path) -> None:
    """ADK's post-invocation pass does nothing when no root-scope event survives the rewinds."""
    async with engine(db=str(tmp_path / "ce.db"), config=TOKENS) as (_, client):
        writer = Writer(client)
        await writer.turn(1, tokens=150)
        await client.rewind_session(APP, USER, SESSION, "i1")
        response = await client.compact(APP, USER, SESSION)
        assert response.skipped_reason == "nothing_to_compact"
        plan = await client.plan_compaction(APP, USER, SESSION)
        assert plan.skipped_reason == "nothing_to_compact"
        status = await client.compaction_status(APP, USER, SESSION)
        assert status.attempts == 0


async def test_a_summary_is_never_appended_to_a_re_created_session(tmp_path: Path) -> None:
    """The session is deleted and created again while its summary is being written: the summary
    belongs to the old log and is discarded."""
    fake = FakeSummarizer()
    fake.gate = asyncio.Event()
    async with engine(fake, db=str(tmp_path / "ce.db")) as (_, client):
        writer = Writer(client)
        await writer.turn(1)
        await writer.turn(2)
        compact = asyncio.create_task(client.compact(APP, USER, SESSION))
        async with asyncio.timeout(10):
            await fake.entered.wait()
        await client.delete_session(APP, USER, SESSION)
        await client.create_session(APP, USER, SESSION)
        fresh = await writer.add(text_event("A new conversation.", invocation_id="n1"))
        fake.gate.set()
        response = await compact
        assert not response.HasField("summary")
        assert response.skipped_reason == "plan_stale"
        assert await events_of(client) == fresh


async def test_backoff_survives_a_long_run_of_failures(tmp_path: Path) -> None:
    """The backoff doubles per consecutive failure up to its maximum; past 1024 failures the
    power of two used to overflow a float, and BuildContext then failed with INTERNAL."""
    fake = FakeSummarizer()
    fake.fault = "raise"
    async with engine(fake, db=str(tmp_path / "ce.db"), config=TOKENS) as (server, client):
        writer = Writer(client)
        await writer.turn(1, tokens=150)
        await writer.turn(2, tokens=150)
        compactor = server.compactor
        assert compactor is not None
        key = SessionKey(APP, USER, SESSION)
        failing = logging.getLogger("contextengine.compaction")
        failing.disabled = True  # one warning per failure
        try:
            for _ in range(1025):
                outcome = await compactor.compact(key, "token_threshold", View("agent"))
                assert outcome.skipped == "summarizer_failed"
        finally:
            failing.disabled = False
        status = await client.compaction_status(APP, USER, SESSION)
        assert status.failures == 1025
        assert 0 < status.retry_after <= time.time() + 300.0
        built = await contexts(client).BuildContext(context_request())  # in backoff
        assert (built.compaction_sequence, len(built.contents)) == (0, 4)


# -- per-session state ------------------------------------------------------------------------


async def test_idle_sessions_leave_no_state_behind(tmp_path: Path) -> None:
    """Contexts below the threshold, plans, client commits and triggers that find nothing to do
    leave no per-session state; a session whose summarizer was called keeps its counters."""
    async with engine(db=str(tmp_path / "ce.db"), config=TOKENS, summarizer=CLIENT_KIND) as (
        server,
        client,
    ):
        compactor = server.compactor
        assert compactor is not None
        writer = Writer(client)
        await writer.turn(1, tokens=50)
        stub = contexts(client)
        assert (await stub.BuildContext(context_request())).compaction_sequence == 0
        assert not (await client.plan_compaction(APP, USER, SESSION)).HasField("plan")
        assert await client.end_invocation(APP, USER, SESSION, "i1")
        await eventually(lambda: _not_running(client))
        await client.commit_compaction(
            APP,
            USER,
            SESSION,
            kpb.CompactionPlan(based_on_sequence=2, first_sequence=1, last_sequence=1),
            "Day one.",
        )
        await expect_error(
            client.commit_compaction(
                APP, USER, "nope", kpb.CompactionPlan(based_on_sequence=1), "x"
            ),
            grpc.StatusCode.NOT_FOUND,
            "SESSION_NOT_FOUND",
        )
        assert compactor.tracked_sessions() == 0
        status = await client.compaction_status(APP, USER, SESSION)
        assert status == kpb.GetCompactionStatusResponse()

    fake = FakeSummarizer()
    fake.fault = "raise"
    async with engine(fake, db=str(tmp_path / "kept.db"), config=TOKENS) as (server, client):
        compactor = server.compactor
        assert compactor is not None
        writer = Writer(client)
        await writer.turn(1, tokens=150)
        await writer.turn(2, tokens=150)
        assert (await client.compact(APP, USER, SESSION)).skipped_reason == "summarizer_failed"
        await contexts(client).BuildContext(context_request())  # in backoff: nothing more
        assert compactor.tracked_sessions() == 1
        status = await client.compaction_status(APP, USER, SESSION)
        assert (status.attempts, status.failures) == (1, 1)
        assert status.retry_after > 0
