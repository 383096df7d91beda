"""Subscriptions: 100 subscribers follow one session; what the fan-out costs against bare gRPC.

The sidecar runs as a separate process (``python -m contextengine serve``, SQLite, default
durability), on the asyncio event loop and then on uvloop (``--event-loop uvloop``, when uvloop is
installed), each in the same run. The writer (this process) appends one event at a time, paced:
event ``i`` is sent at ``start + i / rate`` s, or at once when the writer is behind; it writes for a
fixed time, so a writer that cannot keep the pace simply writes fewer events. The subscribers run
in another process: 100 ``subscribe_events`` streams of the Python client over 4 channels, each
following the session from its first event. Every process stamps times with the same system-wide
monotonic clock, so times compare across processes.

Workloads, each on a fresh session: 100 subscribers x 100 events/s and x 500 events/s with
batched frames (``max_events_per_frame=256``, what the client asks for on the wire by default;
given explicitly so that the subscribers see the wire's frames and count them: the server paces
busy subscribers, so a message carries what was recorded since the previous one), and 100 x
100 events/s with one message per event (``max_events_per_frame=1``: never batched, never paced).
Each workload runs the writer alone first, then the writer with the subscribers.

The fan-out's CPU is the sidecar's CPU from the writer's first append until every subscriber has
every event, minus what the same number of appends cost it with nobody subscribed (the writer
alone, just before): what the subscriptions add. It is given per delivered message (a gRPC message
to one subscriber) and per delivered event (an event to one subscriber), beside **the floor**
(``grpc_floor``): a bare ``grpc.aio`` server process streaming the same number of streams the same
bytes (the mean frame size of the workload) at the same message rate (the workload's messages per
stream and second), its server CPU per message; and the ratio of the two, which the issue wants
within 1.2x.

Rows are labelled with the loop, the rate and the mode:

* ``writer alone`` / ``writer + N subscribers``: the paced writer; "vs ADK" is the rate with
  subscribers over the rate alone (1.00x: it kept its pace).
* ``delivery, ack -> receipt``: per event and subscriber, from the writer having the append's
  acknowledgement to the subscriber having the event (negative when the event reached the
  subscriber first: the store notifies subscribers before it answers the writer); p50/p99.
* ``fan-out per message``: the fan-out's sidecar CPU per delivered message ("server CPU us/ev").
* ``bare gRPC floor``: the floor's server CPU per message.

When the machine has more than 2 cores the workloads run once more with the subscriber process
pinned to cores of its own (``os.sched_setaffinity``), the sidecar and the writer to the others.

Data checks: every subscriber received every event exactly once and in order, and the writer's
events got the sequences 1..n.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import multiprocessing
import os
import tempfile
import time
from array import array
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from bench import DataCheckError, Measurement, Options, Report, Target, grpc_floor
from bench.sidecar import Sidecar, profile_summary
from contextengine.client import ContextEngineClient
from contextengine.store import MemoryStore, SessionKey
from contextengine.subscriptions.broadcaster import Broadcaster, Subscription, session_route
from contextengine.v1 import content_pb2, event_pb2

APP = "bench"
USER = "user-1"

#: the issue's targets: fan-out CPU per message within 1.2x of the floor
FLOOR_RATIO_TARGET = 1.2
START_TIMEOUT_SECONDS = 30.0
#: how long subscribers get, after the writer stopped, to receive the last event
DRAIN_TIMEOUT_SECONDS = 120.0
#: what the Python client asks for on the wire by default (it then splits the frames)
WIRE_BATCH = 256
PER_MESSAGE_MODE = 1
#: (offered events per second, max_events_per_frame)
WORKLOADS = ((100.0, WIRE_BATCH), (500.0, WIRE_BATCH), (100.0, PER_MESSAGE_MODE))


@dataclass(frozen=True)
class Sizes:
    #: how long the writer writes, per workload
    seconds: float
    subscribers: int
    #: channels the subscribers share
    channels: int


FULL_SIZES = Sizes(seconds=6.0, subscribers=100, channels=4)
QUICK_SIZES = Sizes(seconds=2.0, subscribers=100, channels=4)


def loops() -> tuple[str, ...]:
    """The event loops the sidecar is measured on: asyncio, and uvloop when installed."""
    return ("asyncio", "uvloop") if importlib.util.find_spec("uvloop") else ("asyncio",)


@dataclass(eq=False)
class LoopSidecar(Sidecar):
    """The sidecar on the event loop ``event_loop`` (``serve --event-loop``)."""

    event_loop: str = "asyncio"

    def command(self, profile_file: Path | None = None) -> list[str]:
        command = super().command(profile_file)
        if self.event_loop != "asyncio":
            command += ["--event-loop", self.event_loop]
        return command

    def pin(self, cores: set[int]) -> None:
        """Pins the running process (all its threads) to ``cores``."""
        process = self._process
        if process is not None:
            for tid in os.listdir(f"/proc/{process.pid}/task"):
                os.sched_setaffinity(int(tid), cores)


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
    #: the encoded bytes of those frames
    live_bytes: int
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
    cores: set[int] | None = None,
) -> None:
    """Entry point of the subscriber process (pinned to ``cores`` when given). Sends "ready" once
    every subscriber is caught up, then receives the number of events written, and answers with a
    ``Received``."""
    if cores is not None:
        os.sched_setaffinity(0, cores)
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
    live_frames = live_events = live_bytes = 0
    ready = asyncio.Event()
    #: the number of events written, once the writer is done
    goal = math.inf
    done = asyncio.Event()

    def check_done() -> None:
        if min(last) >= goal:
            done.set()

    async def follow(k: int, client: ContextEngineClient) -> None:
        nonlocal out_of_order, live_frames, live_events, live_bytes
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
                        live_bytes += frame.ByteSize()
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
    return Received(
        times, resubscriptions, out_of_order, live_frames, live_events, live_bytes, cpu_seconds
    )


# The workloads ---------------------------------------------------------------------------------


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
        self,
        target: str,
        session_id: str,
        sizes: Sizes,
        capacity: int,
        per_frame: int,
        cores: set[int] | None,
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
                cores,
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


def _mode(per_frame: int) -> str:
    return "per message" if per_frame == 1 else f"batched x{per_frame}"


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


@dataclass
class FanOut:
    """One workload on one loop: the writer alone, with subscribers, and the fan-out's cost."""

    label: str
    loop: str
    rate: float
    per_frame: int
    alone: Measurement
    shared: Measurement
    by_ack: Measurement
    #: the sidecar's CPU the subscriptions added (see the module's doc)
    fanout_cpu_seconds: float
    #: gRPC messages delivered (frames with events, all subscribers) and events delivered
    messages: int
    deliveries: int
    message_bytes: float
    #: seconds from the first append until the subscribers had everything
    seconds: float
    subscribers: int
    #: the bare gRPC floor, every stream at the same instants and spread over the period
    floor: grpc_floor.Floor | None = None
    floor_spread: grpc_floor.Floor | None = None

    @property
    def per_message_us(self) -> float:
        return self.fanout_cpu_seconds / max(self.messages, 1) * 1e6

    @property
    def per_event_us(self) -> float:
        return self.fanout_cpu_seconds / max(self.deliveries, 1) * 1e6

    @property
    def period(self) -> float:
        """Seconds between two messages of one stream, on average."""
        return self.subscribers * self.seconds / max(self.messages, 1)

    @property
    def floor_us(self) -> float | None:
        return _per_message_us(self.floor)

    @property
    def ratio(self) -> float | None:
        """Fan-out CPU per message over the floor's (the issue's ratio)."""
        floor = self.floor_us
        return None if floor is None or floor <= 0 else self.per_message_us / floor

    @property
    def spread_ratio(self) -> float | None:
        floor = _per_message_us(self.floor_spread)
        return None if floor is None or floor <= 0 else self.per_message_us / floor

    @property
    def beyond_floor_per_event_us(self) -> float | None:
        """The fan-out's CPU beyond the floor's for the same messages, per delivered event."""
        floor = self.floor_us
        if floor is None:
            return None
        return (self.per_message_us - floor) * self.messages / max(self.deliveries, 1)


