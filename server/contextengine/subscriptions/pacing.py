"""Pacing of live frames: how often subscribers that accept batches may send.

Every gRPC message costs the event loop about 0.1 ms (sending it, not encoding it: event frames
are encoded once for all subscribers), whatever it carries. Live, every commit would otherwise
become one message per subscriber: 100 subscribers of a session written 500 times a second would
ask the loop for 50,000 messages a second, several times what it can send next to the appends
themselves. Batched subscribers (``max_events_per_frame`` > 1) can instead take, in one frame,
everything recorded since their previous frame; the pacer decides how often they may do so.

It hands out *turns*: one turn is one take of a subscriber's buffer (one frame, seldom more). Turns
come from a token bucket of ``rate`` turns per second (up to ``burst_seconds`` worth at once), first
come first served, so that the budget is shared fairly. Subscribers queued for a turn are released
in *sweeps*: the pacer waits until the bucket holds a turn for every one of them (or is full), then
releases them together, so that their frames are written in one turn of the event loop. gRPC
sends writes made together for less than the same writes spread over time (a bare ``grpc.aio``
server here: 95-115 us per message for 100 streams written at once, 140-190 us spread evenly;
``bench/grpc_floor.py``), and the sweeps cost the appends nothing either: with 100 batched
subscribers, ``python -m bench subscribe`` gave 1.00-1.02x of the aligned floor per message at 100
events/s and 1.28-1.41x at 500/s, against 1.31-1.34x and 1.86-1.87x when turns were handed out one
by one as each was earned, the writer's rate at 500/s 0.59-0.60x of its rate alone against
0.49-0.52x (docs/design/hot-paths.md, "Sweeps"; the price: a few milliseconds more latency). A
sweep waits at most ``burst_seconds`` (and never more than the queue's turns take at the rate,
which is at least ``members / max_hold_seconds``). While turns are plentiful a subscriber takes
its turn at once, so pacing adds no delay.

The rate adapts to how busy the event loop's thread is (``demand``: the share of wall time it ran
or waited for a CPU, from Linux's schedstat; elsewhere its CPU time), measured over windows of
``window_seconds``. Above ``target_demand`` the rate goes down in proportion to the turns actually
taken; below it the rate goes back up, and once the budget no longer limits anyone there is no
limit at all. So while the loop has room (few commits, or few subscribers) every commit goes to
every subscriber at once; when it has not, subscribers get fewer, fuller frames and the appends
keep their share of the loop. A subscriber still gets a turn at least every ``max_hold_seconds``
(the rate never goes below ``members / max_hold_seconds``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol


def thread_demand() -> float:
    """Seconds the calling thread has run or waited to run (Linux schedstat; elsewhere its CPU
    time): a thread that wants a CPU and does not get one is as busy as one that runs."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stat:
            ran, waited = stat.read().split()[:2]
        return (int(ran) + int(waited)) / 1e9
    except (OSError, ValueError):
        return time.thread_time()


#: turns the clock's rounding may leave a sweep short of
_EPSILON = 1e-6


class Waiter(Protocol):
    """A subscription waiting for its turn."""

    def _take_turn(self) -> bool:
        """Called when its turn comes; False if it no longer wants one (it ended)."""
        ...


