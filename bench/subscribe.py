"""Subscriptions: 100 subscribers follow one session while a writer appends 500 events/s.

The sidecar runs as a separate process (``python -m contextengine serve``, SQLite, default
durability). The writer (this process) appends one event at a time, paced: event ``i`` is sent at
``start + i / rate`` s, or at once when the writer is behind; it writes for a fixed time, so a
writer that cannot keep the pace simply writes fewer events. The subscribers run in another
process: 100 ``subscribe_events`` streams of the Python client over a few channels, each
following the session from its first event, as the client does by default: it asks for batches
on the wire (up to 256 events per gRPC message; the server paces busy subscribers so that a
message carries what was recorded since the previous one) and yields one ``event`` frame per
event. At the issue's rate the same workload also runs with one message per event
(``max_events_per_frame=1``: never batched, never paced) for comparison. Every process stamps
times with the same system-wide monotonic clock, so times compare across processes.

For each offered rate (500 events/s, the issue's workload, then lower rates to show where this
machine copes), each on a fresh session of the same sidecar:

Rows are labelled with the rate and the mode (``default`` or ``per message``):

* ``writer alone``: the paced writer, nobody subscribed.
* ``writer + N subscribers``: the same writer while N subscribers follow the session.
* ``delivery, ack -> receipt``: per event and subscriber, from the moment the writer has the
  append's acknowledgement to the moment the subscriber has the event. Negative when the event
  reached the subscriber before the acknowledgement reached the writer (the store notifies
  subscribers before it answers the writer).
* ``delivery, send -> receipt``: the same from the moment the writer sent the append.

On delivery rows, "bench CPU" is the subscriber process's CPU per delivery. Then the same
machine's floor, with no engine at all (``grpc_floor``): a bare gRPC server streaming to a bare
client, one message per subscriber every 15 ms (what a p99 under 20 ms needs) and every 50 ms,
and notes that add the cores the writer alone used to it: the budget of the issue's targets.

Data checks: every subscriber received every event exactly once and in order, and the writer's
events got the sequences 1..n.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import tempfile
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from bench import DataCheckError, Measurement, Options, Report, Target, grpc_floor
from bench.sidecar import Sidecar
from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, event_pb2

APP = "bench"
USER = "user-1"

#: the issue's workload and targets
ISSUE_RATE = 500.0
P99_TARGET_MS = 20.0
THROUGHPUT_RATIO_TARGET = 0.8

START_TIMEOUT_SECONDS = 30.0
#: how long subscribers get, after the writer stopped, to receive the last event
DRAIN_TIMEOUT_SECONDS = 120.0
#: message periods of the bare gRPC floor: what the p99 target needs (every subscriber served
#: every 15 ms), and the sidecar's own longest hold under load (50 ms)
FLOOR_PERIODS = (0.015, 0.05)


@dataclass(frozen=True)
class Sizes:
    #: how long the writer writes, per workload
    seconds: float
    #: the offered rates (events per second), the issue's first
    rates: tuple[float, ...]
    subscribers: int
    #: channels the subscribers share
    channels: int
    #: stored events each subscriber replays in the capacity workload
    replay_events: int


FULL_SIZES = Sizes(
    seconds=10.0,
    rates=(ISSUE_RATE, 100.0, 50.0, 20.0),
    subscribers=100,
    channels=4,
    replay_events=1000,
)
QUICK_SIZES = Sizes(
    seconds=2.0, rates=(ISSUE_RATE, 50.0), subscribers=100, channels=4, replay_events=500
)


def now() -> float:
    """Seconds on the system-wide monotonic clock (comparable between processes)."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def event(n: int) -> event_pb2.Event:
    """An agent's answer of a typical size (a few hundred bytes)."""
    return event_pb2.Event(
        id=f"e{n}",
        author="weather_agent",
        invocation_id=f"inv-{n // 4}",
        content=content_pb2.Content(
            role="model",
            parts=[
                content_pb2.Part(
                    text=f"It is {8 + n % 17} °C in Paris with light rain and a moderate wind, "
                    "so take an umbrella and a light jacket for your walk."
                )
            ],
        ),
    )


# The writer ------------------------------------------------------------------------------------


@dataclass
class Written:
    """Per event (index = sequence - 1): when it was sent and when it was acknowledged."""

    sent: list[float]
    acked: list[float]
    seconds: float
    server_cpu_seconds: float | None
    client_cpu_seconds: float

    @property
    def events(self) -> int:
        return len(self.acked)