def _per_message_us(floor: grpc_floor.Floor | None) -> float | None:
    if floor is None or not floor.messages:
        return None
    return floor.server_cpu_seconds / floor.messages * 1e6


async def _fan_out(
    client: ContextEngineClient,
    server: LoopSidecar,
    sizes: Sizes,
    rate: float,
    per_frame: int,
    cores: set[int] | None,
    report: Report,
) -> FanOut:
    pinned = "" if cores is None else ", subscribers pinned"
    label = f"{server.event_loop}{pinned}, {rate:.0f}/s, {_mode(per_frame)}"
    alone_session = await client.create_session(APP, USER)
    alone = await paced_writer(client, alone_session.id, rate, sizes.seconds, server)
    session = await client.create_session(APP, USER)
    capacity = math.ceil(rate * sizes.seconds) + 1
    subscribers = Subscribers(server.target, session.id, sizes, capacity, per_frame, cores)
    try:
        await subscribers.start()
        cpu_before = server.cpu_seconds()
        start = now()
        written = await paced_writer(client, session.id, rate, sizes.seconds, server)
        received = await subscribers.finish(written.events)
        cpu_after = server.cpu_seconds()
    finally:
        await subscribers.stop()
    report.checks.append(_check(received, written.events, label))
    last = max(t for per in received.times for t in per[1 : written.events + 1])
    if cpu_before is None or cpu_after is None or alone.server_cpu_seconds is None:
        raise RuntimeError("the sidecar's CPU time cannot be read (no /proc)")
    per_append = alone.server_cpu_seconds / max(alone.events, 1)
    fanout_cpu = (cpu_after - cpu_before) - per_append * written.events
    by_ack = [
        (times[n + 1] - written.acked[n]) * 1000
        for times in received.times
        for n in range(written.events)
    ]
    deliveries = written.events * sizes.subscribers
    alone_row = _writer_row(f"{label}: writer alone", alone, None)
    return FanOut(
        label,
        server.event_loop,
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
        fanout_cpu,
        received.live_frames,
        received.live_events,
        received.live_bytes / max(received.live_frames, 1),
        last - start,
        sizes.subscribers,
    )


