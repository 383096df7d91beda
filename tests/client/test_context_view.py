"""The Python client's ContextView (and ContextViews, the ADK plugin's) against a real server:
after every step of generated sessions it answers exactly what a full BuildContext answers (whole
contents, every other field, ``base_contents_count`` 0), while the wire carried only the contents
that changed; views are bounded, concurrent builds of one view stay correct, a failed build
leaves the held contents, the caller's request is left alone."""

from __future__ import annotations

import asyncio

import pytest

from contextengine.client import (
    ContextEngineClient,
    ContextEngineError,
    ContextView,
    ContextViews,
    context_request,
)
from contextengine.v1 import context_service_pb2 as cpb
from tests.client.helpers import Recorder, grown
from tests.service.helpers import text_event

APP = "app"

pytestmark = [pytest.mark.service, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _same(followed: cpb.BuildContextResponse, full: cpb.BuildContextResponse) -> None:
    assert followed.base_contents_count == 0
    assert followed.SerializeToString(deterministic=True) == full.SerializeToString(
        deterministic=True
    )


@pytest.mark.parametrize("seed", range(3))
async def test_the_views_answer_what_a_full_build_answers(
    seed: int, client: ContextEngineClient
) -> None:
    recorder = Recorder(client)
    views_of = ContextViews(recorder)
    session = await client.create_session(APP, "u", "s")
    views: list[tuple[str, str | None]] = [("agent", None), ("other", None), ("agent", "root")]
    async for _ in grown(client, APP, session.id, seed):
        for agent, branch in views:
            followed = await views_of.build(
                context_request(APP, "u", session.id, agent_name=agent, branch=branch)
            )
            full = await client.build_context(APP, "u", session.id, agent_name=agent, branch=branch)
            _same(followed, full)
    assert views_of.contents_received < views_of.contents_answered
    assert any(answer.base_contents_count > 0 for answer in recorder.answers)


async def test_unchanged_and_appended_cost_only_the_difference(client: ContextEngineClient) -> None:
    recorder = Recorder(client)
    view = ContextView(recorder, APP, "u", "s", agent_name="agent")
    session = await client.create_session(APP, "u", "s")
    turns = [text_event(f"message {i}", invocation_id=f"i{i}") for i in range(20)]
    await client.append_events(APP, "u", session.id, turns)
    first = await view.build()
    assert len(first.contents) == 20
    again = await view.build()
    assert recorder.answers[-1].base_contents_count == 20
    assert len(recorder.answers[-1].contents) == 0
    assert len(again.contents) == 20
    await client.append_event(APP, "u", session.id, text_event("one more", invocation_id="j"))
    grown = await view.build()
    assert [c.parts[0].text for c in recorder.answers[-1].contents] == ["one more"]
    _same(grown, await client.build_context(APP, "u", session.id, agent_name="agent"))
    assert list(view.contents) == list(grown.contents)
    assert view.digest == grown.contents_digest
    # a rewind: a full answer, and the view's contents are the rewound ones
    await client.rewind_session(APP, "u", session.id, "i19")
    rewound = await view.build()
    assert recorder.answers[-1].base_contents_count == 0
    _same(rewound, await client.build_context(APP, "u", session.id, agent_name="agent"))


async def test_views_are_bounded_and_the_request_is_left_alone(
    client: ContextEngineClient,
) -> None:
    recorder = Recorder(client)
    views_of = ContextViews(recorder, max_views=1)
    session = await client.create_session(APP, "u", "s")
    await client.append_event(APP, "u", session.id, text_event("hi"))
    request = context_request(APP, "u", session.id, agent_name="agent")
    before = request.SerializeToString()
    other = context_request(APP, "u", session.id, agent_name="other")
    for _ in range(2):
        await views_of.build(request)
        await views_of.build(other)
    assert request.SerializeToString() == before
    # one view held at a time: each build found the other view's answer, never its own
    assert [a.base_contents_count for a in recorder.answers] == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="max_views"):
        ContextViews(recorder, max_views=0)


async def test_concurrent_builds_of_one_view(client: ContextEngineClient) -> None:
    session = await client.create_session(APP, "u", "s")
    view = client.context_view(APP, "u", session.id, agent_name="agent")
    for round_no in range(5):
        await client.append_events(
            APP,
            "u",
            session.id,
            [text_event(f"r{round_no}-{i}", invocation_id=f"i{round_no}") for i in range(3)],
        )
        built = await asyncio.gather(*(view.build() for _ in range(4)))
        full = await client.build_context(APP, "u", session.id, agent_name="agent")
        for answer in built:
            assert list(answer.contents) == list(full.contents)


async def test_a_failed_build_leaves_the_held_contents(client: ContextEngineClient) -> None:
    session = await client.create_session(APP, "u", "s")
    await client.append_event(APP, "u", session.id, text_event("hi", invocation_id="i1"))
    view = client.context_view(APP, "u", session.id, agent_name="agent")
    built = await view.build()
    held, digest = list(view.contents), view.digest
    with pytest.raises(ContextEngineError):
        await view.build(isolation_scope="\x00")  # refused: not a valid scope
    assert list(view.contents) == held
    assert view.digest == digest
    again = await view.build()
    assert list(again.contents) == list(built.contents)
    view.reset()
    assert list(view.contents) == []
    assert view.digest == ""
