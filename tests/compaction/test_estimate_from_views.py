"""The token check before a context estimates the prompt (characters / 4 of the agent's contents,
when no prompt token count is recorded) from the context service's cached view instead of
building the contents again: the same reading, on generated sessions, and the same decision end
to end."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.core.compaction import TokenReading, latest_prompt_token_count
from contextengine.core.context import ContextOptions
from contextengine.core.context.incremental import View, materialize
from contextengine.core.tokens import CharsPerFourCounter
from contextengine.v1 import config_pb2, context_service_pb2 as cpb, event_pb2
from tests.parity.context_compare import options_for, to_proto_events
from tests.parity.context_strategies import Session, sessions, views
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

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
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