async def _on_loop(
    event_loop: str,
    tmp: Path,
    sizes: Sizes,
    cores: tuple[set[int], set[int]] | None,
    options: Options,
    report: Report,
) -> list[FanOut]:
    """Every workload on a sidecar running ``event_loop`` (with ``cores``: the sidecar and the
    writer on the first set, the subscribers on the second)."""
    name = f"subscribe-{event_loop}" + ("-pinned" if cores else "")
    server = LoopSidecar(
        tmp,
        name,
        start_timeout=START_TIMEOUT_SECONDS,
        event_loop=event_loop,
        profile=options.profile,
    )
    async with server, ContextEngineClient(server.target, attempts=1) as client:
        if cores is not None:
            server.pin(cores[0])
            os.sched_setaffinity(0, cores[0])
        await client.wait_ready(START_TIMEOUT_SECONDS)
        warmup = await client.create_session(APP, USER, "warm-up")
        for n in range(200):
            await client.append_event(APP, USER, warmup.id, event(n))
        results = [
            await _fan_out(
                client,
                server,
                sizes,
                rate,
                per_frame,
                None if cores is None else cores[1],
                report,
            )
            for rate, per_frame in WORKLOADS
        ]
    if options.profile:
        report.notes.append(profile_summary(server.profiles, f"sidecar ({event_loop})", 30))
    return results


