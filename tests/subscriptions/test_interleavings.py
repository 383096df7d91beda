"""Hypothesis-driven interleavings of appends, subscribing and reconnecting: every event arrives
exactly once, in order, whatever the timing."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.client import ContextEngineClient
from contextengine.v1 import subscription_service_pb2 as spb

from .helpers import USER, kind, message

pytestmark = pytest.mark.service

_names = itertools.count()

SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Plan:
    #: events appended before anything else
    before: int
    #: per concurrent writer, the sizes of its AppendEvents batches
    writers: list[list[int]]
    #: subscribe once this many writer appends have been acknowledged
    start_after: int
    #: the cursor to start from (capped by ``before``)
    cursor: int

    @property
    def total(self) -> int:
        return self.before + sum(sum(batches) for batches in self.writers)


plans = st.builds(
    Plan,
    before=st.integers(0, 12),
    writers=st.lists(st.lists(st.integers(1, 3), max_size=8), min_size=1, max_size=3),
    start_after=st.integers(0, 10),
    cursor=st.integers(0, 12),
)


def frame_cursor(frame: spb.SubscribeEventsResponse) -> str:
    name = kind(frame)
    if name == "event":
        return frame.event.cursor
    if name == "caught_up":
        return frame.caught_up.cursor
    return frame.heartbeat.cursor


class Writers:
    """Concurrent appenders; ``acked`` is set once ``start_after`` appends were acknowledged."""

    def __init__(self, client: ContextEngineClient, app: str, sessions: list[str]) -> None:
        self._client = client
        self._app = app
        self._sessions = sessions
        self._acks = 0
        self._threshold = 0
        self.acked = asyncio.Event()

    def start(self, writers: list[list[int]], start_after: int) -> list[asyncio.Task[None]]:
        self._threshold = start_after
        if start_after == 0 or start_after > sum(len(batches) for batches in writers):
            self.acked.set()
        return [asyncio.create_task(self._write(n, batches)) for n, batches in enumerate(writers)]

    async def _write(self, n: int, batches: list[int]) -> None:
        session = self._sessions[n % len(self._sessions)]
        for size in batches:
            events = [message(f"w{n}") for _ in range(size)]
            await self._client.append_events(self._app, USER, session, events)
            self._acks += 1
            if self._acks >= self._threshold:
                self.acked.set()


async def new_sessions(client: ContextEngineClient, count: int) -> tuple[str, list[str]]:
    app = f"app-{next(_names)}"
    sessions = [f"s{n}" for n in range(count)]
    for session in sessions:
        await client.create_session(app, USER, session)
    return app, sessions


@SETTINGS
@given(plan=plans)
async def test_replay_then_live_has_no_gap(client: ContextEngineClient, plan: Plan) -> None:
    app, (session,) = await new_sessions(client, 1)
    for _ in range(plan.before):
        await client.append_event(app, USER, session, message("before"))
    writers = Writers(client, app, [session])
    tasks = writers.start(plan.writers, plan.start_after)
    try:
        await writers.acked.wait()
        cursor = min(plan.cursor, plan.before)
        expected = plan.total - cursor
        frames: list[spb.SubscribeEventsResponse] = []
        stream = client.subscribe_events(app, USER, session, cursor=str(cursor))
        async with contextlib.aclosing(stream), asyncio.timeout(20):
            async for frame in stream:
                frames.append(frame)
                if sum(kind(f) == "event" for f in frames) == expected and any(
                    kind(f) == "caught_up" for f in frames
                ):
                    break
    finally:
        await asyncio.gather(*tasks)

    got = [f.event.event.sequence for f in frames if kind(f) == "event"]
    assert got == list(range(cursor + 1, plan.total + 1))
    marks = [i for i, f in enumerate(frames) if kind(f) == "caught_up"]
    assert len(marks) == 1
    caught_up = int(frames[marks[0]].caught_up.cursor)
    assert all(int(f.event.cursor) <= caught_up for f in frames[: marks[0]])
    assert all(int(f.event.cursor) > caught_up for f in frames[marks[0] + 1 :])


@SETTINGS
@given(
    plan=plans,
    disconnects=st.lists(st.integers(0, 6), max_size=5),
    app_scope=st.booleans(),
)
async def test_resuming_at_random_points_gives_each_event_once(
    client: ContextEngineClient, plan: Plan, disconnects: list[int], app_scope: bool
) -> None:
    app, sessions = await new_sessions(client, 2 if app_scope else 1)
    for _ in range(plan.before):
        await client.append_event(app, USER, sessions[0], message("before"))
    writers = Writers(client, app, sessions)
    tasks = writers.start(plan.writers, plan.start_after)
    received: list[spb.SubscribedEvent] = []
    cursor = ""
    try:
        await writers.acked.wait()
        # Read a few events, drop the stream, resubscribe from the last cursor seen; repeat.
        for budget in [*disconnects, None]:
            stream = (
                client.subscribe_events(app, cursor=cursor)
                if app_scope
                else client.subscribe_events(app, USER, sessions[0], cursor=cursor)
            )
            async with contextlib.aclosing(stream), asyncio.timeout(20):
                taken = 0
                async for frame in stream:
                    cursor = frame_cursor(frame)
                    if kind(frame) == "event":
                        received.append(frame.event)
                        taken += 1
                    if len(received) == plan.total or (budget is not None and taken >= budget):
                        break
            if len(received) == plan.total:
                break
    finally:
        await asyncio.gather(*tasks)

    keys = [(e.session_id, e.event.sequence) for e in received]
    assert len(keys) == len(set(keys)) == plan.total
    for session in sessions:
        mine = [sequence for name, sequence in keys if name == session]
        assert mine == list(range(1, len(mine) + 1))
    positions = [e.position for e in received]
    assert positions == sorted(set(positions))
