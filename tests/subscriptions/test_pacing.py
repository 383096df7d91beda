"""Pacing of live frames: the pacer's turns (token bucket, first come first served, adaptive
rate), paced subscriptions in the broadcaster (commits gathered while waiting for a turn, ending
never waits for one), shared batches of a group, and paced streams end to end (exactly once, in
order; the default client splits batches into ``event`` frames)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import AsyncIterator

import pytest

from contextengine.client import ContextEngineClient
from contextengine.store import Change, LoggedEvent, MemoryStore, SessionDeleted, SessionKey
from contextengine.subscriptions.broadcaster import (
    Batch,
    Broadcaster,
    EndReason,
    SubscriptionEndedError,
    session_route,
)
from contextengine.subscriptions.frames import EventFrames, commit_run, encode_batch
from contextengine.subscriptions.pacing import LivePacer, thread_demand
from contextengine.transport import ContextEngineServer
from contextengine.v1 import subscription_service_pb2 as spb, subscription_service_pb2_grpc

from .helpers import (
    APP,
    SESSION,
    USER,
    closing_call,
    count_events,
    eventually,
    has_kind,
    kind,
    message,
    read_frame,
    sequences,
    take,
)

pytestmark = pytest.mark.service

KEY = SessionKey(APP, USER, SESSION)


class Waiter:
    def __init__(self, name: str, log: list[tuple[str, float]], wants: bool = True) -> None:
        self.name = name
        self.log = log
        self.wants = wants

    def _take_turn(self) -> bool:
        if self.wants:
            self.log.append((self.name, asyncio.get_running_loop().time()))
        return self.wants


# The pacer ---------------------------------------------------------------------------------


async def test_unlimited_turns_are_immediate() -> None:
    pacer = LivePacer()
    now = asyncio.get_running_loop().time()
    assert all(pacer.try_turn(now) for _ in range(1000))
    assert pacer.rate == math.inf


async def test_turns_come_at_the_rate_first_come_first_served() -> None:
    pacer = LivePacer(rate=100.0, adaptive=False, burst_seconds=0.0)  # one at once, 1/10 ms
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert pacer.try_turn(start)
    assert not pacer.try_turn(start)
    log: list[tuple[str, float]] = []
    for name in "abcd":
        pacer.wait_turn(Waiter(name, log))
    assert not pacer.try_turn(loop.time())  # nobody jumps the queue
    await eventually(lambda: len(log) == 4, seconds=2.0)
    assert [name for name, _ in log] == list("abcd")
    # Four more turns at 100/s take at least 30 ms after the first.
    assert log[-1][1] - log[0][1] >= 0.03 - 0.002
    assert pacer.waiting == 0


async def test_queued_turns_are_released_in_sweeps_of_the_burst() -> None:
    """Waiting subscribers are let go together (their frames are written in one loop turn),
    as many as the bucket holds, at the same rate overall."""
    pacer = LivePacer(rate=100.0, adaptive=False, burst_seconds=0.02)  # sweeps of 2
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert pacer.try_turn(start)
    assert pacer.try_turn(start)  # the full bucket, at once
    assert not pacer.try_turn(start)
    log: list[tuple[str, float]] = []
    for name in "abcde":
        pacer.wait_turn(Waiter(name, log))
    await eventually(lambda: len(log) == 5, seconds=2.0)
    assert [name for name, _ in log] == list("abcde")
    times = [at - start for _, at in log]
    assert times[1] - times[0] < 0.005  # a and b together
    assert times[3] - times[2] < 0.005  # c and d together
    assert times[2] - times[1] >= 0.02 - 0.002  # a sweep's two turns apart
    assert times[0] >= 0.02 - 0.002  # the first sweep waited for both of its turns
    assert times[4] >= 0.05 - 0.002  # five turns at 100/s, whatever the sweeps: 50 ms
    assert pacer.waiting == 0


async def test_a_sweep_waits_for_no_more_turns_than_are_queued() -> None:
    pacer = LivePacer(rate=100.0, adaptive=False, burst_seconds=0.05)  # up to 5 at once
    loop = asyncio.get_running_loop()
    start = loop.time()
    while pacer.try_turn(start):
        pass
    log: list[tuple[str, float]] = []
    pacer.wait_turn(Waiter("alone", log))
    await eventually(lambda: len(log) == 1, seconds=2.0)
    assert log[0][1] - start < 0.02 + 0.008  # one turn's wait (10 ms), not five


async def test_an_ended_waiter_gives_its_turn_to_the_next() -> None:
    pacer = LivePacer(rate=50.0, adaptive=False, burst_seconds=0.0)
    loop = asyncio.get_running_loop()
    assert pacer.try_turn(loop.time())
    log: list[tuple[str, float]] = []
    pacer.wait_turn(Waiter("gone", log, wants=False))
    pacer.wait_turn(Waiter("next", log))
    await eventually(lambda: len(log) == 1, seconds=2.0)
    assert [name for name, _ in log] == ["next"]
    assert log[0][1] - loop.time() < 0.04  # one turn's wait (20 ms), not two


def test_the_rate_follows_the_demand() -> None:
    busy = 0.0
    pacer = LivePacer(target_demand=0.5, window_seconds=0.125, clock=lambda: busy)
    pacer.members = 10  # lowest rate: 10 / 0.05 s = 200 turns/s
    now = 128.0

    def window(demand: float, attempts: int) -> None:
        """One window: ``attempts`` turns asked for, evenly spread."""
        nonlocal busy, now
        for i in range(attempts):
            pacer.try_turn(now + i * 0.125 / attempts)
        busy += demand * 0.125
        now += 0.125

    pacer.try_turn(now)  # starts the first window
    window(0.9, 1250)  # 10,000 turns/s with the loop 90% busy
    pacer.try_turn(now)
    assert pacer.demand == pytest.approx(0.9)
    assert pacer.rate == pytest.approx(10_000 * 0.7, rel=0.01)  # cut by at most 30% a window
    for _ in range(30):
        window(1.0, 1250)
    assert pacer.rate == 200.0  # never below members / max_hold_seconds
    for _ in range(10):
        window(0.3, 25)  # room again: the rate rises while it is what limits the turns
    assert 200.0 < pacer.rate < math.inf
    for _ in range(12):
        window(0.1, 1)  # the budget limits nobody any more: no limit at all
    assert pacer.rate == math.inf


def test_pacer_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="target_demand"):
        LivePacer(target_demand=0.0)
    with pytest.raises(ValueError, match="rate"):
        LivePacer(rate=0.0)


def test_thread_demand_grows_with_work() -> None:
    before = thread_demand()
    deadline = time.perf_counter() + 0.03
    while time.perf_counter() < deadline:
        pass
    time.sleep(0.001)  # schedstat is brought up to date when the thread is switched out
    assert thread_demand() - before >= 0.02


# Paced subscriptions in the broadcaster ----------------------------------------------------


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    opened = MemoryStore()
    await opened.open()
    await opened.create_session(KEY, {}, 1.0)
    yield opened
    await opened.close()


def events_only(change: Change) -> bool:
    return isinstance(change, LoggedEvent)


async def append(store: MemoryStore, *texts: str) -> None:
    await store.append_events(KEY, [message(text, event_id=text) for text in texts], None)


def ids(batch: list[Change] | None) -> list[str]:
    assert batch is not None
    return [change.event.id for change in batch if isinstance(change, LoggedEvent)]


async def test_a_paced_subscription_gathers_the_commits_made_while_it_waits(
    store: MemoryStore,
) -> None:
    broadcaster = Broadcaster(store, LivePacer(rate=10.0, adaptive=False, burst_seconds=0.0))
    broadcaster.start()
    paced = broadcaster.subscribe(session_route(KEY), events_only, 100, paced=True)
    eager = broadcaster.subscribe(session_route(KEY), events_only, 100)
    await append(store, "a")
    assert ids(await paced.next(1)) == ["a"]  # a free turn: at once
    waiting = asyncio.create_task(paced.next(1))
    await asyncio.sleep(0)
    for name in "bcd":
        await append(store, name)
    assert broadcaster.pacer.waiting == 1
    assert [ids(await eager.next(1)) for _ in range(4)] == [["a"], ["b"], ["c"], ["d"]]
    assert not waiting.done()
    assert ids(await asyncio.wait_for(waiting, 1)) == ["b"]  # its turn, 100 ms later
    assert [ids(paced.poll()), ids(paced.poll()), paced.poll()] == [["c"], ["d"], None]
    await broadcaster.shutdown(grace_seconds=0.1)


async def test_ending_never_waits_for_a_turn(store: MemoryStore) -> None:
    broadcaster = Broadcaster(store, LivePacer(rate=0.1, adaptive=False, burst_seconds=0.0))
    broadcaster.start()
    lagging = broadcaster.subscribe(session_route(KEY), events_only, 2, paced=True)
    stopping = broadcaster.subscribe(session_route(KEY), events_only, 100, paced=True)
    await append(store, "a")
    assert ids(await lagging.next(1)) == ["a"]  # the only turn for 10 s
    waits = [asyncio.create_task(s.next(1)) for s in (lagging, stopping)]
    await asyncio.sleep(0)
    await append(store, "b")
    await append(store, "c")
    await append(store, "d")  # 2 waiting + 1 > 2
    assert lagging.ended is EndReason.LAGGED
    with pytest.raises(SubscriptionEndedError):
        await asyncio.wait_for(waits[0], 1)
    await broadcaster.shutdown(grace_seconds=0.0)
    with pytest.raises(SubscriptionEndedError) as info:
        await asyncio.wait_for(waits[1], 1)
    assert info.value.reason is EndReason.SHUTDOWN
    assert broadcaster.pacer.members == 0


async def test_heartbeats_wait_while_changes_wait_for_a_turn(store: MemoryStore) -> None:
    broadcaster = Broadcaster(store, LivePacer(rate=5.0, adaptive=False, burst_seconds=0.0))
    broadcaster.start()
    paced = broadcaster.subscribe(session_route(KEY), events_only, 100, paced=True)
    await append(store, "a")
    assert ids(await paced.next(0.05)) == ["a"]
    await append(store, "b")
    # Idle for longer than 0.05 s, but "b" is buffered: no heartbeat (None), "b" on its turn.
    assert ids(await asyncio.wait_for(paced.next(0.05), 1)) == ["b"]
    await broadcaster.shutdown(grace_seconds=0.1)


async def test_a_group_shares_one_batch_per_commit(store: MemoryStore) -> None:
    broadcaster = Broadcaster(store)
    broadcaster.start()
    calls = 0

    def counted(change: Change) -> bool:
        nonlocal calls
        calls += 1
        return isinstance(change, LoggedEvent)

    route = session_route(KEY)
    members = [broadcaster.subscribe(route, counted, 10, group="all") for _ in range(5)]
    alone = broadcaster.subscribe(route, events_only, 10)
    await append(store, "a", "b")
    batches = [await member.next(1) for member in members]
    assert calls == 2  # once per change for the whole group
    assert all(batch is batches[0] for batch in batches)
    assert isinstance(batches[0], Batch)
    assert ids(batches[0]) == ["a", "b"]
    mine = await alone.next(1)
    assert mine is not batches[0]
    assert ids(mine) == ["a", "b"]
    assert members[0].last_seen is not None
    assert members[0].last_seen.event.id == "b"
    for member in members:
        member.close()
    assert broadcaster.active == 1
    await broadcaster.shutdown(grace_seconds=0.1)


# Frames of a commit, encoded once ----------------------------------------------------------


def logged(sequence: int, position: int) -> LoggedEvent:
    event = message(f"m{sequence}", event_id=f"e{sequence}")
    event.sequence = sequence
    return LoggedEvent(KEY, event, position)


@pytest.mark.parametrize("by_sequence", [True, False])
def test_a_commit_run_is_its_event_frames_end_to_end(by_sequence: bool) -> None:
    frames = EventFrames()
    events = [logged(n, 100 + n) for n in (3, 4, 5)]
    batch = Batch(events)
    run = commit_run(batch, by_sequence, frames)
    assert run is not None
    assert commit_run(batch, by_sequence, frames) is run  # kept on the batch
    assert (run.first, run.last, run.size) == ((3, 5, 3) if by_sequence else (103, 105, 3))
    one_by_one = [frames.event(event, by_sequence) for event in events]
    assert encode_batch([run.frames]) == encode_batch(one_by_one)
    decoded = spb.SubscribeEventsResponse.FromString(encode_batch([run.frames]))
    assert [e.cursor for e in decoded.events.events] == [
        str(run.first),
        "4" if by_sequence else "104",
        str(run.last),
    ]


def test_a_commit_with_something_else_than_events_has_no_run() -> None:
    frames = EventFrames()
    assert commit_run(Batch([logged(1, 1), SessionDeleted(KEY)]), True, frames) is None
    assert commit_run([logged(1, 1)], True, frames) is None  # not a shared batch


# Paced streams end to end ------------------------------------------------------------------


def slow_pacer(server: ContextEngineServer, rate: float) -> None:
    assert server.broadcaster.active == 0
    server.broadcaster.pacer = LivePacer(rate=rate, adaptive=False, burst_seconds=0.0)


async def test_live_frames_gather_what_was_recorded_while_waiting(
    server: ContextEngineServer, client: ContextEngineClient
) -> None:
    slow_pacer(server, 20.0)  # a turn every 50 ms
    await client.create_session(APP, USER, SESSION)
    stub = subscription_service_pb2_grpc.SubscriptionServiceStub(client.channel)
    request = spb.SubscribeEventsRequest(
        app_name=APP, user_id=USER, session_id=SESSION, max_events_per_frame=16
    )
    async with closing_call(stub.SubscribeEvents(request)) as call:
        first = await read_frame(call)
        assert kind(first) == "caught_up"
        for n in range(20):
            await client.append_event(APP, USER, SESSION, message(f"m{n}"))
        frames: list[spb.SubscribeEventsResponse] = []
        while sum(len(f.events.events) for f in frames) < 20:
            frames.append(await read_frame(call))
    got = [e.event.sequence for f in frames for e in f.events.events]
    assert got == list(range(1, 21))
    assert len(frames) < 20  # commits went out together
    assert max(len(f.events.events) for f in frames) <= 16
    assert [f.events.events[-1].cursor for f in frames][-1] == "20"


async def test_one_event_per_message_is_never_paced(
    server: ContextEngineServer, client: ContextEngineClient
) -> None:
    slow_pacer(server, 0.1)
    await client.create_session(APP, USER, SESSION)
    stream = client.subscribe_events(APP, USER, SESSION, max_events_per_frame=1)
    async with contextlib.aclosing(stream):
        await take(stream, has_kind("caught_up"))
        assert server.broadcaster.pacer.members == 0
        for n in range(5):
            await client.append_event(APP, USER, SESSION, message(f"m{n}"))
        frames = await take(stream, count_events(5), seconds=2.0)
    assert sequences(frames) == [1, 2, 3, 4, 5]


async def test_the_default_client_batches_the_wire_and_yields_event_frames(
    server: ContextEngineServer, client: ContextEngineClient
) -> None:
    slow_pacer(server, 20.0)
    await client.create_session(APP, USER, SESSION)
    await client.append_events(APP, USER, SESSION, [message(f"old{n}") for n in range(300)])
    stream = client.subscribe_events(APP, USER, SESSION)
    async with contextlib.aclosing(stream):
        frames = await take(stream, has_kind("caught_up"))
        assert server.broadcaster.pacer.members == 1  # it asked for batches
        for n in range(10):
            await client.append_event(APP, USER, SESSION, message(f"new{n}"))
        frames += await take(stream, count_events(10))
    assert {kind(f) for f in frames} == {"event", "caught_up"}
    assert sequences(frames) == list(range(1, 311))
    cursors = [f.event.cursor for f in frames if kind(f) == "event"]
    assert cursors == [str(n) for n in range(1, 311)]

    # Resuming after any event yielded (here: in the middle of a batch) misses nothing.
    rest = client.subscribe_events(APP, USER, SESSION, cursor="150")
    async with contextlib.aclosing(rest):
        again = await take(rest, has_kind("caught_up"))
    assert sequences(again) == list(range(151, 311))


async def test_paced_subscribers_get_everything_exactly_once_in_order(
    server: ContextEngineServer, client: ContextEngineClient
) -> None:
    """Several paced subscribers (default client, some batched raw) while commits of random
    sizes arrive faster than their turns."""
    server.broadcaster.pacer = LivePacer(rate=150.0, adaptive=False, burst_seconds=0.01)
    await client.create_session(APP, USER, SESSION)
    rng = random.Random(5)
    sizes = [rng.choice([1, 1, 1, 2, 5]) for _ in range(60)]
    total = sum(sizes)
    streams = [
        client.subscribe_events(APP, USER, SESSION, max_events_per_frame=per_frame)
        for per_frame in (0, 0, 0, 3, 64)
    ]

    def all_events(frames: list[spb.SubscribeEventsResponse]) -> list[int]:
        out: list[int] = []
        for f in frames:
            if kind(f) == "event":
                out.append(f.event.event.sequence)
            elif kind(f) == "events":
                out.extend(e.event.sequence for e in f.events.events)
        return out

    async with contextlib.AsyncExitStack() as stack:
        for stream in streams:
            await stack.enter_async_context(contextlib.aclosing(stream))
            await take(stream, has_kind("caught_up"))

        async def write() -> None:
            for n, size in enumerate(sizes):
                batch = [message(f"e{n}-{i}") for i in range(size)]
                await client.append_events(APP, USER, SESSION, batch)
                if rng.random() < 0.2:
                    await asyncio.sleep(0.005)

        results = await asyncio.gather(
            write(),
            *(take(s, lambda got: len(all_events(got)) >= total, seconds=30) for s in streams),
        )
    for frames in results[1:]:
        assert frames is not None  # (results[0] is write()'s None)
        assert all_events(frames) == list(range(1, total + 1))
    await eventually(lambda: server.broadcaster.active == 0)
    assert server.broadcaster.pacer.members == 0