def _rows(result: FanOut) -> list[Measurement]:
    rows = [
        result.alone,
        result.shared,
        result.by_ack,
        Measurement(
            f"{result.label}: fan-out per message ({result.message_bytes:,.0f} B, one every "
            f"{result.period * 1000:.1f} ms per stream)",
            result.messages,
            result.seconds,
            server_cpu_seconds=result.fanout_cpu_seconds,
        ),
    ]
    for floor in (result.floor, result.floor_spread):
        if floor is not None:
            schedule = "spread over" if floor.spread else "aligned,"
            rows.append(
                Measurement(
                    f"{result.label}: bare gRPC floor ({floor.streams} streams, "
                    f"{floor.message_bytes:,} B, {schedule} every {floor.period * 1000:.1f} ms, "
                    "per message)",
                    floor.messages,
                    floor.seconds,
                    client_cpu_seconds=floor.client_cpu_seconds,
                    server_cpu_seconds=floor.server_cpu_seconds,
                )
            )
    return rows


def _summary(result: FanOut) -> str:
    floor = result.floor_us
    ratio, spread, beyond = result.ratio, result.spread_ratio, result.beyond_floor_per_event_us
    versus = (
        "no floor (no /proc)"
        if floor is None or ratio is None or spread is None or beyond is None
        else f"floor {floor:.1f} us per message, ratio {ratio:.2f}x (to the spread floor "
        f"{spread:.2f}x); {beyond:.2f} us per delivered event beyond the floor"
    )
    return (
        f"{result.label}: fan-out {result.per_message_us:.1f} us of sidecar CPU per delivered "
        f"message, {versus}; {result.per_event_us:.2f} us per delivered event "
        f"({result.deliveries / max(result.messages, 1):.1f} events per message); writer "
        f"{result.shared.ratio or 0.0:.2f}x of its rate alone "
        f"({result.shared.events_per_second:,.0f}/s of {result.rate:.0f}/s offered); delivery "
        f"p50 {result.by_ack.percentile_ms(0.5) or 0.0:.1f} ms, "
        f"p99 {result.by_ack.percentile_ms(0.99) or 0.0:.1f} ms"
    )


@dataclass(frozen=True)
class InProcess:
    """The engine's own share of the fan-out, without gRPC: one ``Broadcaster`` over an
    in-memory store, ``subscribers`` subscriptions of one group (the event streams' case), and
    the CPU of this process per delivery beyond the same appends with nobody subscribed."""

    subscribers: int
    commits: int
    #: per (commit, subscriber) with every subscriber woken by every commit (one message each)
    per_wake_us: float
    #: per delivered event with subscribers that read every ``read_period`` (a paced frame each)
    per_event_us: float
    read_period: float


