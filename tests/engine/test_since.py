"""BuildContext "contents since" over a real sidecar, differentially: after every step of
generated sessions (user, model and tool events, calls answered later, rewinds, compaction
summaries, other agents' turns, events with no content), a caller holding the previous answer's
reassembled contents and asking with ``since`` reassembles exactly the contents (same bytes) and
fields a full BuildContext gives, and the answer is a delta whenever what it held is still a
prefix; a wrong digest, a count past the end, another view's digest give full answers; bad
``since`` values are INVALID_ARGUMENT."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from contextengine.client import ContextEngineClient
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from contextengine.v1 import (
    content_pb2,
    context_service_pb2 as cpb,
    context_service_pb2_grpc,
    event_pb2,
)
from tests.core.context.context_compare import to_proto_events
from tests.core.context.random_sessions import random_session
from tests.service.helpers import text_event

APP = "app"

pytestmark = [pytest.mark.service, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@dataclass(frozen=True)
class Viewer:
    """One (agent, options) view of the session, as a caller would ask for it."""

    agent_name: str
    include_contents: int = cpb.INCLUDE_CONTENTS_DEFAULT
    branch: str | None = None

    def request(self, session_id: str, **fields: object) -> cpb.BuildContextRequest:
        request = cpb.BuildContextRequest(
            app_name=APP,
            user_id="u",
            session_id=session_id,
            agent_name=self.agent_name,
            include_contents=self.include_contents,  # type: ignore[arg-type]
            **fields,  # type: ignore[arg-type]
        )
        if self.branch is not None:
            request.branch = self.branch
        return request


VIEWERS = (
    Viewer("agent"),
    Viewer("other"),
    Viewer("agent", branch="root.a"),
    Viewer("agent", include_contents=cpb.INCLUDE_CONTENTS_NONE),
)


@dataclass
class Held:
    """What a caller holds: the reassembled contents of its last answer and that answer's
    digest."""

    contents: list[bytes] = field(default_factory=list)
    digest: str = ""

    def since(self) -> cpb.ContextSince:
        return cpb.ContextSince(contents_count=len(self.contents), contents_digest=self.digest)


def _bytes(contents: Sequence[content_pb2.Content]) -> list[bytes]:
    return [content.SerializeToString(deterministic=True) for content in contents]


def _whole(response: cpb.BuildContextResponse) -> cpb.BuildContextResponse:
    """The fields that describe the whole contents (all but contents and base)."""
    copy = cpb.BuildContextResponse()
    copy.CopyFrom(response)
    del copy.contents[:]
    copy.base_contents_count = 0
    return copy


@pytest.fixture
async def sidecar() -> AsyncIterator[ContextEngineServer]:
    async with start_local_server() as server:
        yield server


@pytest.fixture
async def stub(
    sidecar: ContextEngineServer,
) -> AsyncIterator[context_service_pb2_grpc.ContextServiceAsyncStub]:
    async with grpc.aio.insecure_channel(sidecar.target) as channel:
        yield context_service_pb2_grpc.ContextServiceStub(channel)


@pytest.fixture
async def client(sidecar: ContextEngineServer) -> AsyncIterator[ContextEngineClient]:
    async with ContextEngineClient(sidecar.target, attempts=1) as opened:
        yield opened


async def _follow(
    stub: context_service_pb2_grpc.ContextServiceAsyncStub,
    session_id: str,
    viewer: Viewer,
    held: Held,
) -> tuple[cpb.BuildContextResponse, cpb.BuildContextResponse]:
    """A full answer and the answer to ``held`` (checked against each other); ``held`` becomes
    the reassembled contents."""
    full = await stub.BuildContext(viewer.request(session_id))
    assert full.base_contents_count == 0
    want = _bytes(full.contents)
    answer = await stub.BuildContext(viewer.request(session_id, since=held.since()))
    base = answer.base_contents_count
    assert 0 <= base <= len(held.contents)
    reassembled = held.contents[:base] + _bytes(answer.contents)
    assert reassembled == want
    assert _whole(answer) == _whole(full)
    assert answer.contents_digest == full.contents_digest != ""
    if held.contents and want[: len(held.contents)] == held.contents:
        assert base == len(held.contents), "the held contents are a prefix: a delta answer"
    else:
        assert base == 0
    held.contents, held.digest = reassembled, answer.contents_digest
    return full, answer


def seeded_events(seed: int, size: int) -> list[event_pb2.Event]:
    events = to_proto_events(random_session(random.Random(seed), size, quiet=True))
    for event in events:
        # the service takes no negative timestamps: the same session a while after the epoch
        event.ClearField("sequence")
        event.timestamp += 1000.0
        if event.actions.HasField("compaction"):
            event.actions.compaction.start_timestamp += 1000.0
            event.actions.compaction.end_timestamp += 1000.0
    return events


@pytest.mark.parametrize("seed", range(6))
async def test_since_reassembles_the_full_contents_at_every_step(
    seed: int,
    stub: context_service_pb2_grpc.ContextServiceAsyncStub,
    client: ContextEngineClient,
) -> None:
    rng = random.Random(1000 + seed)
    events = seeded_events(seed, 24)
    session = await client.create_session(APP, "u", f"s{seed}")
    held = {viewer: Held() for viewer in VIEWERS}
    deltas = 0
    position = 0
    while position < len(events):
        step = rng.choice([1, 1, 1, 2, 3])
        await client.append_events(APP, "u", session.id, events[position : position + step])
        position += step
        for viewer in VIEWERS:
            before = len(held[viewer].contents)
            _, answer = await _follow(stub, session.id, viewer, held[viewer])
            deltas += answer.base_contents_count > 0 and before > 0
    assert deltas > 0, "some steps kept the held contents as a prefix"


async def test_a_call_answered_later_and_a_compaction(
    stub: context_service_pb2_grpc.ContextServiceAsyncStub, client: ContextEngineClient
) -> None:
    session = await client.create_session(APP, "u", "s")
    viewer, held = Viewer("agent"), Held()
    call = event_pb2.Event(
        author="agent",
        invocation_id="i1",
        timestamp=2.0,
        content=content_pb2.Content(
            role="model",
            parts=[content_pb2.Part(function_call=content_pb2.FunctionCall(id="c1", name="f"))],
        ),
        long_running_tool_ids=["c1"],
    )
    response = event_pb2.Event(
        author="agent",
        invocation_id="i2",
        timestamp=5.0,
        content=content_pb2.Content(
            role="user",
            parts=[
                content_pb2.Part(function_response=content_pb2.FunctionResponse(id="c1", name="f"))
            ],
        ),
    )
    summary = event_pb2.Event(author="user", invocation_id="c", timestamp=7.0)
    summary.actions.compaction.start_timestamp = 1.0
    summary.actions.compaction.end_timestamp = 5.0
    summary.actions.compaction.compacted_content.role = "model"
    summary.actions.compaction.compacted_content.parts.add(text="summary")
    steps = [
        [text_event("hello", invocation_id="i1", timestamp=1.0)],
        [call],
        [text_event("meanwhile", invocation_id="i2", timestamp=3.0)],
        [text_event("still", author="agent", invocation_id="i2", timestamp=4.0)],
        [response],
        [text_event("after", invocation_id="i3", timestamp=6.0)],
        [summary],
        [text_event("last", invocation_id="i4", timestamp=8.0)],
    ]
    bases = []
    for events in steps:
        await client.append_events(APP, "u", session.id, events)
        _, answer = await _follow(stub, session.id, viewer, held)
        bases.append(answer.base_contents_count)
    # plain appends are deltas; the summary re-makes the history: a full answer
    assert bases[1] == 1
    assert bases[2] == 2
    assert bases[6] == 0
    assert bases[7] == len(held.contents) - 1


async def test_full_answers_for_unknown_holdings(
    stub: context_service_pb2_grpc.ContextServiceAsyncStub, client: ContextEngineClient
) -> None:
    session = await client.create_session(APP, "u", "s")
    await client.append_events(
        APP,
        "u",
        session.id,
        [
            text_event("question", invocation_id="i1"),
            text_event("answer", author="agent", invocation_id="i1"),
            text_event("aside", author="other", invocation_id="i1"),
        ],
    )
    agent, other = Viewer("agent"), Viewer("other")
    mine = await stub.BuildContext(agent.request(session.id))
    theirs = await stub.BuildContext(other.request(session.id))
    count = len(mine.contents)
    assert count == 3
    assert mine.contents_digest != theirs.contents_digest

    async def base_for(since: cpb.ContextSince) -> int:
        answer = await stub.BuildContext(agent.request(session.id, since=since))
        assert answer.contents_digest == mine.contents_digest
        assert answer.base_contents_count + len(answer.contents) == count
        return answer.base_contents_count

    unchanged = await stub.BuildContext(
        agent.request(
            session.id,
            since=cpb.ContextSince(contents_count=count, contents_digest=mine.contents_digest),
        )
    )
    assert unchanged.base_contents_count == count
    assert not unchanged.contents
    digest = mine.contents_digest
    assert await base_for(cpb.ContextSince(contents_count=count, contents_digest="0" * 64)) == 0
    assert await base_for(cpb.ContextSince(contents_count=count + 1, contents_digest=digest)) == 0
    assert await base_for(cpb.ContextSince(contents_count=count - 1, contents_digest=digest)) == 0
    assert await base_for(cpb.ContextSince(contents_count=0, contents_digest=digest)) == 0
    # the other agent sees the aside as context from another agent: different contents
    other_since = cpb.ContextSince(
        contents_count=len(theirs.contents), contents_digest=theirs.contents_digest
    )
    assert await base_for(other_since) == 0


@pytest.mark.parametrize(
    ("since", "field_name"),
    [
        (cpb.ContextSince(contents_count=-1), "since.contents_count"),
        (cpb.ContextSince(contents_count=1, contents_digest="x" * 129), "since.contents_digest"),
    ],
)
async def test_bad_since_is_invalid_argument(
    since: cpb.ContextSince,
    field_name: str,
    stub: context_service_pb2_grpc.ContextServiceAsyncStub,
    client: ContextEngineClient,
) -> None:
    session = await client.create_session(APP, "u", "s")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.BuildContext(Viewer("agent").request(session.id, since=since))
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(raised.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.reason, info.metadata["field"]) == ("INVALID_ARGUMENT", field_name)


async def test_a_digest_of_128_characters_is_accepted(
    stub: context_service_pb2_grpc.ContextServiceAsyncStub, client: ContextEngineClient
) -> None:
    session = await client.create_session(APP, "u", "s")
    since = cpb.ContextSince(contents_count=0, contents_digest="x" * 128)
    answer = await stub.BuildContext(Viewer("agent").request(session.id, since=since))
    assert answer.base_contents_count == 0
    assert answer.contents_digest
