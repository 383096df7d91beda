"""kill -9 the sidecar under mixed load: appends, batches, compaction, subscriptions, memory.

The real ``contextengine serve`` (default log level) on a SQLite file, with sliding-window
compaction configured (the offline extractive summarizer). Per round, until the kill: writers
append single events and batches to four sessions and end their invocations (which schedules
compaction in the background), subscribers follow two sessions and the whole app, and a memory
writer ingests sessions into long-term memory and searches it. At a random moment the process is
killed with SIGKILL and started again on the same file, which must then hold: per session,
sequences 1..n without gaps; every acknowledged event exactly once and as sent; every event a
subscriber received (a subscriber only hears of committed events); every other event a summary
the engine appended; a context builds for every session; memory search answers; health is
SERVING. Cut-off calls are replayed (appends are idempotent by id) before the next round.

The random moments come from a fixed seed (printed; override with ``CE_CRASH_SEED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.events import payload_bytes
from contextengine.v1 import config_pb2, event_pb2
from tests.service.helpers import text_event
from tests.support.sidecar import SERVING, Sidecar, running_sidecar

pytestmark = [pytest.mark.process, pytest.mark.slow]

SEED = int(os.environ.get("CE_CRASH_SEED", "20251201"))
ROUNDS = 2
SESSIONS = [f"s{n}" for n in range(4)]
APP, USER = "mixed", "u1"
#: seconds of load before the kill, drawn uniformly from this range
KILL_AFTER = (0.8, 1.6)
CALL_TIMEOUT = 5.0
WORDS = ["harbour", "lantern", "glacier", "orchard", "compass", "meadow", "beacon", "canyon"]


@dataclass
class Ledger:
    sent: dict[str, event_pb2.Event] = field(default_factory=dict)
    #: session of each sent event
    session_of: dict[str, str] = field(default_factory=dict)
    acknowledged: set[str] = field(default_factory=set)
    #: (session, id) of every event a subscriber received
    seen: set[tuple[str, str]] = field(default_factory=set)
    batches: list[tuple[str, ...]] = field(default_factory=list)
    cut_off: list[tuple[str, list[event_pb2.Event]]] = field(default_factory=list)
    #: sessions whose ingestion into memory was acknowledged
    ingested: set[str] = field(default_factory=set)

    def new_event(self, session: str, event_id: str, invocation: str) -> event_pb2.Event:
        code = sum(map(ord, event_id))
        words = " ".join(WORDS[(code + k) % len(WORDS)] for k in range(3))
        event = text_event(
            f"{event_id}: {words}",
            author="user",
            invocation_id=invocation,
            event_id=event_id,
            timestamp=time.time(),
        )
        self.sent[event_id] = event
        self.session_of[event_id] = session
        return event


async def _append(
    client: ContextEngineClient, session: str, events: Sequence[event_pb2.Event]
) -> None:
    if len(events) == 1:
        response = await client.append_event(APP, USER, session, events[0])
        assert response.event.id == events[0].id
    else:
        batch = await client.append_events(APP, USER, session, events)
        assert [e.id for e in batch.events] == [e.id for e in events]


async def _writer(
    client: ContextEngineClient,
    ledger: Ledger,
    rng: random.Random,
    prefix: str,
    killed: asyncio.Event,
) -> None:
    """Appends invocations (a user event, then a batch of two) and ends them."""
    for n in itertools.count():
        session = rng.choice(SESSIONS)
        invocation = f"{prefix}-i{n}"
        calls = [
            [ledger.new_event(session, f"{invocation}-a", invocation)],
            [ledger.new_event(session, f"{invocation}-b{j}", invocation) for j in range(2)],
        ]
        ledger.batches.append(tuple(e.id for e in calls[1]))
        for k, events in enumerate(calls):
            try:
                await _append(client, session, events)
            except ContextEngineError:
                if not killed.is_set():
                    raise
                # This call and the invocation's later ones, to be replayed.
                ledger.cut_off.extend((session, later) for later in calls[k:])
                return
            ledger.acknowledged.update(e.id for e in events)
        try:
            await client.end_invocation(APP, USER, session, invocation)
        except ContextEngineError:
            if not killed.is_set():
                raise
            return


async def _subscriber(client: ContextEngineClient, ledger: Ledger, session: str) -> None:
    """Follows one session (or, with ``session`` "", the app) until the stream breaks."""
    with contextlib.suppress(ContextEngineError):
        async for frame in client.subscribe_events(
            APP, USER if session else "", session, max_failures=1
        ):
            if frame.HasField("event"):
                event = frame.event.event
                ledger.seen.add((session or "*", event.id))


async def _memory(client: ContextEngineClient, ledger: Ledger, killed: asyncio.Event) -> None:
    """Ingests sessions into memory and searches it, in a loop."""
    for n in itertools.count():
        session = SESSIONS[n % len(SESSIONS)]
        try:
            await client.add_session_to_memory(APP, USER, session)
            ledger.ingested.add(session)
            await client.search_memory(APP, USER, WORDS[n % len(WORDS)])
        except ContextEngineError as error:
            if killed.is_set():
                return
            if error.reason != "SESSION_NOT_FOUND":
                raise
        await asyncio.sleep(0.05)


async def _load_until_killed(
    server: Sidecar, ledger: Ledger, rng: random.Random, round_no: int
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                ContextEngineClient(server.target, attempts=1, timeout=CALL_TIMEOUT)
            )
            for _ in range(4)
        ]
        killed = asyncio.Event()
        writers = [
            asyncio.create_task(
                _writer(
                    clients[n % 2],
                    ledger,
                    random.Random(rng.getrandbits(64)),
                    f"r{round_no}w{n}",
                    killed,
                )
            )
            for n in range(4)
        ]
        others = [
            asyncio.create_task(_subscriber(clients[2], ledger, SESSIONS[0])),
            asyncio.create_task(_subscriber(clients[2], ledger, SESSIONS[1])),
            asyncio.create_task(_subscriber(clients[2], ledger, "")),
            asyncio.create_task(_memory(clients[3], ledger, killed)),
        ]
        tasks = [*writers, *others]
        try:
            await asyncio.sleep(rng.uniform(*KILL_AFTER))
            for task in tasks:
                if task.done():
                    task.result()  # a failure before the kill fails the test
            killed.set()
            await server.kill()
            async with asyncio.timeout(4 * CALL_TIMEOUT):
                await asyncio.gather(*writers)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _check(client: ContextEngineClient, ledger: Ledger, context: str) -> set[str]:
    """Checks every session's log against the ledger; returns the stored client event ids."""
    stored_ids: set[str] = set()
    summaries = 0
    for session in SESSIONS:
        stored = [e async for e in client.list_events(APP, USER, session, page_size=1000)]
        assert [e.sequence for e in stored] == list(range(1, len(stored) + 1)), (
            f"{context}: {session}: gaps or disorder"
        )
        ids = [e.id for e in stored]
        assert len(set(ids)) == len(ids), f"{context}: {session}: an event stored twice"
        for event in stored:
            sent = ledger.sent.get(event.id)
            if sent is None:
                assert event.actions.HasField("compaction"), f"{context}: unknown {event.id}"
                summaries += 1
                continue
            assert ledger.session_of[event.id] == session, f"{context}: {event.id} misplaced"
            assert payload_bytes(event) == payload_bytes(sent), f"{context}: {event.id} altered"
            stored_ids.add(event.id)
        if stored:
            await client.build_context(APP, USER, session)
    lost = sorted(ledger.acknowledged - stored_ids)
    assert not lost, f"{context}: {len(lost)} acknowledged events lost, e.g. {lost[:5]}"
    unseen = sorted(i for _, i in ledger.seen if i in ledger.sent and i not in stored_ids)
    assert not unseen, f"{context}: events a subscriber received are not stored: {unseen[:5]}"
    for batch in ledger.batches:
        present = [i in stored_ids for i in batch]
        assert all(present) or not any(present), f"{context}: batch {batch} partly stored"
    found = await client.search_memory(APP, USER, " ".join(WORDS))
    assert found.memories or not ledger.ingested, f"{context}: memory lost its ingested sessions"
    print(f"{context}: {len(stored_ids)} events, {summaries} summaries, {len(ledger.seen)} seen")
    return stored_ids