async def _in_process(subscribers: int, commits: int, read_period: float) -> InProcess:
    key = SessionKey(APP, USER, "in-process")

    async def appends(store: MemoryStore, pause: float) -> float:
        start = time.process_time()
        for n in range(commits):
            await store.append_events(key, [event(n)], None)
            await asyncio.sleep(pause)
        return time.process_time() - start

    async def one(readers: int, pause: float, period: float) -> float:
        store = MemoryStore()
        await store.open()
        await store.create_session(key, {}, 1.0)
        broadcaster = Broadcaster(store)
        broadcaster.start()
        subscriptions = [
            broadcaster.subscribe(session_route(key), lambda change: True, 1 << 20, group="all")
            for _ in range(readers)
        ]

        async def read(subscription: Subscription) -> None:
            while True:
                await subscription.next(60.0)
                while subscription.poll() is not None:
                    pass
                if period:
                    await asyncio.sleep(period)

        tasks = [asyncio.create_task(read(subscription)) for subscription in subscriptions]
        try:
            return await appends(store, pause)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await broadcaster.shutdown(0.0)
            await store.close()

    pause = 0.001
    alone = await one(0, pause, 0.0)
    woken = await one(subscribers, pause, 0.0)
    paced = await one(subscribers, pause, read_period)
    deliveries = commits * subscribers
    return InProcess(
        subscribers,
        commits,
        (woken - alone) / deliveries * 1e6,
        (paced - alone) / deliveries * 1e6,
        read_period,
    )


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    cores_total = os.cpu_count() or 1
    report = Report(
        "subscribe",
        parameters={
            "seconds_per_workload": sizes.seconds,
            "workloads": [
                {"events_per_second": rate, "max_events_per_frame": per_frame}
                for rate, per_frame in WORKLOADS
            ],
            "subscribers": sizes.subscribers,
            "subscriber_channels": sizes.channels,
            "event_loops": list(loops()),
            "cpu_count": cores_total,
            "load_average_start": _load(),
            "quick": options.quick,
        },
    )
    results: list[FanOut] = []
    with tempfile.TemporaryDirectory(prefix="ce-bench-sub-") as tmp:
        for event_loop in loops():
            results += await _on_loop(event_loop, Path(tmp), sizes, None, options, report)
        if cores_total > 2:
            half = cores_total // 2
            split = (set(range(half)), set(range(half, cores_total)))
            try:
                results += await _on_loop("asyncio", Path(tmp), sizes, split, options, report)
            finally:
                os.sched_setaffinity(0, set(range(cores_total)))
    # The floors after the sidecars, so that no floor runs next to a sidecar.
    for result in results:
        for spread in (False, True):
            floor = await grpc_floor.measure(
                streams=sizes.subscribers,
                channels=sizes.channels,
                period=result.period,
                seconds=sizes.seconds,
                message_bytes=max(1, round(result.message_bytes)),
                spread=spread,
            )
            if spread:
                result.floor_spread = floor
            else:
                result.floor = floor
    engine = await _in_process(sizes.subscribers, 500 if options.quick else 2000, 0.05)
    report.parameters["load_average_end"] = _load()
    for result in results:
        report.measurements.extend(_rows(result))
        ratio = result.ratio
        if ratio is not None:
            report.targets.append(
                Target(
                    f"{result.label}: headroom, {FLOOR_RATIO_TARGET}x the floor / fan-out "
                    "CPU per message",
                    FLOOR_RATIO_TARGET / ratio,
                    1.0,
                    "x",
                )
            )
    report.notes.extend(_summary(result) for result in results)
    by_key = {(r.loop, r.rate, r.per_frame): r for r in results if r.label.count(",") == 2}
    for rate, per_frame in WORKLOADS:
        base, fast = (
            by_key.get(("asyncio", rate, per_frame)),
            by_key.get(("uvloop", rate, per_frame)),
        )
        if base is not None and fast is not None and base.ratio and fast.ratio:
            report.notes.append(
                f"uvloop / asyncio, {rate:.0f}/s {_mode(per_frame)}: fan-out per message "
                f"{fast.per_message_us / base.per_message_us:.2f}x, ratio to the floor "
                f"{base.ratio:.2f}x -> {fast.ratio:.2f}x, writer "
                f"{base.shared.ratio or 0.0:.2f}x -> {fast.shared.ratio or 0.0:.2f}x of its rate"
            )
    report.notes.append(
        f"the engine alone, without gRPC (one Broadcaster over an in-memory store, "
        f"{engine.subscribers} subscriptions of one group, {engine.commits:,} one-event "
        f"commits, CPU beyond the same appends unsubscribed): {engine.per_wake_us:.2f} us per "
        f"(commit, subscriber) when every commit wakes every subscriber (a message each), "
        f"{engine.per_event_us:.2f} us per delivered event when subscribers read every "
        f"{engine.read_period * 1000:.0f} ms (a paced frame)"
    )
    if cores_total <= 2:
        report.notes.append(
            f"this machine has {cores_total} cores: the subscribers were not pinned to cores of "
            "their own (that run needs more than 2); sidecar, writer and subscriber processes "
            "share both cores"
        )
    report.notes.extend(
        [
            "fan-out CPU = the sidecar's CPU from the first append until every subscriber had "
            "every event, minus the writer alone's sidecar CPU per append times the appends; "
            "the floor is a bare grpc.aio server (asyncio) sending every stream the workload's "
            "mean frame bytes at the workload's message rate, all streams at the same instants "
            "(the issue's ratio), and the same with the streams spread evenly over the period",
            f"load average (1, 5, 15 min) at the start {report.parameters['load_average_start']}, "
            f"at the end {report.parameters['load_average_end']}",
        ]
    )
    return report
