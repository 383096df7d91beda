"""The ``contextengine`` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from contextengine import __version__
from contextengine.demo import add_arguments as add_demo_arguments, main as run_demo_command
from contextengine.server import DEFAULT_DB, DEFAULT_LISTEN, ServerSettings, serve


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextengine", description="A context engine for AI agents, as a gRPC sidecar."
    )
    parser.add_argument("--version", action="version", version=f"contextengine {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="run the sidecar until SIGTERM/SIGINT")
    run.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"host:port (port 0 = any free port) or unix:/path.sock (default {DEFAULT_LISTEN})",
    )
    run.add_argument(
        "--db",
        default=DEFAULT_DB,
        help=f"SQLite file, or :memory: for a throw-away store (default ./{DEFAULT_DB})",
    )
    run.add_argument(
        "--durability",
        choices=["normal", "full"],
        default="normal",
        help="normal: acknowledged events survive a process crash; full: also power loss",
    )
    run.add_argument(
        "--max-request-bytes",
        type=int,
        default=4 * 1024 * 1024,
        help="largest accepted request in bytes (default 4 MiB)",
    )
    run.add_argument(
        "--grace-seconds",
        type=float,
        default=10.0,
        help="time in-flight requests get to finish on shutdown (default 10)",
    )
    run.add_argument("--port-file", type=Path, help="write the bound port to this file")
    run.add_argument(
        "--gemini-base-url",
        default=None,
        help=(
            "Gemini endpoint for Gemini summarizers and managed caches (default: google-genai's, "
            "or GOOGLE_GEMINI_BASE_URL); the key comes from GEMINI_API_KEY / GOOGLE_API_KEY"
        ),
    )
    run.add_argument(
        "--memory-fts",
        choices=["auto", "on", "off"],
        default="auto",
        help="memory search: SQLite FTS5 when available (auto), required (on), or LIKE (off)",
    )
    run.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (INFO logs one line per RPC)",
    )
    demo = sub.add_parser(
        "demo",
        help="play a scripted agent session against a sidecar and show its compaction",
        description=(
            "Plays a travel-planning agent (a fake model calling tools) against a sidecar, "
            "with compaction configured, and prints each context, each summary as it appears "
            "and what the last summary replaced."
        ),
    )
    add_demo_arguments(demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return run_demo_command(args)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    if args.max_request_bytes <= 0:
        print("--max-request-bytes must be positive", file=sys.stderr)
        return 2
    settings = ServerSettings(
        listen=args.listen,
        db=args.db,
        durability=args.durability,
        max_request_bytes=args.max_request_bytes,
        grace_seconds=args.grace_seconds,
        gemini_base_url=args.gemini_base_url,
        memory_fts=args.memory_fts,
    )
    asyncio.run(serve(settings, port_file=args.port_file))
    return 0
