"""Fan-out of committed changes to subscribers, each with a bounded buffer.

The broadcaster is a commit listener of the store: it runs on the event loop right after each
commit, in commit order, and must never block the writer. So it only appends a reference to the
committed changes to the log of each interested group of subscribers (the changes themselves are
shared, never copied per subscriber) and wakes up the subscribers that were waiting with nothing
buffered. A subscriber whose buffer would exceed its capacity, in changes or in bytes (the encoded
size of the events it holds), is not waited for: it is ended as *lagged* and removed at once, and
its reader resumes from the store (see the subscription service). So what a stalled subscriber
pins in memory is bounded by its byte budget, whatever the size of the events. A buffer that is
empty accepts a commit of any size, so one large atomic append never ends a subscriber that is
keeping up.

Subscribers are found by route: the session, the user (app and user id) or the app of a change.
Each subscription has one route and a predicate that picks the changes it wants among those.
Subscriptions of a route that declare the same ``group`` (the same predicate, e.g. the same
filters) share the work: the predicate runs once per change for the whole group, the group keeps
one log of the commits its members have not all taken (``_Group``), and a member's buffer is its
place in that log. Every member gets the very same ``Batch`` of a commit, on which readers cache
what they derive from it (the event stream keeps the commit's encoded frames there). So a commit
costs a group the same whatever its number of members, plus a wake-up for each member that was
idle; a member that is busy sending, or waiting for its pacer's turn, is not touched until it
reads.

*Paced* subscriptions (readers that send whatever is buffered in one frame) take their buffer
only on a turn handed out by the broadcaster's ``LivePacer``: under load they send fewer, fuller
frames instead of one frame per commit (see ``pacing``). Ending a subscription never waits for a
turn.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from contextengine._compat import timeout
from contextengine.core.errors import ContextEngineError
from contextengine.store import Change, Coordination, LoggedEvent, SessionKey
from contextengine.subscriptions.pacing import LivePacer

#: ("session", app, user, session) | ("user", app, user) | ("app", app)
Route = tuple[str, ...]
Accept = Callable[[Change], bool]

_LOG = logging.getLogger("contextengine.subscriptions")

#: asyncio may run a timer up to its clock resolution early
_TIMER_SLACK = 0.001

#: the log index of a subscription that left its group: past every entry, so nothing is buffered
_LEFT = sys.maxsize


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


def change_bytes(change: Change) -> int:
    """What a buffered change costs, for byte budgets: the encoded size of its event (a session's
    creation or deletion counts as nothing: it is small, and one per session)."""
    return change.event.ByteSize() if isinstance(change, LoggedEvent) else 0


class Batch(list[Change]):
    """The changes of one commit that a group of subscriptions accepted, in commit order; shared
    by every member of the group, so never modified. ``memo`` is for readers to cache what they
    derive from it (None until one does)."""

    __slots__ = ("_nbytes", "memo")

    def __init__(self, changes: Iterable[Change] = ()) -> None:
        super().__init__(changes)
        self.memo: Any = None
        self._nbytes = -1

    @property
    def nbytes(self) -> int:
        """The sum of ``change_bytes`` over the batch, computed once for the whole group."""
        if self._nbytes < 0:
            self._nbytes = sum(map(change_bytes, self))
        return self._nbytes

    @nbytes.setter
    def nbytes(self, value: int) -> None:
        self._nbytes = value


def _batch_bytes(batch: list[Change]) -> int:
    return batch.nbytes if isinstance(batch, Batch) else sum(map(change_bytes, batch))


class _Group:
    """Subscriptions of one route with the same predicate, and the one log of the commits they
    accepted that some member has not taken yet.

    The log is shared: a commit is appended once for the whole group (``offer``), whatever the
    number of members, and each member only keeps the index of the next commit it takes. So a
    commit costs the group O(1), plus a wake-up for each member that was waiting with nothing
    buffered; members that are busy sending (or waiting for a pacer's turn) are not touched. An
    entry leaves the log once every member that was there when it came has taken it (``refs``)
    or left. Each member's buffer (changes, and bytes of events) is read from the running totals
    at its index, so the capacity checks need no per-member counters either; they walk the
    members only when the log itself is longer than the smallest capacity, i.e. when some member
    may have fallen that far behind."""

    __slots__ = (
        "accept",
        "base",
        "byte_members",
        "bytes_before",
        "changes_before",
        "idle",
        "log",
        "members",
        "min_capacity",
        "min_capacity_bytes",
        "refs",
        "total_bytes",
        "total_changes",
    )

    def __init__(self, accept: Accept) -> None:
        self.accept = accept
        self.members: dict[Subscription, None] = {}
        #: members waiting in ``next`` with nothing buffered: the ones a commit wakes
        self.idle: dict[Subscription, None] = {}
        #: the commits some member has not taken, oldest first; ``base`` is the index of the first
        self.log: deque[list[Change]] = deque()
        self.base = 0
        #: per entry: how many members still have to take it
        self.refs: deque[int] = deque()
        #: per entry: the changes (and bytes of events) of every entry before it, since the start
        self.changes_before: deque[int] = deque()
        self.bytes_before: deque[int] = deque()
        self.total_changes = 0
        self.total_bytes = 0
        #: members with a byte budget (bytes are counted only while there is one)
        self.byte_members = 0
        #: the smallest capacity of any member (may be lower than that, never higher)
        self.min_capacity = sys.maxsize
        self.min_capacity_bytes = sys.maxsize

    @property
    def end(self) -> int:
        """The index the next commit will get."""
        return self.base + len(self.log)

    def join(self, member: Subscription) -> None:
        self.members[member] = None
        member._next = self.end
        self.min_capacity = min(self.min_capacity, member.capacity)
        if member.capacity_bytes is not None:
            self.byte_members += 1
            self.min_capacity_bytes = min(self.min_capacity_bytes, member.capacity_bytes)

    def leave(self, member: Subscription) -> None:
        """Removes ``member`` (it must be one) and lets go of the entries it had not taken."""
        del self.members[member]
        self.idle.pop(member, None)
        if member.capacity_bytes is not None:
            self.byte_members -= 1
        refs, first = self.refs, member._next - self.base
        for index in range(max(0, first), len(refs)):
            refs[index] -= 1
        member._next = _LEFT
        self._trim()

    def buffered(self, member: Subscription) -> int:
        index = member._next - self.base
        if index >= len(self.log):
            return 0
        return self.total_changes - self.changes_before[index]

    def buffered_bytes(self, member: Subscription) -> int:
        index = member._next - self.base
        if index >= len(self.log) or member.capacity_bytes is None:
            return 0
        return self.total_bytes - self.bytes_before[index]

    def offer(self, batch: list[Change]) -> None:
        """Appends one commit's accepted changes for every member; never blocks. Ends as lagged
        the members whose buffer is not empty and would exceed their capacity in changes or in
        bytes."""
        count = len(batch)
        size = _batch_bytes(batch) if self.byte_members else 0
        log = self.log
        if log and (
            self.total_changes - self.changes_before[0] + count > self.min_capacity
            or (
                self.byte_members
                and self.total_bytes - self.bytes_before[0] + size > self.min_capacity_bytes
            )
        ):
            self._end_laggards(count, size)
        if not self.members:
            return
        log.append(batch)
        self.refs.append(len(self.members))
        self.changes_before.append(self.total_changes)
        self.bytes_before.append(self.total_bytes)
        self.total_changes += count
        self.total_bytes += size
        if self.idle:
            waiting = list(self.idle)
            self.idle.clear()
            for member in waiting:
                member._offered()

    def take(self, member: Subscription) -> list[Change]:
        """The next commit of ``member``, which has one buffered."""
        index = member._next - self.base
        batch = self.log[index]
        member._next += 1
        refs = self.refs
        refs[index] -= 1
        if index == 0 and refs[0] == 0:
            self._trim()
        return batch

    def _trim(self) -> None:
        refs, log = self.refs, self.log
        while refs and refs[0] <= 0:
            refs.popleft()
            log.popleft()
            self.changes_before.popleft()
            self.bytes_before.popleft()
            self.base += 1

    def _end_laggards(self, count: int, size: int) -> None:
        laggards = []
        for member in self.members:
            buffered = self.buffered(member)
            if buffered and (
                buffered + count > member.capacity
                or (
                    member.capacity_bytes is not None
                    and self.buffered_bytes(member) + size > member.capacity_bytes
                )
            ):
                laggards.append(member)
        for member in laggards:
            member.end(EndReason.LAGGED)
        self.min_capacity = min((m.capacity for m in self.members), default=sys.maxsize)
        self.min_capacity_bytes = min(
            (m.capacity_bytes for m in self.members if m.capacity_bytes is not None),
            default=sys.maxsize,
        )


class _Route:
    __slots__ = ("groups", "last_seen")

    def __init__(self) -> None:
        self.groups: dict[Hashable, _Group] = {}
        #: the latest event routed here
        self.last_seen: LoggedEvent | None = None


class Subscription:
    """One subscriber's place in its group's log of committed changes, in commit order (its
    buffer: the commits from there on). Created by ``Broadcaster.subscribe``; ``close`` it when
    done (idempotent)."""

    __slots__ = (
        "_broadcaster",
        "_group",
        "_group_key",
        "_idle_at",
        "_next",
        "_queued",
        "_record",
        "_timer",
        "_turn",
        "_waiter",
        "capacity",
        "capacity_bytes",
        "ended",
        "paced",
        "route",
    )

    def __init__(
        self,
        broadcaster: Broadcaster,
        route: Route,
        capacity: int,
        paced: bool,
        record: _Route,
        group_key: Hashable,
        group: _Group,
        capacity_bytes: int | None = None,
    ) -> None:
        self.route = route
        self.capacity = capacity
        #: bytes of events (``change_bytes``) the buffer may hold; None: no byte budget
        self.capacity_bytes = capacity_bytes
        #: takes its buffer only on a turn of the broadcaster's pacer
        self.paced = paced
        self.ended: EndReason | None = None
        self._broadcaster = broadcaster
        self._record = record
        self._group_key = group_key
        self._group = group
        #: the index in the group's log of the next commit to take (set by ``_Group.join``)
        self._next = 0
        self._waiter: asyncio.Future[None] | None = None
        #: loop time at which ``next`` reports idleness, once nothing was returned since
        self._idle_at: float | None = None
        #: wakes the reader at ``_idle_at``; re-armed lazily, not per change (that is the hot path)
        self._timer: asyncio.TimerHandle | None = None
        #: paced: a turn was handed out and not used yet
        self._turn = False
        #: paced: queued for a turn
        self._queued = False

    @property
    def buffered(self) -> int:
        """Changes waiting in the buffer."""
        return self._group.buffered(self)

    @property
    def buffered_bytes(self) -> int:
        """Bytes of the events waiting in the buffer (0 without a byte budget)."""
        return self._group.buffered_bytes(self)

    @property
    def last_seen(self) -> LoggedEvent | None:
        """The latest event routed to this subscription's route, whether accepted or not (it
        may predate the subscription: readers only compare it with what they have sent)."""
        return self._record.last_seen

    def end(self, reason: EndReason) -> None:
        """Ends the subscription: drops the buffer, unregisters, wakes the reader."""
        if self.ended is not None:
            return
        self.ended = reason
        if reason is EndReason.LAGGED:
            self._broadcaster.lagged_total += 1
        self._release()
        self._wake()

    async def next(self, idle_seconds: float) -> list[Change] | None:
        """The next commit's changes, or None once ``next`` has returned nothing for
        ``idle_seconds`` (time for a heartbeat). Raises ``SubscriptionEndedError`` once the
        subscription has ended. A paced subscription waits for its turn when changes are
        buffered (no heartbeat is due then)."""
        loop = asyncio.get_running_loop()
        if self._idle_at is None:
            self._idle_at = loop.time() + idle_seconds
        group = self._group
        while True:
            if self.ended is not None:
                raise SubscriptionEndedError(self.ended)
            empty = self._next >= group.base + len(group.log)
            if not empty:
                if not self.paced or self._turn or (not self._queued and self._ask()):
                    self._turn = False
                    batch = group.take(self)
                    self._idle_at = loop.time() + idle_seconds
                    return batch
            else:
                now = loop.time()
                if now + _TIMER_SLACK >= self._idle_at:
                    self._idle_at = now + idle_seconds
                    return None
                if self._timer is None:
                    self._timer = loop.call_at(self._idle_at, self._on_timer)
                if self._next != _LEFT:
                    group.idle[self] = None
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiter = waiter
            try:
                await waiter
            finally:
                self._waiter = None
                if empty:
                    group.idle.pop(self, None)

    def poll(self) -> list[Change] | None:
        """The next commit's changes if they are already buffered, else None; never waits (and
        returns None once ended: ``next`` then raises). For a paced subscription: part of the
        turn of the ``next`` that just returned."""
        group = self._group
        if self.ended is not None or self._next >= group.base + len(group.log):
            return None
        return group.take(self)

    def close(self) -> None:
        """Unregisters (the reader is done). Idempotent."""
        self._release()

    def _offered(self) -> None:
        """A commit came while ``next`` waited with nothing buffered."""
        waiter = self._waiter
        if (
            waiter is not None
            and not waiter.done()
            and (not self.paced or self._turn or (not self._queued and self._ask()))
        ):
            waiter.set_result(None)

    def _ask(self) -> bool:
        """A turn now (True, and ``_turn`` is set), or queued for one (False)."""
        pacer = self._broadcaster.pacer
        if pacer.try_turn(asyncio.get_running_loop().time()):
            self._turn = True
            return True
        self._queued = True
        pacer.wait_turn(self)
        return False

    def _take_turn(self) -> bool:
        if not self._queued:
            return False  # ended or closed meanwhile
        self._queued = False
        self._turn = True
        self._wake()
        return True

    def _release(self) -> None:
        self._queued = False
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

    def __init__(self, store: Coordination, pacer: LivePacer | None = None) -> None:
        self._store = store
        self._routes: dict[Route, _Route] = {}
        self._count = 0
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._unlisten: Callable[[], None] | None = None
        #: hands out the turns of paced subscriptions
        self.pacer = pacer if pacer is not None else LivePacer()
        #: subscriptions ended as lagged since the start (read by the sidecar's metrics)
        self.lagged_total = 0

    @property
    def active(self) -> int:
        """How many subscriptions are registered."""
        return self._count

    def buffered_bytes(self) -> int:
        """The encoded bytes of the events every subscription holds (walks them: for metrics
        scrapes, not hot paths)."""
        return sum(
            member.buffered_bytes
            for record in self._routes.values()
            for group in record.groups.values()
            for member in group.members
        )

    def start(self) -> None:
        if self._unlisten is None:
            self._unlisten = self._store.add_commit_listener(self._on_commit)

    def subscribe(
        self,
        route: Route,
        accept: Accept,
        capacity: int,
        *,
        capacity_bytes: int | None = None,
        group: Hashable | None = None,
        paced: bool = False,
    ) -> Subscription:
        """Registers a subscription: from now on every committed change on ``route`` for which
        ``accept`` is true is buffered for it, up to ``capacity`` changes and ``capacity_bytes``
        bytes of events (None: no byte budget) before it ends as lagged. Subscriptions of a route with the same ``group``
        (not None) must accept the same changes: the predicate of the first one serves them all.
        ``paced``: the reader takes the buffer only on a turn of ``pacer`` (see ``next``).
        Raises SHUTTING_DOWN once ``shutdown`` began."""
        if self._closed:
            raise ContextEngineError("SHUTTING_DOWN", "the server is shutting down")
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        if capacity_bytes is not None and capacity_bytes < 1:
            raise ValueError("capacity_bytes must be at least 1")
        record = self._routes.get(route)
        if record is None:
            record = self._routes[route] = _Route()
        key: Hashable = group if group is not None else object()
        members = record.groups.get(key)
        if members is None:
            members = record.groups[key] = _Group(accept)
        subscription = Subscription(
            self, route, capacity, paced, record, key, members, capacity_bytes
        )
        members.join(subscription)
        self._count += 1
        if paced:
            self.pacer.members += 1
        self._idle.clear()
        return subscription

    async def shutdown(self, grace_seconds: float) -> None:
        """Refuses new subscriptions, ends every open one (their readers end their streams with
        UNAVAILABLE) and waits up to ``grace_seconds`` for the readers to let go."""
        self._closed = True
        for subscription in [
            member
            for record in list(self._routes.values())
            for group in list(record.groups.values())
            for member in group.members
        ]:
            subscription.end(EndReason.SHUTDOWN)
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        try:
            async with timeout(grace_seconds):
                await self._idle.wait()
        except TimeoutError:
            pass

    def _remove(self, subscription: Subscription) -> None:
        group = subscription._group
        if subscription not in group.members:
            return
        group.leave(subscription)
        self._count -= 1
        if subscription.paced:
            self.pacer.members -= 1
        if not group.members:
            record = subscription._record
            if record.groups.get(subscription._group_key) is group:
                del record.groups[subscription._group_key]
            if not record.groups and self._routes.get(subscription.route) is record:
                del self._routes[subscription.route]
        if self._count == 0:
            self._idle.set()

    def _on_commit(self, changes: Sequence[Change]) -> None:
        routes = self._routes
        if not routes:
            return
        accepted: dict[_Group, Batch] = {}
        failed: list[_Group] = []
        for change in changes:
            seen = change if isinstance(change, LoggedEvent) else None
            for route in _routes_of(change.key):
                record = routes.get(route)
                if record is None:
                    continue
                if seen is not None:
                    record.last_seen = seen
                for group in record.groups.values():
                    try:
                        wanted = group.accept(change)
                    except Exception:
                        # Never skip silently: the subscriber goes back to the store, where the
                        # same change will fail its stream with an error it can see.
                        _LOG.exception("a subscription's filter failed")
                        failed.append(group)
                        continue
                    if wanted:
                        batch = accepted.get(group)
                        if batch is None:
                            batch = accepted[group] = Batch()
                        batch.append(change)
        for group in failed:
            for subscription in list(group.members):
                subscription.end(EndReason.LAGGED)
        if len(accepted) > 1:
            # Groups of one change (state watches, differing filters) share its size.
            sizes: dict[int, int] = {}
            for batch in accepted.values():
                total = 0
                for change in batch:
                    size = sizes.get(id(change))
                    if size is None:
                        size = sizes[id(change)] = change_bytes(change)
                    total += size
                batch.nbytes = total
        for group, batch in accepted.items():
            group.offer(batch)
