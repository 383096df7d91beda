"""``python -m bench [name ...]``: runs the benchmarks (all of them by default) and prints tables."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from bench import (
    RESULTS_DIR,
    DataCheckError,
    Options,
    Report,
    adk,
    adk_ports,
    append,
    append_floor,
    cache_sim,
    clients,
    compaction,
    context,
    context_floor,
    context_tools,
    gc_pauses,
    hotpaths,
    inspector,
    memory,
    ops,
    postgres,
    subscribe,
    token_check,
)

Benchmark = Callable[[Options], Coroutine[Any, Any, Report]]

BENCHMARKS: dict[str, Benchmark] = {
    "adk": adk.run,
    "adk-ports": adk_ports.run,
    "append": append.run,
    "append-floor": append_floor.run,
    "cache": cache_sim.run,
    "clients": clients.run,
    "compaction": compaction.run,
    "context": context.run,
    "context-tools": context_tools.run,
    "context-floor": context_floor.run,
    "gc": gc_pauses.run,
    "hotpaths": hotpaths.run,
    "inspector": inspector.run,
    "subscribe": subscribe.run,
    "token-check": token_check.run,
    "memory": memory.run,
    "ops": ops.run,
    "postgres": postgres.run,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks of contextengine against google-adk on this machine.",
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="name",
        help=f"benchmarks to run (default: all of {', '.join(BENCHMARKS)})",
    )
    parser.add_argument("--quick", action="store_true", help="a smaller workload (a smoke run)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the sidecar under cProfile and print its hottest functions",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=RESULTS_DIR,
        help="where <name>.json is written (default bench/results)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    names: list[str] = args.names or list(BENCHMARKS)
    options = Options(quick=args.quick, profile=args.profile, results_dir=args.results_dir)
    options.results_dir.mkdir(parents=True, exist_ok=True)
    status = 0
    for name in names:
        try:
            report = asyncio.run(BENCHMARKS[name](options))
        except DataCheckError as err:
            print(f"== {name} == DATA CHECK FAILED: {err}", file=sys.stderr)
            status = 1
            continue
        print(report.render())
        out = options.results_dir / f"{name}.json"
        out.write_text(json.dumps(report.to_json(), indent=2) + "\n")
        print(f"\nwritten to {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
