"""The ``contextengine`` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from contextengine.server import DEFAULT_DB, DEFAULT_LISTEN, ServerSettings, serve
from contextengine.store.sqlite import DatabaseLockedError
from contextengine.version import __version__


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
        help=(
            f"SQLite file, or :memory: for a throw-away store (default ./{DEFAULT_DB}); one "
            "sidecar per file (it holds <db>.lock; a second one exits with status 1)"
        ),
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
        "--subscription-max-hold-ms",
        type=float,
        default=50.0,
        help=(
            "when busy, the longest a batched subscriber waits for its next live message "
            "(default 50; lower: fresher deliveries, more load)"
        ),
    )
    run.add_argument(
        "--subscription-target-load",
        type=float,
        default=0.75,
        help=(
            "share of the event loop's time (0-1] above which batched subscribers are paced "
            "(default 0.75)"
        ),
    )
    run.add_argument(
        "--subscriber-buffer-bytes",
        type=int,
        default=32 * 1024 * 1024,
        help=(
            "bytes of events a subscriber may have waiting before its stream ends with "
            "SUBSCRIBER_LAGGED, resumable from its cursor (default 32 MiB)"
        ),
    )
    run.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (INFO logs one line per RPC)",
    )
    return parser


def serve_settings(args: argparse.Namespace) -> ServerSettings:
    """The settings ``serve`` runs with; ValueError (its message names the flag) for values no
    server can run with."""
    if args.max_request_bytes <= 0:
        raise ValueError("--max-request-bytes must be positive")
    if not args.subscription_max_hold_ms > 0:
        raise ValueError("--subscription-max-hold-ms must be positive")
    if not 0 < args.subscription_target_load <= 1:
        raise ValueError("--subscription-target-load must be in (0, 1]")
    if args.subscriber_buffer_bytes <= 0:
        raise ValueError("--subscriber-buffer-bytes must be positive")
    return ServerSettings(
        listen=args.listen,
        db=args.db,
        durability=args.durability,
        max_request_bytes=args.max_request_bytes,
        grace_seconds=args.grace_seconds,
        gemini_base_url=args.gemini_base_url,
        memory_fts=args.memory_fts,
        subscription_max_hold_seconds=args.subscription_max_hold_ms / 1000.0,
        subscription_target_load=args.subscription_target_load,
        subscriber_buffer_bytes=args.subscriber_buffer_bytes,
    )


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line (exits with status 2 and usage on bad syntax, as argparse does)."""
    return _parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        settings = serve_settings(args)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    try:
        asyncio.run(serve(settings, port_file=args.port_file))
    except DatabaseLockedError as error:
        # Another sidecar serves this file (``make run`` twice, two replicas on one volume).
        logging.getLogger("contextengine.server").error("not started: %s", error)
        return 1
    except (sqlite3.Error, OSError) as error:
        # The database cannot be opened or brought to the current schema (a full disk, a
        # read-only or missing directory, a file that is not a database): one line, no traceback.
        logging.getLogger("contextengine.server").error(
            "the database %s cannot be used: %s (%s)",
            settings.db,
            error,
            type(error).__name__,
        )
        return 1
    return 0
