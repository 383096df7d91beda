"""The Python client's RenderedView against a real server, for every format: after every step of
a session (appends, a rewind, a summary, and generated sessions) it answers exactly what a full
BuildContext with ``render`` answers (whole items, every other field, ``base_items_count`` 0),
while the wire carried only the items that changed; a failed build leaves the held items,
concurrent builds of one view take turns, the caller's request is left alone."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from contextengine.client import (
    ContextEngineClient,
    ContextEngineError,
    RenderedView,
    context_request,
    request_part,
)
from contextengine.v1 import content_pb2, context_service_pb2 as cpb, event_pb2
from tests.client.helpers import Recorder, grown
from tests.service.helpers import text_event

APP = "app"
SYSTEM = content_pb2.Content(parts=[content_pb2.Part(text="You plan trips.")])
FORMATS = [
    cpb.RENDER_FORMAT_OPENAI_CHAT,
    cpb.RENDER_FORMAT_OPENAI_RESPONSES,
    cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES,
]

pytestmark = [pytest.mark.service, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


async def _full(
    client: ContextEngineClient, session_id: str, format: cpb.RenderFormat.ValueType, agent: str
) -> cpb.BuildContextResponse:
    return await client.build_context(
        APP,
        "u",
        session_id,
        agent_name=agent,
        system_instruction=SYSTEM,
        render=cpb.RenderRequest(format=format),
    )


def _same(followed: cpb.BuildContextResponse, full: cpb.BuildContextResponse) -> None:
    assert followed.rendered.base_items_count == 0
    assert followed.SerializeToString(deterministic=True) == full.SerializeToString(
        deterministic=True
    )


def _summary(start: float, end: float, at: float) -> event_pb2.Event:
    event = event_pb2.Event(author="user", invocation_id="compaction", timestamp=at)
    event.actions.compaction.start_timestamp = start
    event.actions.compaction.end_timestamp = end
    event.actions.compaction.compacted_content.role = "model"
    event.actions.compaction.compacted_content.parts.add(text="They want a weekend in Lisbon.")
    return event


@pytest.mark.parametrize("format", FORMATS)
async def test_appends_a_rewind_and_a_summary(
    format: cpb.RenderFormat.ValueType, client: ContextEngineClient
) -> None:
    recorder = Recorder(client)
    view = RenderedView(
        recorder, APP, "u", "s", format=format, agent_name="planner", system_instruction=SYSTEM
    )
    session = await client.create_session(APP, "u", "s")

    async def step(*events: event_pb2.Event) -> cpb.RenderedContext:
        """Appends ``events``, builds, checks the build against a full one; the raw answer."""
        await client.append_events(APP, "u", session.id, list(events))
        built = await view.build()
        _same(built, await _full(client, session.id, format, "planner"))
        assert list(view.items) == list(built.rendered.items)
        assert view.digest == built.rendered.items_digest
        return recorder.answers[-1].rendered

    turns = [
        ("user", "A weekend in Lisbon, please.", "i1", 1.0),
        ("planner", "Friday to Sunday, by train.", "i1", 2.0),
        ("user", "And where do we stay?", "i2", 3.0),
        ("planner", "Alfama, near the castle.", "i2", 4.0),
        ("planner", "Shall I book it?", "i2", 5.0),
        ("user", "Yes, two nights.", "i3", 6.0),
    ]
    answers = [
        await step(text_event(text, author=author, invocation_id=inv, timestamp=at))
        for author, text, inv, at in turns
    ]
    assert answers[0].base_items_count == 0
    # some appends only sent what followed the held items
    assert any(a.base_items_count > 0 for a in answers[1:])
    unchanged = await view.build()
    assert recorder.answers[-1].rendered.base_items_count == len(unchanged.rendered.items)
    assert len(recorder.answers[-1].rendered.items) == 0
    # a rewind: the held items are no longer the first ones, a full answer
    await client.rewind_session(APP, "u", session.id, "i3")
    rewound = await step()
    assert rewound.base_items_count == 0
    after_rewind = await step(
        text_event("Only one night, then.", invocation_id="i4", timestamp=7.0),
        text_event("One night it is.", author="planner", invocation_id="i4", timestamp=8.0),
    )
    # (the OpenAI renderings' continuation turn after the model's last turn gave way to the user's)
    anthropic = format == cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES
    assert (after_rewind.base_items_count > 0) == anthropic
    # a summary re-makes the history: a full answer, then deltas again
    summarized = await step(_summary(1.0, 4.0, 9.0))
    assert summarized.base_items_count == 0
    await step(text_event("Thanks!", invocation_id="i5", timestamp=10.0))
    last = await step(text_event("Enjoy.", author="planner", invocation_id="i5", timestamp=11.0))
    assert last.base_items_count > 0
    assert view.items_received < view.items_answered
    # the whole rendering is the provider's request part, as a full answer's
    full = await _full(client, session.id, format, "planner")
    assert request_part((await view.build()).rendered) == request_part(full.rendered)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("format", FORMATS)
async def test_generated_sessions_answer_what_a_full_render_answers(
    format: cpb.RenderFormat.ValueType, seed: int, client: ContextEngineClient
) -> None:
    recorder = Recorder(client)
    session = await client.create_session(APP, "u", "s")
    views = {
        agent: RenderedView(
            recorder,
            APP,
            "u",
            session.id,
            format=format,
            agent_name=agent,
            system_instruction=SYSTEM,
        )
        for agent in ("agent", "other")
    }
    async for _ in grown(client, APP, session.id, seed):
        for agent, view in views.items():
            _same(await view.build(), await _full(client, session.id, format, agent))
    assert any(answer.rendered.base_items_count > 0 for answer in recorder.answers)
    assert sum(v.items_received for v in views.values()) < sum(
        v.items_answered for v in views.values()
    )


async def test_a_failed_build_leaves_the_held_items(client: ContextEngineClient) -> None:
    session = await client.create_session(APP, "u", "s")
    await client.append_event(APP, "u", session.id, text_event("hi", invocation_id="i1"))
    recorder = Recorder(client)
    format = cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES
    view = RenderedView(recorder, APP, "u", session.id, format=format, agent_name="agent")
    built = await view.build()
    held, digest = list(view.items), view.digest
    assert held
    assert digest
    with pytest.raises(ContextEngineError) as refused:
        await view.build(isolation_scope="\x00")  # refused: not a valid scope
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert (list(view.items), view.digest) == (held, digest)

    async def unrendered(request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        answer = await client.send_build_context(request)
        answer.ClearField("rendered")  # as a sidecar older than renderings answers
        return answer

    old = RenderedView(unrendered, APP, "u", session.id, format=format, agent_name="agent")
    with pytest.raises(ContextEngineError, match="older than renderings") as missing:
        await old.build()
    assert missing.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert (list(old.items), old.digest) == ([], "")
    # the view still holds its items: the next build sends only what follows them
    again = await view.build()
    assert recorder.answers[-1].rendered.base_items_count == len(held)
    assert list(again.rendered.items) == list(built.rendered.items)
    view.reset()
    assert (list(view.items), view.digest) == ([], "")
    await view.build()
    assert not recorder.requests[-1].render.HasField("since")


async def test_concurrent_builds_of_one_view_take_turns(client: ContextEngineClient) -> None:
    session = await client.create_session(APP, "u", "s")
    recorder = Recorder(client)
    format = cpb.RENDER_FORMAT_OPENAI_RESPONSES
    view = RenderedView(recorder, APP, "u", session.id, format=format, agent_name="agent")
    for round_no in range(5):
        await client.append_events(
            APP,
            "u",
            session.id,
            [
                text_event(f"r{round_no}-{i}", author=author, invocation_id=f"i{round_no}")
                for i, author in enumerate(("user", "agent", "agent"))
            ],
        )
        built = await asyncio.gather(*(view.build() for _ in range(4)))
        full = await client.build_context(
            APP, "u", session.id, agent_name="agent", render=cpb.RenderRequest(format=format)
        )
        for answer in built:
            assert list(answer.rendered.items) == list(full.rendered.items)
        # each build was sent with what the one before it answered: only the first got items
        round_answers = recorder.answers[-4:]
        assert [len(a.rendered.items) for a in round_answers[1:]] == [0, 0, 0]
        assert all(
            a.rendered.base_items_count == len(full.rendered.items) for a in round_answers[1:]
        )


async def test_the_view_owns_render_and_since(client: ContextEngineClient) -> None:
    session = await client.create_session(APP, "u", "s")
    await client.append_event(APP, "u", session.id, text_event("hi", invocation_id="i1"))
    format = cpb.RENDER_FORMAT_OPENAI_CHAT
    view = client.rendered_view(APP, "u", session.id, format, agent_name="agent")
    assert view.format == format
    request = context_request(
        APP,
        "u",
        session.id,
        agent_name="agent",
        since=cpb.ContextSince(contents_count=1, contents_digest="x"),
        render=cpb.RenderRequest(
            format=cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES,
            since=cpb.RenderedSince(items_count=1, items_digest="y"),
        ),
    )
    before = request.SerializeToString(deterministic=True)
    built = await view.build_request(request)
    assert request.SerializeToString(deterministic=True) == before
    assert built.rendered.format == format
    _same(
        built,
        await client.build_context(
            APP, "u", session.id, agent_name="agent", render=cpb.RenderRequest(format=format)
        ),
    )
    for unknown in (cpb.RENDER_FORMAT_UNSPECIFIED, 99):
        with pytest.raises(ValueError, match="a rendering needs a format"):
            client.rendered_view(APP, "u", session.id, unknown)  # type: ignore[arg-type]
