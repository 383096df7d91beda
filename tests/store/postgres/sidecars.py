"""Several real ``contextengine serve`` processes on one PostgreSQL database, and what the
multi-sidecar tests do with them: subscribers that record what they receive, writers that record
what was acknowledged.

Each sidecar is ``tests.support.sidecar.Sidecar`` with ``--db postgresql://...`` (the test run's
server, ``tests.pg_server``; one database per test).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.v1 import event_pb2, subscription_service_pb2 as spb
from tests.service.helpers import text_event
from tests.support.sidecar import Sidecar

APP = "scale"
CALL_TIMEOUT = 10.0


@asynccontextmanager
async def sidecars(
    workdir: Path,
    dsn: str,
    names: tuple[str, ...] = ("a", "b"),
    args: Mapping[str, Sequence[str]] | None = None,
) -> AsyncIterator[list[Sidecar]]:
    """Started sidecars on ``dsn`` (started together: their migrations race), killed at the
    end; ``args``: more flags of ``serve`` by sidecar name."""
    started = [Sidecar(workdir, dsn, name, (args or {}).get(name, ())) for name in names]
    try:
        await asyncio.gather(*(sidecar.start() for sidecar in started))
        yield started
    finally:
        for sidecar in started:
            await sidecar.kill()


def client(sidecar: Sidecar, *, attempts: int = 1) -> ContextEngineClient:
    return ContextEngineClient(sidecar.target, attempts=attempts, timeout=CALL_TIMEOUT)


@dataclass
class Received:
    """What one subscriber received: the events in order, their cursors, ``caught_up``s."""

    events: list[spb.SubscribedEvent] = field(default_factory=list)
    caught_up: asyncio.Event = field(default_factory=asyncio.Event)
    last_cursor: str = ""

    def ids(self) -> list[str]:
        return [e.event.id for e in self.events]


async def subscribe(
    target: ContextEngineClient,
    received: Received,
    *,
    user_id: str = "",
    session_id: str = "",
    cursor: str = "",
    max_failures: int = 5,
) -> None:
    """Follows the scope (the app's, a user's, a session's) into ``received`` until cancelled."""
    frames = target.subscribe_events(
        APP, user_id, session_id, cursor=cursor, max_failures=max_failures
    )
    async with contextlib.aclosing(frames):
        async for frame in frames:
            kind = frame.WhichOneof("frame")
            if kind == "event":
                received.events.append(frame.event)
                received.last_cursor = frame.event.cursor
            elif kind == "caught_up":
                received.caught_up.set()


async def until(condition: Callable[[], bool], seconds: float = 15.0, what: str = "") -> None:
    """Waits until ``condition()`` holds (fails the test after ``seconds``)."""
    try:
        async with asyncio.timeout(seconds):
            while not condition():  # noqa: ASYNC110 - a condition, not an event
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"not within {seconds} s: {what}") from None


@dataclass
class Writer:
    """Appends numbered events to one session through one sidecar, recording what was
    acknowledged (and what was sent but cut off)."""

    target: ContextEngineClient
    user_id: str
    session_id: str
    prefix: str
    acknowledged: list[str] = field(default_factory=list)
    failures: list[ContextEngineError] = field(default_factory=list)
    #: sent, never acknowledged (the sidecar or the database went away mid-call)
    in_doubt: set[str] = field(default_factory=set)

    def event(self, n: int) -> event_pb2.Event:
        """The n-th event, with its own timestamp: a retry sends exactly the same event (one
        without a timestamp gets the client's clock on each call, and a retry of an event that
        was recorded would then conflict)."""
        return text_event(
            f"{self.prefix} {n}",
            event_id=f"{self.prefix}-{n}",
            invocation_id=f"{self.prefix}-inv-{n // 2}",
            author="user" if n % 2 == 0 else "agent",
            timestamp=time.time(),
        )

    async def write(
        self, count: int, *, pause: float = 0.0, retry: bool = False, retry_seconds: float = 30.0
    ) -> None:
        """Appends ``count`` events, one call each; ``retry``: an event whose call failed is
        sent again (the same id: idempotent) until acknowledged, for up to ``retry_seconds``
        (then the test fails with the last error)."""
        for n in range(count):
            event = self.event(n)
            deadline = time.monotonic() + retry_seconds
            while True:
                try:
                    await self.target.append_event(APP, self.user_id, self.session_id, event)
                except ContextEngineError as error:
                    self.failures.append(error)
                    self.in_doubt.add(event.id)
                    if not retry:
                        raise
                    if time.monotonic() > deadline:
                        raise AssertionError(
                            f"{event.id} not acknowledged within {retry_seconds} s: {error}"
                        ) from error
                    await asyncio.sleep(0.1)
                    continue
                self.in_doubt.discard(event.id)
                self.acknowledged.append(event.id)
                break
            if pause:
                await asyncio.sleep(pause)
