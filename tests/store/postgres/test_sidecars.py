"""Two real sidecars on one PostgreSQL database behave as one engine (issue #20, item 3).

Writers on both append to the same sessions: per-session sequences stay contiguous. A subscriber
on B receives exactly once and in order what was appended through A and B, in the session, user
and app scopes, and a global cursor A gave is valid on B. A state watch on B follows A's state
changes. Both told to compact one session at once: one summary and one summarizer run. A
configuration updated on A is what B's BuildContext and compaction use next. B's incrementally
maintained context views stay equal to a fresh build after A appended and compacted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from contextengine.client import ContextEngineError
from contextengine.engine import EngineSettings, open_engine
from contextengine.v1 import config_pb2, context_service_pb2 as cpb
from tests.service.helpers import text_event
from tests.store.postgres.sidecars import APP, Received, Writer, client, sidecars, subscribe, until

pytestmark = [pytest.mark.scaling, pytest.mark.timeout(90)]


async def test_appends_through_both_reach_subscribers_on_b_once_in_order(
    tmp_path: Path, postgres_dsn: str
) -> None:
    async with sidecars(tmp_path, postgres_dsn) as (a, b), client(a) as ca, client(b) as cb:
        await ca.create_session(APP, "u1", "s1")
        await cb.create_session(APP, "u2", "s2")
        session, user, app = Received(), Received(), Received()
        watch: list[Any] = []

        async def watch_state() -> None:
            async for frame in cb.watch_session_state(APP, "u1", "s1"):
                watch.append(frame)  # noqa: PERF401 - as they arrive

        tasks = [
            asyncio.create_task(subscribe(cb, session, user_id="u1", session_id="s1")),
            asyncio.create_task(subscribe(cb, user, user_id="u1")),
            asyncio.create_task(subscribe(cb, app)),
            asyncio.create_task(watch_state()),
        ]
        try:
            for received in (session, user, app):
                await until(received.caught_up.is_set, what="caught up")
            writers = [
                Writer(ca, "u1", "s1", "a1"),
                Writer(cb, "u1", "s1", "b1"),
                Writer(ca, "u2", "s2", "a2"),
            ]
            await asyncio.gather(*(w.write(30) for w in writers))
            # State changes through A, seen by B's watch (session, user and app scope).
            for n in range(5):
                event = text_event(
                    f"state {n}",
                    event_id=f"state-{n}",
                    state_delta={"k": n, "user:k": n * 10, "app:k": n * 100},
                )
                await ca.append_event(APP, "u1", "s1", event)
            await until(lambda: len(app.events) == 95, what="the app subscriber on B")
            await until(lambda: len(session.events) == 65, what="the session subscriber")
            await until(lambda: len(user.events) == 65, what="the user subscriber")
            await until(
                lambda: _state(watch).get("k") == 4 and _state(watch).get("app:k") == 400,
                what="the state watch on B",
            )
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        # Per-session sequences: contiguous with writers on both sidecars.
        log = [e async for e in ca.list_events(APP, "u1", "s1")]
        assert [e.sequence for e in log] == list(range(1, 66))
        # Exactly once and in order, whoever appended.
        assert session.ids() == [e.id for e in log]
        assert user.ids() == [e.id for e in log]
        positions = [e.position for e in app.events]
        assert positions == sorted(set(positions))
        assert sorted(app.ids()) == sorted(
            [e.id for e in log] + [e.id async for e in cb.list_events(APP, "u2", "s2")]
        )
        assert _state(watch) == {"k": 4, "user:k": 40, "app:k": 400}
        deltas = [f for f in watch if f.WhichOneof("frame") == "delta"]
        assert [_plain(f.delta.delta)["k"] for f in deltas if "k" in f.delta.delta] == [
            0,
            1,
            2,
            3,
            4,
        ]

        # A global cursor from A is valid on B: B continues exactly after it.
        on_a = Received()
        task = asyncio.create_task(subscribe(ca, on_a))
        await until(lambda: len(on_a.events) >= 40, what="the app subscriber on A")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        resumed = Received()
        cursor = on_a.events[39].cursor
        task = asyncio.create_task(subscribe(cb, resumed, cursor=cursor))
        await until(lambda: len(resumed.events) == 55, what="resumed on B")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert on_a.ids()[:40] + resumed.ids() == app.ids()


def _state(frames: list[Any]) -> dict[str, Any]:
    """The state a watcher holds after ``frames`` (a snapshot replaces, deltas update)."""
    state: dict[str, Any] = {}
    for frame in frames:
        kind = frame.WhichOneof("frame")
        if kind == "snapshot":
            state = _plain(frame.snapshot.state)
        elif kind == "delta":
            state.update(_plain(frame.delta.delta))
    return state


def _plain(struct: Any) -> dict[str, Any]:
    plain: dict[str, Any] = MessageToDict(struct)
    return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in plain.items()}


async def _eventually(check: Any, seconds: float = 10.0, what: str = "") -> None:
    """Awaits ``check()`` until it returns True (fails after ``seconds``)."""
    try:
        async with asyncio.timeout(seconds):
            while not await check():  # noqa: ASYNC110 - asks the sidecar
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not within {seconds} s: {what}") from None


def _texts(response: cpb.BuildContextResponse) -> str:
    return "\n".join(part.text for content in response.contents for part in content.parts)


async def _invocations(target: Any, user_id: str, session_id: str, count: int, tag: str) -> None:
    for n in range(count):
        for author in ("user", "helper"):
            await target.append_event(
                APP,
                user_id,
                session_id,
                text_event(
                    f"{tag} {author} says {n}",
                    author=author,
                    invocation_id=f"{tag}-{n}",
                    event_id=f"{tag}-{author}-{n}",
                ),
            )


async def test_compaction_single_flight_and_configuration_across_sidecars(
    tmp_path: Path, postgres_dsn: str
) -> None:
    sessions = [f"c{n}" for n in range(6)]
    async with sidecars(tmp_path, postgres_dsn) as (a, b), client(a) as ca, client(b) as cb:
        for session in sessions:
            await ca.create_session(APP, "u", session)
            await _invocations(ca, "u", session, 3, session)
        # B reads, and caches, the app's configuration while there is none.
        with pytest.raises(ContextEngineError) as info:
            await cb.compact(APP, "u", sessions[0])
        assert info.value.reason == "COMPACTION_NOT_CONFIGURED"
        plain = await cb.build_context(APP, "u", sessions[0], agent_name="writer")
        assert "Relayed by A" not in _texts(plain)

        await ca.update_app_config(
            config_pb2.AppConfig(
                app_name=APP,
                events_compaction_config=config_pb2.EventsCompactionConfig(
                    compaction_interval=2, overlap_size=0
                ),
                other_agent_preamble="Relayed by A:",
            )
        )

        async def b_builds_with_the_new_preamble() -> bool:
            built = await cb.build_context(APP, "u", sessions[0], agent_name="writer")
            return "Relayed by A:" in _texts(built)

        await _eventually(b_builds_with_the_new_preamble, what="A's configuration on B")

        # Both told to compact every session at once: one summary each, one summarizer run.
        outcomes = await asyncio.gather(
            *(target.compact(APP, "u", session) for session in sessions for target in (ca, cb))
        )
        for i, session in enumerate(sessions):
            pair = outcomes[2 * i : 2 * i + 2]
            summaries = [o for o in pair if o.HasField("summary")]
            assert len(summaries) == 1, f"{session}: {pair}"
            # The other one planned after the summary: no summarizer call was wasted.
            assert [o.skipped_reason for o in pair if not o.HasField("summary")] != [
                "plan_stale"
            ], session
            log = [e async for e in ca.list_events(APP, "u", session)]
            assert sum(e.actions.HasField("compaction") for e in log) == 1
            attempts = [(await t.compaction_status(APP, "u", session)).attempts for t in (ca, cb)]
            assert sum(attempts) == 1, f"{session}: attempts {attempts}"

        # A session's own configuration updated on A is the one B uses.
        override = config_pb2.SessionConfig(
            events_compaction_config=config_pb2.EventsCompactionConfig(
                compaction_interval=1, overlap_size=0
            )
        )
        before = await cb.get_session_config(APP, "u", sessions[1])
        assert not before.config.HasField("events_compaction_config")
        await ca.update_session_config(APP, "u", sessions[1], override)

        async def b_sees_the_override() -> bool:
            seen = await cb.get_session_config(APP, "u", sessions[1])
            # The compaction configuration B's compactor resolves for the session.
            return seen.effective_compaction_config.compaction_interval == 1

        await _eventually(b_sees_the_override, what="A's session configuration on B")


async def _fresh_contents(dsn: str, session_id: str, agent: str) -> list[Any]:
    """The contents a newly opened engine builds (no cached log or view)."""
    async with await open_engine(EngineSettings(db=dsn)) as engine:
        result = await engine.build_context(
            cpb.BuildContextRequest(
                app_name=APP,
                user_id="u",
                session_id=session_id,
                agent_name=agent,
                skip_compaction=True,
            )
        )
        return list(result.response().contents)


async def test_context_views_on_b_stay_correct_after_a_appends_and_compacts(
    tmp_path: Path, postgres_dsn: str
) -> None:
    async with sidecars(tmp_path, postgres_dsn) as (a, b), client(a) as ca, client(b) as cb:
        await ca.update_app_config(
            config_pb2.AppConfig(
                app_name=APP,
                events_compaction_config=config_pb2.EventsCompactionConfig(
                    compaction_interval=2, overlap_size=1
                ),
            )
        )
        await ca.create_session(APP, "u", "v")
        compacted = 0
        for round_no in range(4):
            await _invocations(ca, "u", "v", 3, f"r{round_no}")
            if round_no >= 1:
                outcome = await ca.compact(APP, "u", "v")
                compacted += outcome.HasField("summary")
            for agent in ("writer", "helper"):
                # B's views are kept from its previous build and extended with A's events.
                on_b = await cb.build_context(APP, "u", "v", agent_name=agent, skip_compaction=True)
                assert list(on_b.contents) == await _fresh_contents(postgres_dsn, "v", agent), (
                    f"round {round_no}, agent {agent}"
                )
                assert on_b.last_sequence == len([e async for e in ca.list_events(APP, "u", "v")])
        assert compacted >= 2  # the views saw summaries appended by the other sidecar
