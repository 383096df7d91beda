"""The inspector's token chart is BuildContext's answer, point by point: it asks the engine
(``Engine.context_token_series``, BuildContext's own options and counter), so after every event
of the scripted session (a pinned goal, a tool call, another agent's turns, a summary, a rewind)
the chart's total is what BuildContext answers for the log cut at that event."""

from __future__ import annotations

import pytest

from contextengine.client import ContextEngineClient
from contextengine.testing import start_local_server
from contextengine.v1 import context_service_pb2 as cpb, event_pb2
from tests.inspector.session import APP, SESSION, USER, script

pytestmark = pytest.mark.service


@pytest.mark.parametrize("agent", ["planner", "researcher"])
async def test_each_point_is_what_build_context_answers_for_the_log_so_far(agent: str) -> None:
    async with start_local_server() as server, ContextEngineClient(server.target) as client:
        await script(client)
        log = [e async for e in client.list_events(APP, USER, SESSION)]
        assert any(e.actions.HasField("compaction") for e in log)
        assert any(e.actions.HasField("rewind_before_invocation_id") for e in log)

        request = cpb.BuildContextRequest(
            app_name=APP, user_id=USER, session_id=SESSION, agent_name=agent, skip_compaction=True
        )
        events, series = await server.engine.context_token_series(
            request, lambda events: range(len(events))
        )
        assert [e.sequence for e in events] == [e.sequence for e in log]
        assert [index for index, _ in series] == list(range(len(log)))

        for index, tokens in series:
            # the same log cut after event ``index``, in a session of its own
            cut = f"cut-{agent}-{index}"
            await client.create_session(APP, USER, cut)
            copies = []
            for event in log[: index + 1]:
                copy = event_pb2.Event()
                copy.CopyFrom(event)
                copy.ClearField("sequence")
                copies.append(copy)
            await client.append_events(APP, USER, cut, copies)
            built = await client.build_context(
                APP, USER, cut, agent_name=agent, skip_compaction=True
            )
            assert tokens == built.token_estimate.tokens, f"after event #{log[index].sequence}"
