"""The context tools over seeded odd sessions, in the engine (in process): random calls of every
tool, with random ranges, by random agents and branches, each appended as an agent loop appends
it. For every call: no error but the documented ones; the edit the engine records on the appended
answer is the one CallContextTool announced (none for a refusal); and after every answer the
incrementally maintained context equals a fresh build of the whole log."""

from __future__ import annotations

import logging
import math
import random

import pytest

from contextengine.core.context import ContextOptions, build_contents
from contextengine.core.errors import ContextEngineError
from contextengine.core.structs import dict_to_struct
from contextengine.engine import open_engine
from contextengine.store import SessionKey
from contextengine.store.memory import MemoryStore
from contextengine.v1 import (
    config_pb2,
    content_pb2,
    context_service_pb2 as cpb,
    context_tools_service_pb2 as tpb,
    event_pb2,
    session_service_pb2 as spb,
)
from tests.core.context.adk_compare import to_proto
from tests.core.context.random_sessions import random_session

pytestmark = pytest.mark.unit

APP = "tools-property"
TOOLS = [
    "context_status",
    "context_pin",
    "context_unpin",
    "context_hide",
    "context_summarize",
    "context_expand",
    "context_search",
]
AGENTS = ["agent", "other"]
BRANCHES = [None, "root", "root.a"]


def _args(rng: random.Random, name: str, size: int) -> dict[str, object]:
    first = rng.randrange(1, size + 2)
    last = rng.randrange(first, min(size + 2, first + 6) + 1)
    if name in {"context_pin", "context_unpin"}:
        return {"first": first, "last": last}
    if name == "context_hide":
        return {"first": first, "last": last, "stub": rng.choice(["", "gone"])}
    if name == "context_summarize":
        return {"first": first, "last": last, "summary": "what happened"}
    if name == "context_expand":
        return {"sequence": first, "max_chars": rng.choice([10, 20_000])}
    if name == "context_search":
        return {"query": rng.choice(["f", "done", "hello world"]), "limit": 3}
    return {}


def _shifted(timestamp: float, index: int) -> float:
    finite = math.isfinite(timestamp) and abs(timestamp) < 1e6
    return 1e7 + (timestamp if finite else index)


@pytest.mark.parametrize("block", range(2))
async def test_random_calls_record_what_they_announce(
    block: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    engine = await open_engine(store=MemoryStore())
    accepted = refused = 0
    async with engine:
        await engine.update_app_config(
            spb.UpdateAppConfigRequest(
                config=config_pb2.AppConfig(
                    app_name=APP,
                    context_tools=config_pb2.ContextToolsConfig(
                        enabled=True, min_tokens_freed=1, max_hidden_fraction=1.0
                    ),
                )
            )
        )
        for seed in range(block * 20, (block + 1) * 20):
            rng = random.Random(seed)
            session = f"s{seed}"
            await engine.create_session(
                spb.CreateSessionRequest(app_name=APP, user_id="u", session_id=session)
            )
            events = to_proto(random_session(rng, rng.randrange(3, 20)))
            for index, event in enumerate(events):
                event.ClearField("sequence")
                # the generator's clocks run anywhere, out of order too; appends need seconds
                event.timestamp = _shifted(event.timestamp, index)
                if event.actions.HasField("compaction"):
                    compaction = event.actions.compaction
                    compaction.start_timestamp = _shifted(compaction.start_timestamp, index)
                    compaction.end_timestamp = _shifted(compaction.end_timestamp, index)
            await engine.append_events(
                spb.AppendEventsRequest(
                    app_name=APP, user_id="u", session_id=session, events=events
                )
            )
            size = len(events)
            for step in range(10):
                name = rng.choice(TOOLS)
                agent = rng.choice(AGENTS)
                branch = rng.choice(BRANCHES)
                invocation = f"edit-{rng.randrange(3)}"
                call = content_pb2.FunctionCall(
                    id=f"{seed}-{step}", name=name, args=dict_to_struct(_args(rng, name, size))
                )
                call_event = event_pb2.Event(author=agent, invocation_id=invocation)
                if branch is not None:
                    call_event.branch = branch
                call_event.content.role = "model"
                call_event.content.parts.add().function_call.CopyFrom(call)
                await engine.append_event(
                    spb.AppendEventRequest(
                        app_name=APP, user_id="u", session_id=session, event=call_event
                    )
                )
                request = tpb.CallContextToolRequest(
                    app_name=APP,
                    user_id="u",
                    session_id=session,
                    agent_name=agent,
                    invocation_id=invocation,
                    call=call,
                )
                if branch is not None:
                    request.branch = branch
                try:
                    answer = await engine.call_context_tool(request)
                except ContextEngineError as error:  # pragma: no cover - a failure to report
                    pytest.fail(f"seed {seed} step {step}: {error.reason} {error.message}")
                answer_event = event_pb2.Event(author=agent, invocation_id=invocation)
                if branch is not None:
                    answer_event.branch = branch
                answer_event.content.role = "user"
                answer_event.content.parts.add().function_response.CopyFrom(answer.response)
                recorded = (
                    await engine.append_event(
                        spb.AppendEventRequest(
                            app_name=APP, user_id="u", session_id=session, event=answer_event
                        )
                    )
                ).event
                where = f"seed {seed} step {step} {name}"
                assert list(recorded.context_edits) == list(answer.edits), where
                if answer.HasField("refusal"):
                    refused += 1
                    assert answer.refusal.reason in {
                        "CONTEXT_EDIT_REFUSED",
                        "INVALID_TOOL_ARGUMENTS",
                    }
                else:
                    accepted += 1
                size = recorded.sequence
                # the maintained view equals a fresh build of the whole log
                built = (
                    await engine.build_context(
                        cpb.BuildContextRequest(
                            app_name=APP, user_id="u", session_id=session, agent_name=agent
                        )
                    )
                ).response()
                log = await engine.events.log(SessionKey(APP, "u", session))
                fresh = build_contents(list(log.events), ContextOptions(agent_name=agent))
                assert list(built.contents) == fresh, where
    assert accepted > 30, (accepted, refused)
    assert refused > 30, (accepted, refused)
