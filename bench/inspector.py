"""What the session inspector's views cost, against one BuildContext of the same log.

The inspector (``contextengine.inspector``) answers each view from the engine in process: the
annotated log (``session``), the agent's context (``context``: BuildContext plus per-content
token counts), and the token plot (``tokens``: the context's size after sampled events, from one
incremental view over the growing log). One engine on ``:memory:``; per size, one session of a
user and two agents (four events per invocation), appended in batches. Timed, in this order,
each on its own: a cold BuildContext for the researcher (the floor: a view built from the whole
log), the token plot for the planner at 120 and at 500 points (nothing cached: each call
builds its own view), the session view, and the planner's context view (a cold BuildContext,
the plot's view is not the engine's, plus counting each content's tokens).
"vs ADK" is here each row's rate relative to the cold BuildContext of the same size (1.00x: as
fast as one build). Data check: the plot's last point is the context view's token estimate.

``python -m bench.inspector [--quick]`` (not in ``python -m bench``'s list yet).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable

from bench import DataCheckError, Measurement, Options, Report
from contextengine.engine import EngineSettings, open_engine
from contextengine.inspector import ContextQuery, InspectorApi
from contextengine.store import SessionKey
from contextengine.v1 import (
    content_pb2,
    context_service_pb2 as cpb,
    event_pb2,
    session_service_pb2 as spb,
)

APP, USER = "bench", "u"
FULL_SIZES = (500, 2_000, 8_000)
QUICK_SIZES = (500, 2_000)
BATCH = 500


def _event(index: int) -> event_pb2.Event:
    author = ("user", "planner", "researcher", "planner")[index % 4]
    return event_pb2.Event(
        author=author,
        invocation_id=f"inv-{index // 4}",
        timestamp=1_700_000_000.0 + index,
        content=content_pb2.Content(
            role="user" if author == "user" else "model",
            parts=[content_pb2.Part(text=f"turn {index}: " + "words of the turn " * 10)],
        ),
    )


async def _timed(
    name: str, events: int, baseline: float | None, call: Awaitable[object]
) -> Measurement:
    start = time.perf_counter()
    await call
    seconds = time.perf_counter() - start
    return Measurement(name, events, seconds, baseline_events_per_second=baseline)


async def run(options: Options) -> Report:
    sizes = QUICK_SIZES if options.quick else FULL_SIZES
    report = Report("inspector", {"sizes": list(sizes), "events_per_invocation": 4})
    async with await open_engine(EngineSettings(db=":memory:")) as engine:
        api = InspectorApi(engine)
        for size in sizes:
            session = f"s{size}"
            await engine.create_session(
                spb.CreateSessionRequest(app_name=APP, user_id=USER, session_id=session)
            )
            events = [_event(i) for i in range(size)]
            for first in range(0, size, BATCH):
                await engine.append_events(
                    spb.AppendEventsRequest(
                        app_name=APP,
                        user_id=USER,
                        session_id=session,
                        events=events[first : first + BATCH],
                    )
                )
            key = SessionKey(APP, USER, session)
            planner = ContextQuery(agent="planner")
            build = await _timed(
                f"{size} events: BuildContext (cold)",
                size,
                None,
                engine.build_context(
                    cpb.BuildContextRequest(
                        app_name=APP,
                        user_id=USER,
                        session_id=session,
                        agent_name="researcher",
                        skip_compaction=True,
                    )
                ),
            )
            report.measurements.append(build)
            floor = build.events_per_second
            for points in (120, 500):
                report.measurements.append(
                    await _timed(
                        f"{size} events: token plot, {points} points",
                        size,
                        floor,
                        api.tokens(key, planner, points),
                    )
                )
            report.measurements.append(
                await _timed(f"{size} events: session view", size, floor, api.session(key))
            )
            report.measurements.append(
                await _timed(f"{size} events: context view", size, floor, api.context(key, planner))
            )
            plot = await api.tokens(key, planner, 120)
            context = await api.context(key, planner)
            if plot["points"][-1]["tokens"] != context["token_estimate"]:
                raise DataCheckError(
                    f"{size} events: the plot ends at {plot['points'][-1]['tokens']} tokens, "
                    f"the context has {context['token_estimate']}"
                )
            report.checks.append(f"{size} events: the plot's last point is the context's size")
    report.notes.append("events/s: log events covered per second of the call")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.inspector", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sessions (a smoke run)")
    args = parser.parse_args()
    options = Options(quick=args.quick)
    try:
        report = asyncio.run(run(options))
    except DataCheckError as err:
        print(f"== inspector == DATA CHECK FAILED: {err}", file=sys.stderr)
        return 1
    print(report.render())
    options.results_dir.mkdir(parents=True, exist_ok=True)
    out = options.results_dir / "inspector.json"
    out.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
