"""Fan-out of committed changes to subscribers, each with a bounded buffer.

The broadcaster is a commit listener of the store: it runs on the event loop right after each
commit, in commit order, and must never block the writer. So it only appends references to the
committed changes to each interested subscriber's buffer (the changes themselves are shared, never
copied per subscriber) and wakes the subscriber up. A subscriber whose buffer would exceed its
capacity is not waited for: it is ended as *lagged* and removed at once, and its reader resumes
from the store (see the subscription service). A buffer that is empty accepts a commit of any
size, so one large atomic append never ends a subscriber that is keeping up.

Subscribers are found by route: the session, the user (app and user id) or the app of a change.
Each subscription has one route and a predicate that picks the changes it wants among those.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from collections.abc import Callable, Sequence

from contextengine.errors import ContextEngineError
from contextengine.store import Change, EventStore, LoggedEvent, SessionKey

#: ("session", app, user, session) | ("user", app, user) | ("app", app)
Route = tuple[str, ...]
Accept = Callable[[Change], bool]

_LOG = logging.getLogger("contextengine.subscriptions")

#: asyncio may run a timer up to its clock resolution early
_TIMER_SLACK = 0.001


def session_route(key: SessionKey) -> Route:
    return ("session", key.app_name, key.user_id, key.session_id)


def user_route(app_name: str, user_id: str) -> Route:
    return ("user", app_name, user_id)


def app_route(app_name: str) -> Route:
    return ("app", app_name)


def _routes_of(key: SessionKey) -> tuple[Route, Route, Route]:
    return session_route(key), user_route(key.app_name, key.user_id), app_route(key.app_name)


class EndReason(enum.Enum):
    #: the subscriber fell further behind than its capacity
    LAGGED = "lagged"
    #: the server is shutting down
    SHUTDOWN = "shutdown"


class SubscriptionEndedError(Exception):
    """Raised by ``Subscription.next`` once the subscription has ended."""

    def __init__(self, reason: EndReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


class Subscription:
    """One subscriber's buffer of committed changes, in commit order. Created by
    ``Broadcaster.subscribe``; ``close`` it when done (idempotent)."""

    def __init__(
        self, broadcaster: Broadcaster, route: Route, accept: Accept, capacity: int
    ) -> None:
        self.route = route
        self.accept = accept
        self.capacity = capacity
        #: the latest event routed here, whether accepted or not
        self.last_seen: LoggedEvent | None = None
        self.ended: EndReason | None = None
        self._broadcaster = broadcaster
        self._batches: deque[list[Change]] = deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        #: loop time at which ``next`` reports idleness, once nothing was returned since
        self._idle_at: float | None = None
        #: wakes the reader at ``_idle_at``; re-armed lazily, not per change (that is the hot path)
        self._timer: asyncio.TimerHandle | None = None

    @property
    def buffered(self) -> int:
        """Changes waiting in the buffer."""
        return self._buffered

    def offer(self, batch: list[Change]) -> None:
        """Adds one commit's accepted changes; never blocks. Ends the subscription as lagged when
        the buffer is not empty and would exceed its capacity."""
        if self.ended is not None:
            return
        if self._batches and self._buffered + len(batch) > self.capacity:
            self.end(EndReason.LAGGED)
            return
        self._batches.append(batch)
        self._buffered += len(batch)
        self._wake()

    def end(self, reason: EndReason) -> None:
        """Ends the subscription: drops the buffer, unregisters, wakes the reader."""
        if self.ended is not None:
            return
        self.ended = reason
        self._release()
        self._wake()

    async def next(self, idle_seconds: float) -> list[Change] | None:
        """The next commit's changes, or None once ``next`` has returned nothing for
        ``idle_seconds`` (time for a heartbeat). Raises ``SubscriptionEndedError`` once the
        subscription has ended."""
        loop = asyncio.get_running_loop()
        if self._idle_at is None:
            self._idle_at = loop.time() + idle_seconds
        while True:
            if self.ended is not None:
                raise SubscriptionEndedError(self.ended)
            if self._batches:
                batch = self._batches.popleft()
                self._buffered -= len(batch)
                self._idle_at = loop.time() + idle_seconds
                return batch
            now = loop.time()
            if now + _TIMER_SLACK >= self._idle_at:
                self._idle_at = now + idle_seconds
                return None
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiter = waiter
            if self._timer is None:
                self._timer = loop.call_at(self._idle_at, self._on_timer)
            try:
                await waiter
            finally:
                self._waiter = None

    def poll(self) -> list[Change] | None:
        """The next commit's changes if they are already buffered, else None; never waits (and
        returns None once ended: ``next`` then raises)."""
        if self.ended is not None or not self._batches:
            return None
        batch = self._batches.popleft()
        self._buffered -= len(batch)
        return batch

    def close(self) -> None:
        """Unregisters (the reader is done). Idempotent."""
        self._release()

    def _release(self) -> None:
        self._batches.clear()
        self._buffered = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._broadcaster._remove(self)

    def _on_timer(self) -> None:
        self._timer = None
        if self._waiter is None or self._idle_at is None or self.ended is not None:
            return  # the reader is busy, or gone: its next ``next`` re-arms
        loop = asyncio.get_running_loop()
        if loop.time() + _TIMER_SLACK >= self._idle_at:
            self._wake()
        else:
            self._timer = loop.call_at(self._idle_at, self._on_timer)

    def _wake(self) -> None:
        if self._waiter is not None:
            _resolve(self._waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Broadcaster:
    """Routes every commit of ``store`` to the subscriptions that want it."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self._routes: dict[Route, dict[Subscription, None]] = {}
        self._count = 0
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._unlisten: Callable[[], None] | None = None

    @property
    def active(self) -> int:
        """How many subscriptions are registered."""
        return self._count

    def start(self) -> None:
        if self._unlisten is None:
            self._unlisten = self._store.add_commit_listener(self._on_commit)

    def subscribe(self, route: Route, accept: Accept, capacity: int) -> Subscription:
        """Registers a subscription: from now on every committed change on ``route`` for which
        ``accept`` is true is buffered for it. Raises SHUTTING_DOWN once ``shutdown`` began."""
        if self._closed:
            raise ContextEngineError("SHUTTING_DOWN", "the server is shutting down")
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        subscription = Subscription(self, route, accept, capacity)
        self._routes.setdefault(route, {})[subscription] = None
        self._count += 1
        self._idle.clear()
        return subscription

    async def shutdown(self, grace_seconds: float) -> None:
        """Refuses new subscriptions, ends every open one (their readers end their streams with
        UNAVAILABLE) and waits up to ``grace_seconds`` for the readers to let go."""
        self._closed = True
        for subscriptions in list(self._routes.values()):
            for subscription in list(subscriptions):
                subscription.end(EndReason.SHUTDOWN)
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        try:
            async with asyncio.timeout(grace_seconds):
                await self._idle.wait()
        except TimeoutError:
            pass

    def _remove(self, subscription: Subscription) -> None:
        subscriptions = self._routes.get(subscription.route)
        if subscriptions is None or subscription not in subscriptions:
            return
        del subscriptions[subscription]
        self._count -= 1
        if not subscriptions:
            del self._routes[subscription.route]
        if self._count == 0:
            self._idle.set()

    def _on_commit(self, changes: Sequence[Change]) -> None:
        if not self._routes:
            return
        accepted: dict[Subscription, list[Change]] = {}
        failed: list[Subscription] = []
        for change in changes:
            seen = change if isinstance(change, LoggedEvent) else None
            for route in _routes_of(change.key):
                subscriptions = self._routes.get(route)
                if not subscriptions:
                    continue
                for subscription in subscriptions:
                    if seen is not None:
                        subscription.last_seen = seen
                    try:
                        wanted = subscription.accept(change)
                    except Exception:
                        # Never skip silently: the subscriber goes back to the store, where the
                        # same change will fail its stream with an error it can see.
                        _LOG.exception("a subscription's filter failed")
                        failed.append(subscription)
                        continue
                    if wanted:
                        accepted.setdefault(subscription, []).append(change)
        for subscription in failed:
            subscription.end(EndReason.LAGGED)
        for subscription, batch in accepted.items():
            subscription.offer(batch)