async def paced_writer(
    client: ContextEngineClient, session_id: str, rate: float, seconds: float, server: Sidecar
) -> Written:
    """Appends at ``rate`` (or as fast as it can, when slower) for ``seconds``."""
    sent: list[float] = []
    acked: list[float] = []
    cpu_before = server.cpu_seconds()
    process_before = time.process_time()
    start = now()
    end = start + seconds
    n = 0
    while (due := start + n / rate) < end and now() < end:
        delay = due - now()
        if delay > 0:
            await asyncio.sleep(delay)
        sent.append(now())
        response = await client.append_event(APP, USER, session_id, event(n))
        acked.append(now())
        if response.event.sequence != n + 1 or response.duplicate:
            raise DataCheckError(f"{session_id}: event {n} recorded as {response.event.sequence}")
        n += 1
    elapsed = now() - start
    cpu_after = server.cpu_seconds()
    server_cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return Written(sent, acked, elapsed, server_cpu, time.process_time() - process_before)


# The subscribers (another process) -------------------------------------------------------------


@dataclass
class Received:
    """What the subscriber process saw: per subscriber, the receipt time of each sequence
    (NaN: never received), how often subscribers resubscribed (the client does it by itself
    after SUBSCRIBER_LAGGED) and how many events arrived out of order or twice."""

    times: list[array[float]]
    resubscriptions: int
    out_of_order: int
    #: event frames received after the replay (``event`` or ``events``), all subscribers (in the
    #: default mode the client splits batches: one frame per event)
    live_frames: int
    #: events they carried
    live_events: int
    #: CPU seconds the subscriber process used from "ready" to the last event
    cpu_seconds: float = 0.0


def subscriber_process(
    target: str,
    session_id: str,
    subscribers: int,
    channels: int,
    capacity: int,
    per_frame: int,
    conn: Connection,
) -> None:
    """Entry point of the subscriber process. Sends "ready" once every subscriber is caught up,
    then receives the number of events written, and answers with a ``Received``."""
    received = asyncio.run(
        _subscribe_all(target, session_id, subscribers, channels, capacity, per_frame, conn)
    )
    conn.send(received)
    conn.close()


async def _subscribe_all(
    target: str,
    session_id: str,
    subscribers: int,
    channels: int,
    capacity: int,
    per_frame: int,
    conn: Connection,
) -> Received:
    times = [array("d", [math.nan]) * (capacity + 1) for _ in range(subscribers)]
    last = [0] * subscribers
    caught_up = [0] * subscribers
    out_of_order = 0
    live_frames = live_events = 0
    ready = asyncio.Event()
    #: the number of events written, once the writer is done
    goal = math.inf
    done = asyncio.Event()

    def check_done() -> None:
        if min(last) >= goal:
            done.set()

    async def follow(k: int, client: ContextEngineClient) -> None:
        nonlocal out_of_order, live_frames, live_events
        mine = times[k]
        stream = client.subscribe_events(APP, USER, session_id, max_events_per_frame=per_frame)
        async with contextlib.aclosing(stream):
            async for frame in stream:
                kind = frame.WhichOneof("frame")
                if kind == "event" or kind == "events":
                    received = now()
                    batch = [frame.event] if kind == "event" else frame.events.events
                    if ready.is_set():
                        live_frames += 1
                        live_events += len(batch)
                    for subscribed in batch:
                        sequence = subscribed.event.sequence
                        if sequence <= capacity:
                            mine[sequence] = received
                        if sequence != last[k] + 1:
                            out_of_order += 1
                        last[k] = sequence
                    if last[k] >= goal:
                        check_done()
                elif kind == "caught_up":
                    caught_up[k] += 1
                    if all(caught_up):
                        ready.set()

    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(ContextEngineClient(target, attempts=1))
            for _ in range(channels)
        ]
        tasks = [asyncio.create_task(follow(k, clients[k % channels])) for k in range(subscribers)]
        try:
            # Catching up may mean replaying a long stored session (the replay workload).
            await asyncio.wait_for(ready.wait(), DRAIN_TIMEOUT_SECONDS)
            conn.send("ready")
            cpu_start = time.process_time()
            goal = await asyncio.to_thread(conn.recv)
            check_done()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), DRAIN_TIMEOUT_SECONDS)
            cpu_seconds = time.process_time() - cpu_start
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    resubscriptions = sum(max(0, count - 1) for count in caught_up)
    return Received(times, resubscriptions, out_of_order, live_frames, live_events, cpu_seconds)


