"""The Python client's ContextFollower against a real server: after every step of generated
sessions it answers exactly what a full BuildContext answers (whole contents, every other field,
``base_contents_count`` 0), while the wire carried only the contents that changed; views are
bounded, concurrent builds of one view stay correct, the caller's request is left alone."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from contextengine.client import ContextEngineClient, ContextFollower, context_request
from contextengine.testing import start_local_server
from contextengine.v1 import context_service_pb2 as cpb
from tests.engine.test_since import seeded_events
from tests.service.helpers import text_event

APP = "app"

pytestmark = [pytest.mark.service, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


class Recorder:
    """BuildContext through the client, keeping every raw answer."""

    def __init__(self, client: ContextEngineClient) -> None:
        self.client = client
        self.answers: list[cpb.BuildContextResponse] = []

    async def __call__(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        answer = await self.client.send_build_context(request)
        copy = cpb.BuildContextResponse()
        copy.CopyFrom(answer)
        self.answers.append(copy)
        return answer


@pytest.fixture
async def client() -> AsyncIterator[ContextEngineClient]:
    async with (
        start_local_server() as server,
        ContextEngineClient(server.target, attempts=1) as opened,
    ):
        yield opened


def _same(followed: cpb.BuildContextResponse, full: cpb.BuildContextResponse) -> None:
    assert followed.base_contents_count == 0
    assert followed.SerializeToString(deterministic=True) == full.SerializeToString(
        deterministic=True
    )


@pytest.mark.parametrize("seed", range(3))
async def test_the_follower_answers_what_a_full_build_answers(
    seed: int, client: ContextEngineClient
) -> None:
    recorder = Recorder(client)
    follower = ContextFollower(recorder)
    events = seeded_events(seed, 30)
    session = await client.create_session(APP, "u", "s")
    views: list[tuple[str, str | None]] = [("agent", None), ("other", None), ("agent", "root")]
    rng = random.Random(seed)
    position = 0
    while position < len(events):
        step = rng.choice([1, 1, 2])
        await client.append_events(APP, "u", session.id, events[position : position + step])
        position += step
        for agent, branch in views:
            followed = await follower.build(APP, "u", session.id, agent_name=agent, branch=branch)
            full = await client.build_context(APP, "u", session.id, agent_name=agent, branch=branch)
            _same(followed, full)
    assert follower.contents_received < follower.contents_answered
    assert any(answer.base_contents_count > 0 for answer in recorder.answers)


async def test_unchanged_and_appended_cost_only_the_difference(client: ContextEngineClient) -> None:
    recorder = Recorder(client)
    follower = ContextFollower(recorder)
    session = await client.create_session(APP, "u", "s")
    turns = [text_event(f"message {i}", invocation_id=f"i{i}") for i in range(20)]
    await client.append_events(APP, "u", session.id, turns)
    first = await follower.build(APP, "u", session.id, agent_name="agent")
    assert len(first.contents) == 20
    again = await follower.build(APP, "u", session.id, agent_name="agent")
    assert recorder.answers[-1].base_contents_count == 20
    assert len(recorder.answers[-1].contents) == 0
    assert len(again.contents) == 20
    await client.append_event(APP, "u", session.id, text_event("one more", invocation_id="j"))
    grown = await follower.build(APP, "u", session.id, agent_name="agent")
    assert [c.parts[0].text for c in recorder.answers[-1].contents] == ["one more"]
    _same(grown, await client.build_context(APP, "u", session.id, agent_name="agent"))
    # a rewind: a full answer, and the follower's contents are the rewound ones
    await client.rewind_session(APP, "u", session.id, "i19")
    rewound = await follower.build(APP, "u", session.id, agent_name="agent")
    assert recorder.answers[-1].base_contents_count == 0
    _same(rewound, await client.build_context(APP, "u", session.id, agent_name="agent"))


async def test_views_are_bounded_and_the_request_is_left_alone(
    client: ContextEngineClient,
) -> None:
    recorder = Recorder(client)
    follower = ContextFollower(recorder, max_views=1)
    session = await client.create_session(APP, "u", "s")
    await client.append_event(APP, "u", session.id, text_event("hi"))
    request = context_request(APP, "u", session.id, agent_name="agent")
    before = request.SerializeToString()
    for _ in range(2):
        await follower.follow(request)
        await follower.build(APP, "u", session.id, agent_name="other")
    assert request.SerializeToString() == before
    # one view held at a time: each build found the other view's answer, never its own
    assert [a.base_contents_count for a in recorder.answers] == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="max_views"):
        ContextFollower(recorder, max_views=0)


async def test_concurrent_builds_of_one_view(client: ContextEngineClient) -> None:
    follower = client.context_follower()
    session = await client.create_session(APP, "u", "s")
    for round_no in range(5):
        await client.append_events(
            APP,
            "u",
            session.id,
            [text_event(f"r{round_no}-{i}", invocation_id=f"i{round_no}") for i in range(3)],
        )
        built = await asyncio.gather(
            *(follower.build(APP, "u", session.id, agent_name="agent") for _ in range(4))
        )
        full = await client.build_context(APP, "u", session.id, agent_name="agent")
        for answer in built:
            assert list(answer.contents) == list(full.contents)