class LivePacer:
    """Turns to send live frames, shared by the paced subscriptions of one event loop. Used from
    the loop's thread only."""

    #: how far one window may raise or lower the rate
    MAX_RAISE = 1.1
    MAX_CUT = 0.7

    def __init__(
        self,
        *,
        target_demand: float = 0.75,
        rate: float = math.inf,
        adaptive: bool = True,
        window_seconds: float = 0.05,
        burst_seconds: float = 0.033,
        max_hold_seconds: float = 0.05,
        clock: Callable[[], float] = thread_demand,
    ) -> None:
        if not 0.0 < target_demand <= 1.0:
            raise ValueError("target_demand must be in (0, 1]")
        if rate <= 0.0:
            raise ValueError("rate must be positive")
        if not max_hold_seconds > 0.0:
            raise ValueError("max_hold_seconds must be positive")
        #: turns per second currently allowed (inf: no pacing)
        self.rate = rate
        self.target_demand = target_demand
        self.adaptive = adaptive
        self.window_seconds = window_seconds
        self.burst_seconds = burst_seconds
        self.max_hold_seconds = max_hold_seconds
        #: the loop thread's demand (see the module's doc), smoothed over the last windows
        self.demand = 0.0
        #: paced subscriptions registered (they set the lowest rate)
        self.members = 0
        self._clock = clock
        self._tokens = 0.0
        self._stamp = 0.0
        self._queue: deque[Waiter] = deque()
        self._timer: asyncio.Handle | None = None
        self._window_start = -math.inf
        self._window_busy = 0.0
        self._window_turns = 0
        #: windows in a row in which the rate limited nobody
        self._slack_windows = 0

    @property
    def waiting(self) -> int:
        """Subscriptions queued for a turn (some may have ended meanwhile)."""
        return len(self._queue)

    def try_turn(self, now: float) -> bool:
        """A turn right now, if one is free and nobody is queued before; else False (then call
        ``wait_turn``). ``now`` is the loop's time."""
        if now - self._window_start >= self.window_seconds:
            self._end_window(now)
        if self.rate == math.inf:
            self._window_turns += 1
            return True
        if self._queue:
            return False
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            self._window_turns += 1
            return True
        return False

    def wait_turn(self, waiter: Waiter) -> None:
        """Queues ``waiter``: its ``_take_turn`` is called when its turn comes."""
        self._queue.append(waiter)
        self._arm()

    def _refill(self, now: float) -> None:
        elapsed = now - self._stamp
        self._stamp = now
        if elapsed > 0.0:
            self._tokens = min(self._capacity(), self._tokens + elapsed * self.rate)

    def _arm(self) -> None:
        if self._timer is not None or not self._queue:
            return
        loop = asyncio.get_running_loop()
        if self.rate == math.inf:
            self._timer = loop.call_soon(self._release)
        else:
            delay = max(0.0, (self._sweep() - self._tokens) / self.rate)
            self._timer = loop.call_later(delay, self._release)

    def _capacity(self) -> float:
        """The most turns the bucket holds (at least one)."""
        return max(1.0, self.rate * self.burst_seconds)

    def _sweep(self) -> float:
        """The turns the next sweep waits for: everyone queued, as far as the bucket holds."""
        return min(float(len(self._queue)), self._capacity())

    def _release(self) -> None:
        self._timer = None
        now = asyncio.get_running_loop().time()
        if now - self._window_start >= self.window_seconds:
            self._end_window(now)
        unlimited = self.rate == math.inf
        if not unlimited:
            self._refill(now)
            if self._tokens < self._sweep() - _EPSILON:
                # More joined the queue since the timer was set: wait for their turns too.
                self._arm()
                return
        queue = self._queue
        while queue and (unlimited or self._tokens >= 1.0 - _EPSILON):
            if queue.popleft()._take_turn():
                self._window_turns += 1
                if not unlimited:
                    self._tokens -= 1.0
        self._arm()

    def _end_window(self, now: float) -> None:
        """Measures the window that ends and adapts ``rate``."""
        busy = self._clock()
        elapsed = now - self._window_start
        turns = self._window_turns
        spent = busy - self._window_busy
        self._window_start, self._window_busy, self._window_turns = now, busy, 0
        if elapsed > 20 * self.window_seconds:
            # Nothing paced for a while (or the first window): start over, unlimited.
            self.rate = self.rate if not self.adaptive else math.inf
            self.demand = 0.0
            return
        if elapsed > 4 * self.window_seconds:
            return  # a gap: nothing to learn from it
        sample = min(1.0, max(0.0, spent / elapsed))
        self.demand = sample if self.demand == 0.0 else (self.demand + sample) / 2
        if not self.adaptive:
            return
        floor = max(1.0, self.members) / self.max_hold_seconds
        taken = turns / elapsed
        target = self.target_demand
        if self.demand > target:
            # Too busy: fewer turns than were actually taken, in proportion.
            self._slack_windows = 0
            cut = max(self.MAX_CUT, target / self.demand)
            self.rate = max(floor, min(self.rate, taken) * cut)
        elif self.rate != math.inf:
            if taken < 0.5 * self.rate and not self._queue:
                self._slack_windows += 1
                if self._slack_windows >= 10:
                    self.rate = math.inf  # the budget has not been limiting anyone
                    self._slack_windows = 0
            else:
                self._slack_windows = 0
                self.rate *= min(self.MAX_RAISE, target / max(self.demand, 0.01))