# The workloads ---------------------------------------------------------------------------------


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def _writer_row(name: str, written: Written, baseline: float | None) -> Measurement:
    latencies = tuple((a - s) * 1000 for s, a in zip(written.sent, written.acked, strict=True))
    return Measurement(
        name,
        written.events,
        written.seconds,
        latencies,
        client_cpu_seconds=written.client_cpu_seconds,
        server_cpu_seconds=written.server_cpu_seconds,
        baseline_events_per_second=baseline,
    )


class Subscribers:
    """The subscriber process, following one session: ``start`` returns once every subscriber
    is caught up, ``finish`` once every subscriber has the given number of events."""

    def __init__(
        self, target: str, session_id: str, sizes: Sizes, capacity: int, per_frame: int
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._parent, child = context.Pipe()
        self._process = context.Process(
            target=subscriber_process,
            args=(
                target,
                session_id,
                sizes.subscribers,
                sizes.channels,
                capacity,
                per_frame,
                child,
            ),
            daemon=True,
        )

    async def start(self) -> None:
        self._process.start()
        ready = await asyncio.to_thread(self._parent.poll, DRAIN_TIMEOUT_SECONDS + 30.0)
        if not ready or self._parent.recv() != "ready":
            raise RuntimeError("the subscribers did not start")

    async def finish(self, events: int) -> Received:
        self._parent.send(events)
        if not await asyncio.to_thread(self._parent.poll, DRAIN_TIMEOUT_SECONDS + 30.0):
            raise RuntimeError("the subscribers did not report")
        received: Received = self._parent.recv()
        return received

    async def stop(self) -> None:
        if self._process.pid is None:
            return
        await asyncio.to_thread(self._process.join, 30.0)
        if self._process.is_alive():
            self._process.kill()


async def _with_subscribers(
    client: ContextEngineClient, server: Sidecar, sizes: Sizes, rate: float, per_frame: int
) -> tuple[Written, Received]:
    session = await client.create_session(APP, USER)
    capacity = math.ceil(rate * sizes.seconds) + 1
    subscribers = Subscribers(server.target, session.id, sizes, capacity, per_frame)
    try:
        await subscribers.start()
        written = await paced_writer(client, session.id, rate, sizes.seconds, server)
        received = await subscribers.finish(written.events)
    finally:
        await subscribers.stop()
    return written, received


#: ``max_events_per_frame`` of the modes: the client's default, and one event per message
DEFAULT_MODE = 0
PER_MESSAGE_MODE = 1


def _mode(per_frame: int) -> str:
    if per_frame == DEFAULT_MODE:
        return "default"
    return "per message" if per_frame == 1 else f"batched x{per_frame}"


async def _replay_capacity(
    client: ContextEngineClient, server: Sidecar, sizes: Sizes, per_frame: int, report: Report
) -> Measurement:
    """How fast the sidecar pushes frames at all: every subscriber replays a stored session
    (no writer: the store is read in pages, so this is the cost of sending)."""
    session = await client.create_session(APP, USER)
    events = sizes.replay_events
    for start in range(0, events, 100):
        batch = [event(n) for n in range(start, min(events, start + 100))]
        await client.append_events(APP, USER, session.id, batch)
    subscribers = Subscribers(server.target, session.id, sizes, events, per_frame)
    cpu_before = server.cpu_seconds()
    try:
        await subscribers.start()  # returns once every subscriber has replayed everything
        received = await subscribers.finish(events)
    finally:
        await subscribers.stop()
    cpu_after = server.cpu_seconds()
    mode = _mode(per_frame)
    report.checks.append(_check(received, events, f"replay, {mode}"))
    times = [t for per in received.times for t in per[1:]]
    return Measurement(
        f"replay, {mode}: {sizes.subscribers} subscribers x {events} stored events",
        len(times),
        max(times) - min(times),
        server_cpu_seconds=(
            None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
        ),
    )


def _check(received: Received, events: int, label: str) -> str:
    missing = sum(
        1 for times in received.times for sequence in range(1, events + 1)
        if math.isnan(times[sequence])
    )  # fmt: skip
    if missing or received.out_of_order:
        raise DataCheckError(
            f"{label}: {missing} (subscriber, event) pairs missing, "
            f"{received.out_of_order} out of order or repeated"
        )
    return (
        f"{label}: each of {len(received.times)} subscribers received events "
        f"1..{events} exactly once, in order "
        f"({received.resubscriptions} transparent resubscriptions after SUBSCRIBER_LAGGED)"
    )


def _frame_bytes(events: float) -> int:
    """The encoded size of an ``events`` frame carrying ``events`` of the writer's events."""
    one = len(event(0).SerializeToString()) + 24  # the frame's envelope, cursor and sequence
    return max(1, round(events)) * one


def _floor_row(floor: grpc_floor.Floor) -> Measurement:
    return Measurement(
        f"bare gRPC floor: {floor.streams} streams, {floor.message_bytes:,} B every "
        f"{floor.period * 1000:.0f} ms (per message)",
        floor.messages,
        floor.seconds,
        client_cpu_seconds=floor.client_cpu_seconds,
        server_cpu_seconds=floor.server_cpu_seconds,
    )


def _budget_notes(issue: RateResult, floors: Sequence[grpc_floor.Floor]) -> list[str]:
    """The issue's targets against this machine's cores: the writer alone plus bare gRPC."""
    alone = issue.alone
    if alone.server_cpu_seconds is None or alone.client_cpu_seconds is None or not alone.events:
        return []
    per_append = (alone.server_cpu_seconds + alone.client_cpu_seconds) / alone.events
    writer_cores = per_append * issue.rate
    cores = os.cpu_count() or 1
    notes = [
        f"budget: the writer alone at {issue.rate:.0f}/s would need {writer_cores:.2f} cores "
        f"(sidecar + writer process, {per_append * 1e3:.2f} ms of CPU per append); "
        f"this machine has {cores}"
    ]
    notes.extend(
        f"budget: a message to each of {floor.streams} subscribers every "
        f"{floor.period * 1000:.0f} ms is {floor.messages_per_second:,.0f} messages/s, "
        f"{floor.cores:.2f} cores for bare gRPC alone (no engine, no parsing); with the "
        f"writer: {writer_cores + floor.cores:.2f} of {cores} cores"
        for floor in floors
    )
    return notes


@dataclass
class RateResult:
    rate: float
    per_frame: int
    alone: Measurement
    shared: Measurement
    by_ack: Measurement
    by_send: Measurement


async def _at_rate(
    client: ContextEngineClient,
    server: Sidecar,
    sizes: Sizes,
    rate: float,
    per_frame: int,
    report: Report,
) -> RateResult:
    alone_session = await client.create_session(APP, USER)
    alone = await paced_writer(client, alone_session.id, rate, sizes.seconds, server)
    written, received = await _with_subscribers(client, server, sizes, rate, per_frame)
    label = f"{rate:.0f}/s, {_mode(per_frame)}"
    report.checks.append(_check(received, written.events, label))
    if per_frame != DEFAULT_MODE:
        report.notes.append(
            f"{label}: {received.live_events / max(received.live_frames, 1):.2f} events per "
            f"live frame on average ({received.live_frames:,} frames for "
            f"{received.live_events:,} deliveries)"
        )
    by_ack: list[float] = []
    by_send: list[float] = []
    for times in received.times:
        for n in range(written.events):
            by_ack.append((times[n + 1] - written.acked[n]) * 1000)
            by_send.append((times[n + 1] - written.sent[n]) * 1000)
    alone_row = _writer_row(f"{label}: writer alone", alone, None)
    deliveries = written.events * sizes.subscribers
    return RateResult(
        rate,
        per_frame,
        alone_row,
        _writer_row(
            f"{label}: writer + {sizes.subscribers} subscribers",
            written,
            alone_row.events_per_second,
        ),
        Measurement(
            f"{label}: delivery, ack -> receipt",
            deliveries,
            written.seconds,
            tuple(by_ack),
            client_cpu_seconds=received.cpu_seconds,
        ),
        Measurement(
            f"{label}: delivery, send -> receipt", deliveries, written.seconds, tuple(by_send)
        ),
    )


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = Report(
        "subscribe",
        parameters={
            "seconds_per_workload": sizes.seconds,
            "offered_events_per_second": list(sizes.rates),
            "subscribers": sizes.subscribers,
            "subscriber_channels": sizes.channels,
            "replay_events": sizes.replay_events,
            "grpc_floor_periods_ms": [period * 1000 for period in FLOOR_PERIODS],
            "modes": "default (client default: up to 256 events per message, split by the "
            "client), per message (max_events_per_frame=1)",
            "quick": options.quick,
        },
    )
    with tempfile.TemporaryDirectory(prefix="ce-bench-sub-") as tmp:
        async with (
            Sidecar(Path(tmp), "subscribe", start_timeout=START_TIMEOUT_SECONDS) as server,
            ContextEngineClient(server.target, attempts=1) as client,
        ):
            await client.wait_ready(START_TIMEOUT_SECONDS)
            warmup = await client.create_session(APP, USER, "warm-up")
            for n in range(200):
                await client.append_event(APP, USER, warmup.id, event(n))
            results = [
                await _at_rate(client, server, sizes, rate, DEFAULT_MODE, report)
                for rate in sizes.rates
            ]
            # The same issue workload, one message per event: what batching changes.
            per_event = await _at_rate(
                client, server, sizes, sizes.rates[0], PER_MESSAGE_MODE, report
            )
            replays = [
                await _replay_capacity(client, server, sizes, per_frame, report)
                for per_frame in (DEFAULT_MODE, PER_MESSAGE_MODE)
            ]
    floors = [
        floor
        for period in FLOOR_PERIODS
        if (
            floor := await grpc_floor.measure(
                streams=sizes.subscribers,
                channels=sizes.channels,
                period=period,
                seconds=sizes.seconds,
                message_bytes=_frame_bytes(ISSUE_RATE * period),
            )
        )
        is not None
    ]

    results.insert(1, per_event)
    for result in results:
        report.measurements.extend([result.alone, result.shared, result.by_ack, result.by_send])
    report.measurements.extend(replays)
    report.measurements.extend(_floor_row(floor) for floor in floors)
    issue = results[0]
    p99 = issue.by_ack.percentile_ms(0.99) or 0.0
    report.targets.extend(
        [
            Target(
                f"{issue.rate:.0f}/s, {_mode(issue.per_frame)}: writer throughput with "
                f"{sizes.subscribers} subscribers / alone",
                issue.shared.ratio or 0.0,
                THROUGHPUT_RATIO_TARGET,
                "x",
            ),
            Target(
                f"{issue.rate:.0f}/s, {_mode(issue.per_frame)}: p99 delivery latency headroom, "
                f"{P99_TARGET_MS:.0f} ms / p99 (ack -> receipt)",
                P99_TARGET_MS / p99 if p99 > 0 else math.inf,
                1.0,
                "x",
            ),
        ]
    )
    for result in results:
        report.notes.append(
            f"{result.rate:.0f}/s offered, {_mode(result.per_frame)}: writer {result.alone.events_per_second:,.0f}/s alone, "
            f"{result.shared.events_per_second:,.0f}/s with {sizes.subscribers} subscribers; "
            f"delivery after the acknowledgement p50 {result.by_ack.percentile_ms(0.5):.2f} ms, "
            f"p99 {result.by_ack.percentile_ms(0.99):.2f} ms; after the send p99 "
            f"{result.by_send.percentile_ms(0.99):.2f} ms"
        )
    report.notes.extend(
        [
            "'vs ADK' is the writer's rate with subscribers relative to the writer alone at the "
            "same offered rate; the writer is paced, so 1.00x means it kept its pace",
            "p50/p99 of writer rows: the append's round trip (send -> acknowledgement); of "
            "delivery rows: per (event, subscriber)",
            "sidecar, writer and subscribers are three processes sharing this machine's CPUs; "
            "per message, every event is one gRPC message per subscriber, so the sidecar sends "
            "rate x subscribers messages per second; by default a message carries the events "
            "recorded since the subscriber's previous one, and the sidecar spaces each "
            "subscriber's messages out when its event loop is busy (see "
            "docs/design/subscriptions.md)",
        ]
    )
    report.notes.extend(_budget_notes(issue, floors))
    for replay in replays:
        report.notes.append(
            f"{replay.name}: events per second the sidecar delivers when nothing else happens "
            f"(its ceiling on this machine): {replay.events_per_second:,.0f}/s, "
            f"{(replay.server_cpu_seconds or 0) / max(replay.events, 1) * 1e6:.1f} us of "
            "sidecar CPU per delivered event"
        )
    return report
