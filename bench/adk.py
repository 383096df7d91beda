"""ADK Python with the drop-ins against plain ADK: the whole ``runner.run_async`` loop per
invocation, with a fake model, at 100, 1,000 and 10,000 events in the session (``--quick``: 100
and 1,000), every side in the same run.

Sides (one google-adk ``Runner`` each, the same single ``LlmAgent`` on a fake model that answers
every call with one text at once):

* ``ADK in-memory``: ``InMemorySessionService``, ADK building the contents itself;
* ``ADK SQLite``: ``SqliteSessionService`` on a file;
* ``drop-ins embedded``: ``ContextEngineSessionService`` + ``ContextEnginePlugin`` +
  ``ContextEngineMemoryService`` on the in-process engine (a SQLite file);
* ``drop-ins sidecar``: the same against ``python -m contextengine serve`` (SQLite file, a separate
  process, log level WARNING).

Per side and size: a session prefilled with that many events (alternating user and agent turns,
appended through the side's own session service, not timed), then ``invocations`` invocations
timed one by one after one untimed warm-up invocation: ``run_async`` with a new user message until its generator is exhausted (the
session read, the user event appended, the contents built (by ADK or by ``BuildContext`` in the
plugin), the model call, the answer appended, ``EndInvocation`` for the drop-ins). No compaction
is configured on any side. The ``vs ADK`` column is the side's invocations per second over ADK
in-memory's at the same size; the notes give the time per invocation over both ADK services.

Data checks: every invocation's reply arrived; each session holds the prefill plus two events per
invocation (the warm-up's too); the last model request of every side had the same contents as ADK in-memory's (the
drop-ins' history is the engine's ``BuildContext``).
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import tempfile
import time
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App
from google.adk.events.event import Event
from google.adk.memory.in_memory_memory_service import InMemoryMemoryService
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from pydantic import PrivateAttr

from bench import DataCheckError, Measurement, Options, Report
from bench.sidecar import Sidecar

APP = "bench-adk"
USER = "user-1"
SIZES = (100, 1_000, 10_000)
QUICK_SIZES = (100, 1_000)
INVOCATIONS = 20
QUICK_INVOCATIONS = 10
SIDES = ("ADK in-memory", "ADK SQLite", "drop-ins embedded", "drop-ins sidecar")
REFERENCE = "ADK in-memory"


class FakeModel(BaseLlm):
    """Answers every call with one short text; keeps the last request's contents."""

    model: str = "bench-fake"
    _last: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _calls: int = PrivateAttr(default=0)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._calls += 1
        self._last = [c.model_dump(mode="json", exclude_none=True) for c in llm_request.contents]
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=f"answer {self._calls}")])
        )


def prefill_event(i: int) -> Event:
    user = i % 2 == 0
    text = f"Question {i}: what about city {i}?" if user else f"Answer {i}: sunny, {i % 30} C."
    return Event(
        author="user" if user else "root",
        invocation_id=f"prefill-{i // 2}",
        content=types.Content(role="user" if user else "model", parts=[types.Part(text=text)]),
        timestamp=1_700_000_000.0 + i,
    )


@dataclass
class Side:
    """One configured side: its session service, plugins and memory service."""

    name: str
    service: BaseSessionService
    plugins: list[BasePlugin]
    memory: Any
    close: Callable[[], Any]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    logger = logging.getLogger("google_adk")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


@contextlib.asynccontextmanager
async def _sides(workdir: Path) -> AsyncIterator[dict[str, Callable[[str], Side]]]:
    """Makers of each side (one fresh store per size: ``tag`` names it)."""
    from contextengine.adk import (
        ContextEngineMemoryService,
        ContextEnginePlugin,
        ContextEngineSessionService,
        embedded_backend,
        sidecar_backend,
    )

    sidecar = Sidecar(workdir, "adk", check_health=True)
    await sidecar.start()

    def adk_memory(tag: str) -> Side:
        return Side(REFERENCE, InMemorySessionService(), [], InMemoryMemoryService(), _none)

    def adk_sqlite(tag: str) -> Side:
        service = SqliteSessionService(str(workdir / f"adk-{tag}.db"))
        return Side("ADK SQLite", service, [], InMemoryMemoryService(), _none)

    def dropins(name: str, backend: Any) -> Side:
        return Side(
            name,
            ContextEngineSessionService(backend=backend),
            [ContextEnginePlugin(backend=backend)],
            ContextEngineMemoryService(backend=backend),
            backend.aclose,
        )

    def embedded(tag: str) -> Side:
        return dropins("drop-ins embedded", embedded_backend(str(workdir / f"engine-{tag}.db")))

    def on_sidecar(tag: str) -> Side:
        return dropins("drop-ins sidecar", sidecar_backend(sidecar.target))

    try:
        yield {
            REFERENCE: adk_memory,
            "ADK SQLite": adk_sqlite,
            "drop-ins embedded": embedded,
            "drop-ins sidecar": on_sidecar,
        }
    finally:
        await sidecar.stop()


