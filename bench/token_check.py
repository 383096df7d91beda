"""What ADK's token check before a model call adds to BuildContext, as the history grows.

With a token threshold configured (``EventsCompactionConfig.token_threshold``), every BuildContext
first runs ADK's in-flow check (section 4.3): the agent's newest recorded prompt token count, or,
when no model call recorded one, the characters of the contents it would be given divided by 4.
ADK pays for that estimate with the contents it builds for the call anyway (``bench context``
measures that build); the engine keeps its contents in an incrementally extended view, so the
check must not rebuild them either.

Three apps on one sidecar (``python -m contextengine serve``, SQLite), one session each, grown
through the same conversation to each size (appended in batches), then 30 steady rounds of
{append a user message and the agent's answer; BuildContext for the agent}, timed around
``build_context`` in this process:

* ``no compaction``: the app configures none (the baseline);
* ``threshold, recorded``: a token threshold, and every answer records ``prompt_token_count``;
* ``threshold, estimated``: a token threshold, and no answer records one (the estimate path).

The threshold is far above the sessions' size: the check runs, nothing is compacted. Data checks:
every context reflects the whole log and nothing was compacted. "vs ADK" is here the rate of
calls relative to the ``no compaction`` row of the same size (1.00x: the check costs nothing).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import DataCheckError, Measurement, Options, Report
from bench.sidecar import Sidecar
from contextengine.client import ContextEngineClient
from contextengine.v1 import config_pb2, content_pb2, event_pb2

USER = "user-1"
AGENT = "agent"
ROUNDS = 30
BATCH = 500
FULL_SIZES = (1_000, 5_000, 20_000)
QUICK_SIZES = (1_000, 5_000)

#: (app, with a threshold, answers record a prompt token count)
MODES = (
    ("no compaction", False, False),
    ("threshold, recorded", True, True),
    ("threshold, estimated", True, False),
)


def message(n: int, *, record: bool) -> event_pb2.Event:
    """Event ``n`` of the conversation: a question (even) or the agent's answer (odd)."""
    user = n % 2 == 0
    text = (
        f"Question {n}: which trains leave Lyon for Turin tomorrow morning, and how long?"
        if user
        else f"Answer {n}: the 07:12 and the 09:40, about four hours, changing at Chambery."
    )
    event = event_pb2.Event(
        author="user" if user else AGENT,
        invocation_id=f"inv-{n // 2}",
        content=content_pb2.Content(
            role="user" if user else "model", parts=[content_pb2.Part(text=text)]
        ),
    )
    if record and not user:
        event.usage_metadata.prompt_token_count = 1_000 + n
    return event


async def _grow(
    ce: ContextEngineClient, app: str, session: str, start: int, end: int, record: bool
) -> None:
    for first in range(start, end, BATCH):
        batch = [message(n, record=record) for n in range(first, min(end, first + BATCH))]
        await ce.append_events(app, USER, session, batch)


async def _steady(
    ce: ContextEngineClient, app: str, session: str, start: int, record: bool
) -> list[float]:
    latencies: list[float] = []
    for round_ in range(ROUNDS):
        n = start + 2 * round_
        await ce.append_events(
            app, USER, session, [message(n, record=record), message(n + 1, record=record)]
        )
        t0 = time.perf_counter()
        context = await ce.build_context(app, USER, session, agent_name=AGENT)
        latencies.append((time.perf_counter() - t0) * 1000)
        if context.last_sequence != n + 2 or context.compaction_sequence:
            raise DataCheckError(
                f"{app}: the context reflects {context.last_sequence} (not {n + 2}), "
                f"compaction_sequence {context.compaction_sequence}"
            )
    return latencies


@dataclass
class _Followed:
    """One mode's app and session, and how many events the session has."""

    mode: str
    app: str
    id: str
    record: bool
    events: int = 0


async def _open(ce: ContextEngineClient, mode: tuple[str, bool, bool]) -> _Followed:
    name, threshold, record = mode
    config = config_pb2.AppConfig(app_name=name.replace(", ", "-").replace(" ", "-"))
    if threshold:
        config.events_compaction_config.token_threshold = 1_000_000_000
        config.events_compaction_config.event_retention_size = 10
    await ce.update_app_config(config)
    session = await ce.create_session(config.app_name, USER)
    return _Followed(name, config.app_name, session.id, record)


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = Report(
        "token_check",
        parameters={"sizes": list(sizes), "rounds": ROUNDS, "quick": options.quick},
    )
    with tempfile.TemporaryDirectory(prefix="ce-bench-token-") as tmp:
        async with (
            Sidecar(Path(tmp), "engine", check_health=True) as sidecar,
            ContextEngineClient(sidecar.target, attempts=1) as ce,
        ):
            followed = [await _open(ce, mode) for mode in MODES]
            for size in sizes:
                baseline: float | None = None
                for one in followed:
                    await _grow(ce, one.app, one.id, one.events, size, one.record)
                    await ce.build_context(one.app, USER, one.id, agent_name=AGENT)
                    latencies = await _steady(ce, one.app, one.id, size, one.record)
                    one.events = size + 2 * ROUNDS
                    row = Measurement(
                        f"{size:,} events: {one.mode}",
                        len(latencies),
                        sum(latencies) / 1000,
                        tuple(latencies),
                        baseline_events_per_second=baseline,
                    )
                    if baseline is None:
                        baseline = row.events_per_second
                    report.measurements.append(row)
                report.checks.append(
                    f"{size:,} events: every context reflected the whole log; nothing compacted"
                )
    report.notes.extend(
        [
            "p50/p99: BuildContext round trips in this process (ms); 'vs ADK' here: calls per "
            "second relative to the 'no compaction' row of the same size",
            "each session carries the previous sizes' rounds too (they grow through the sizes)",
        ]
    )
    return report
