"""The whole pipeline: seeded random sessions against ADK, and scale."""

from __future__ import annotations

import logging
import random
import time

import pytest

from contextengine.core.context import ContextOptions, IncludeContents, build_contents
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, event_pb2
from tests.core.context.adk_compare import adk_as_json, as_json, ours, run_adk, to_proto
from tests.core.context.random_sessions import random_options, random_session

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("block", range(8))
def test_random_sessions_match_adk(block: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)  # ADK warns about every orphan it drops
    for seed in range(block * 50, block * 50 + 50):
        rng = random.Random(seed)
        events = random_session(rng, rng.randrange(1, 40))
        options = random_options(rng)
        protos = to_proto(events)
        snapshot = [e.SerializeToString(deterministic=True) for e in protos]
        assert as_json(ours(protos, options)) == adk_as_json(run_adk(events, options)), seed
        assert [e.SerializeToString(deterministic=True) for e in protos] == snapshot


def _big_session(size: int) -> list[event_pb2.Event]:
    events = []
    for i in range(size // 4):
        ts = 4.0 * i
        user = event_pb2.Event(id=f"u{i}", author="user", invocation_id=f"i{i}", timestamp=ts)
        user.content.role = "user"
        user.content.parts.add().text = f"question {i}"
        fc = event_pb2.Event(id=f"c{i}", author="agent", invocation_id=f"i{i}", timestamp=ts + 1)
        fc.content.role = "model"
        fc.content.parts.add().function_call.CopyFrom(
            content_pb2.FunctionCall(id=f"adk-{i}", name="lookup", args=dict_to_struct({"q": i}))
        )
        fr = event_pb2.Event(id=f"r{i}", author="agent", invocation_id=f"i{i}", timestamp=ts + 2)
        fr.content.role = "user"
        fr.content.parts.add().function_response.CopyFrom(
            content_pb2.FunctionResponse(
                id=f"adk-{i}", name="lookup", response=dict_to_struct({"r": "x"})
            )
        )
        answer = event_pb2.Event(
            id=f"a{i}", author="agent", invocation_id=f"i{i}", timestamp=ts + 3
        )
        answer.content.role = "model"
        answer.content.parts.add().text = f"answer {i}"
        events += [user, fc, fr, answer]
    return events


def test_large_sessions_scale_linearly() -> None:
    # a catastrophic-regression guard only (quadratic steps), not a benchmark
    events = _big_session(20_000)
    options = ContextOptions(agent_name="agent")
    started = time.perf_counter()
    contents = build_contents(events, options)
    elapsed = time.perf_counter() - started
    assert len(contents) == 20_000
    assert not contents[1].parts[0].function_call.HasField("id")
    assert elapsed < 20
    turn = build_contents(
        events, ContextOptions(agent_name="agent", include_contents=IncludeContents.NONE)
    )
    assert len(turn) == 4