async def _none() -> None:
    return None


@dataclass
class Timed:
    latencies_ms: list[float]
    seconds: float
    last_request: list[dict[str, Any]]
    events: int


async def _invoke(runner: Runner, session_id: str, text: str) -> None:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in runner.run_async(user_id=USER, session_id=session_id, new_message=message):
        pass


async def _measure(side: Side, size: int, invocations: int, session_id: str) -> Timed:
    model = FakeModel()
    agent = LlmAgent(name="root", model=model, instruction="You answer questions.")
    app = App(name=APP, root_agent=agent, plugins=side.plugins)
    runner = Runner(app=app, session_service=side.service, memory_service=side.memory)
    session = await side.service.create_session(app_name=APP, user_id=USER, session_id=session_id)
    for i in range(size):
        await side.service.append_event(session, prefill_event(i))
    latencies: list[float] = []
    replies = 0
    await _invoke(runner, session_id, "Warm-up question?")  # first-call costs, untimed
    start = time.perf_counter()
    for n in range(invocations):
        message = types.Content(role="user", parts=[types.Part(text=f"Next question {n}?")])
        began = time.perf_counter()
        async for event in runner.run_async(
            user_id=USER, session_id=session_id, new_message=message
        ):
            if event.author == "root" and event.content and event.content.parts:
                replies += 1
        latencies.append((time.perf_counter() - began) * 1e3)
    seconds = time.perf_counter() - start
    if replies != invocations:
        raise DataCheckError(f"{side.name} at {size}: {replies} replies to {invocations} calls")
    stored = await side.service.get_session(app_name=APP, user_id=USER, session_id=session_id)
    events = len(stored.events) if stored is not None else -1
    expected = size + 2 * (invocations + 1)
    if events != expected:
        raise DataCheckError(f"{side.name} at {size}: {events} events stored, not {expected}")
    await runner.close()
    return Timed(latencies, seconds, model._last, events)


def _ms(value: float) -> str:
    return f"{value:,.2f} ms"


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else SIZES
    invocations = QUICK_INVOCATIONS if options.quick else INVOCATIONS
    report = Report(
        "adk",
        {"sizes": list(sizes), "invocations_per_size": invocations, "sides": list(SIDES)},
    )
    results: dict[tuple[int, str], Timed] = {}
    with tempfile.TemporaryDirectory(prefix="bench-adk-") as tmp, _quiet():
        async with _sides(Path(tmp)) as makers:
            for size in sizes:
                for name in SIDES:
                    side = makers[name](str(size))
                    try:
                        results[size, name] = await _measure(side, size, invocations, f"s-{size}")
                    finally:
                        await side.close()
    for size in sizes:
        reference = results[size, REFERENCE]
        baseline = invocations / reference.seconds
        for name in SIDES:
            timed = results[size, name]
            if timed.last_request != reference.last_request:
                raise DataCheckError(
                    f"{name} at {size} events: the last model request's contents differ from "
                    f"{REFERENCE}'s ({len(timed.last_request)} vs {len(reference.last_request)})"
                )
            report.measurements.append(
                Measurement(
                    f"{name} @ {size:,} events",
                    invocations,
                    timed.seconds,
                    tuple(timed.latencies_ms),
                    baseline_events_per_second=None if name == REFERENCE else baseline,
                )
            )
        memory_ms = statistics.median(reference.latencies_ms)
        sqlite_ms = statistics.median(results[size, "ADK SQLite"].latencies_ms)
        report.notes.append(
            f"{size:,} events, ADK SQLite: {_ms(sqlite_ms)} per invocation (median), "
            f"{sqlite_ms / memory_ms:.2f}x ADK in-memory ({_ms(memory_ms)})"
        )
        for name in SIDES[2:]:
            ours = statistics.median(results[size, name].latencies_ms)
            report.notes.append(
                f"{size:,} events, {name}: {_ms(ours)} per invocation (median), "
                f"{ours / memory_ms:.2f}x ADK in-memory ({_ms(memory_ms)}), "
                f"{ours / sqlite_ms:.2f}x ADK SQLite ({_ms(sqlite_ms)})"
            )
    report.notes.append(
        "'events' is timed invocations here; 'vs ADK' is invocations/s over ADK in-memory's at "
        "the same session size; the per-invocation ratios above are of medians"
    )
    report.checks.append(
        "every invocation got its reply; every session holds the prefill plus two events per "
        "invocation; every side's last model request had ADK in-memory's contents"
    )
    return report
