"""The token check before a context estimates the prompt (characters / 4 of the agent's contents,
when no prompt token count is recorded) from the context service's cached view instead of
building the contents again: the same reading, on generated sessions, and the same decision end
to end."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.core.compaction import (
    RecordedScan,
    TokenReading,
    latest_prompt_token_count,
    scan_recorded,
)
from contextengine.core.context import ContextOptions
from contextengine.core.context.incremental import View, materialize
from contextengine.core.tokens import CharsPerFourCounter
from contextengine.v1 import config_pb2, context_service_pb2 as cpb, event_pb2
from tests.core.context.context_compare import options_for, to_proto_events
from tests.core.context.context_strategies import Session, sessions, views
from tests.service.helpers import text_event
from tests.service.test_compaction import (
    FakeSummarizer,
    Writer,
    context_request,
    contexts,
    engine,
    events_of,
    summaries,
)

COUNTER = CharsPerFourCounter()

pytestmark = [pytest.mark.unit, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

#: generated sessions: as many as the incremental-view tests, no deadline, no example database
GENERATED = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@GENERATED
@given(data=st.data(), session=sessions())
def test_the_reading_from_a_growing_view_is_the_reading_from_the_log(
    data: st.DataObject, session: Session
) -> None:
    events = to_proto_events(session.events)
    wanted = options_for(data.draw(views(session)))
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=4))
    cached: dict[ContextOptions, View] = {}

    def from_view(prefix: list[event_pb2.Event], options: ContextOptions) -> int:
        # As the service does: one view per options, extended as the log grows.
        view = cached[options] = materialize(prefix, options, COUNTER, cached.get(options))
        return view.total_chars

    for cut in [*sorted(set(cuts)), len(events)]:
        prefix = list(events[:cut])

        def reading(fast: bool, prefix: list[event_pb2.Event] = prefix) -> TokenReading:
            return latest_prompt_token_count(
                prefix,
                agent_name=wanted.agent_name,
                branch=wanted.branch,
                isolation_scope=wanted.isolation_scope,
                contents_chars=(lambda options: from_view(prefix, options)) if fast else None,
            )

        expected, fast = reading(False), reading(True)
        assert fast == expected, f"after {cut} events"


@GENERATED
@given(data=st.data(), session=sessions())
def test_a_resumed_scan_for_a_recorded_count_is_the_full_scan(
    data: st.DataObject, session: Session
) -> None:
    """The compactor resumes the walk for a recorded count where the previous call's ended, as
    long as the log only grew without a rewind: the same result as walking it all again."""
    events = [
        e for e in to_proto_events(session.events) if not e.actions.rewind_before_invocation_id
    ]
    wanted = options_for(data.draw(views(session)))
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=5))
    previous: RecordedScan | None = None
    for cut in [*sorted(set(cuts)), len(events)]:
        prefix = events[:cut]
        previous = scan_recorded(prefix, wanted.agent_name, wanted.isolation_scope, previous)
        full = scan_recorded(prefix, wanted.agent_name, wanted.isolation_scope)
        assert previous == full, f"after {cut} events"
        reading = latest_prompt_token_count(
            prefix, agent_name=wanted.agent_name, isolation_scope=wanted.isolation_scope
        )
        assert (reading.source == "recorded") == (full.tokens is not None)


async def test_build_context_compacts_once_the_estimate_reaches_the_threshold() -> None:
    """No model call recorded a prompt token count: the agent's contents, characters / 4, are
    the reading. 4 events of 100 characters are 100 tokens: below 101, at 100."""
    fake = FakeSummarizer()
    config = config_pb2.EventsCompactionConfig(token_threshold=101, event_retention_size=1)
    async with engine(fake, config=config) as (_, client):
        writer = Writer(client)
        for n in range(4):
            author = "user" if n % 2 == 0 else "agent"
            await writer.add(text_event("x" * 100, author=author, invocation_id=f"i{n // 2}"))
        stub = contexts(client)
        below: cpb.BuildContextResponse = await stub.BuildContext(context_request())
        assert below.compaction_sequence == 0
        assert fake.inputs == []
        await writer.add(text_event("y" * 4, author="user", invocation_id="i2"))  # 101 tokens
        reached: cpb.BuildContextResponse = await stub.BuildContext(context_request())
        assert reached.compaction_sequence == 6
        (summary,) = summaries(await events_of(client))
        assert summary.actions.compaction.end_sequence == 4  # all but the retained last event


async def test_a_count_recorded_after_earlier_checks_is_the_reading() -> None:
    """Checks resume their walk for a recorded count from the previous call's: a count that
    arrives later is found, and a summary appended since ends the walk."""
    fake = FakeSummarizer()
    config = config_pb2.EventsCompactionConfig(token_threshold=1_000, event_retention_size=1)
    async with engine(fake, config=config) as (_, client):
        writer = Writer(client)
        stub = contexts(client)
        for n in range(3):  # estimates far below the threshold, remembered scans
            await writer.turn(n)
            assert (await stub.BuildContext(context_request())).compaction_sequence == 0
        await writer.turn(3, tokens=999)  # recorded, below
        assert (await stub.BuildContext(context_request())).compaction_sequence == 0
        await writer.add(text_event("And tomorrow?", invocation_id="i4"))
        assert (await stub.BuildContext(context_request())).compaction_sequence == 0
        await writer.turn(5, tokens=1_000)  # recorded, reached
        reached: cpb.BuildContextResponse = await stub.BuildContext(context_request())
        assert reached.compaction_sequence > 0
        assert len(fake.inputs) == 1
        # The summary is newer than every recorded count: the estimate again, below.
        assert (await stub.BuildContext(context_request())).compaction_sequence == 0
        assert len(fake.inputs) == 1