async def _replay(client: ContextEngineClient, ledger: Ledger) -> None:
    for session, events in ledger.cut_off:
        await _append(client, session, events)
        ledger.acknowledged.update(e.id for e in events)
    ledger.cut_off.clear()


async def test_acknowledged_writes_survive_kill_9_under_mixed_load(tmp_path: Path) -> None:
    print(f"mixed crash test seed: {SEED} (set CE_CRASH_SEED to repeat another run)")
    rng = random.Random(SEED)
    db = tmp_path / "ce.db"
    ledger = Ledger()
    for round_no in range(ROUNDS + 1):
        async with running_sidecar(tmp_path, db, f"round{round_no}") as server:
            async with ContextEngineClient(server.target, attempts=1, timeout=CALL_TIMEOUT) as c:
                if round_no == 0:
                    await c.update_app_config(
                        config_pb2.AppConfig(
                            app_name=APP,
                            events_compaction_config=config_pb2.EventsCompactionConfig(
                                compaction_interval=2, overlap_size=1
                            ),
                        )
                    )
                    for session in SESSIONS:
                        await c.create_session(APP, USER, session)
                else:
                    await _check(c, ledger, f"seed {SEED}, after kill {round_no}")
                    assert await server.health() == SERVING
                    await _replay(c, ledger)
                if round_no == ROUNDS:
                    assert await _check(c, ledger, "after the replays") == ledger.sent.keys()
            if round_no == ROUNDS:
                assert await server.stop() == 0, server.log()
                assert "Traceback" not in server.log(), server.log()[-6000:]
                break
            before = len(ledger.acknowledged)
            await _load_until_killed(server, ledger, rng, round_no)
            assert len(ledger.acknowledged) > before, "no append before the kill"
