"""A scripted travel-planning agent session against a sidecar, compacted as it goes.

Run it with ``.venv/bin/python examples/python/demo/demo.py`` (``--help`` for the options). It
uses the sidecar at ``--target`` (host:port), else ``CONTEXTENGINE_TARGET``, else ``make run``'s
(127.0.0.1:50151) if something listens there, else it starts its own ``contextengine serve`` on a
free port and a temporary SQLite file and stops it at the end (``--own-sidecar`` always does).

The demo plays an agent (``travel_agent``) with a fake model: each invocation is a user message,
zero or more tool rounds (``search_flights(...)`` and its result, ...) and a final answer (the
script is ``travel_script.py``). Before every model call it asks the sidecar for the context
(BuildContext) and the fake model reports a ``prompt_token_count`` that grows with that context,
as a real model's usage metadata would. After each invocation it calls EndInvocation and waits
(deterministically, by polling GetCompactionStatus) for the background compaction the engine may
run.

It prints, per invocation, the context the agent would send (one line per content), every summary
as it appears (its range and text), and at the end what the last summary replaced (ExpandSummary),
with the renderer of the operator CLI (``contextengine.console.render``: the same lines as
``contextengine context`` and ``contextengine compaction expand``), and the CLI commands that
look at the session it made.

Compaction is the app's: a sliding window (``compaction_interval=3``, ``overlap_size=1``) or a
token threshold with a retained tail. Summaries come from the offline extractive summarizer,
or from Gemini when ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` is set (the sidecar needs the key in
its own environment; the sidecar the demo starts inherits the demo's). tests/docs/test_demo.py
runs this file as above.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import tempfile
import time
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from google.protobuf import struct_pb2
from travel_script import turn_for

from contextengine.client import ContextEngineClient
from contextengine.console import render
from contextengine.console.output import make_console
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    content_pb2,
    event_pb2,
)

DEFAULT_TARGET = "127.0.0.1:50151"
DEFAULT_GEMINI_MODEL = "gemini-2.5-flash"
DEFAULT_INVOCATIONS = 8

APP = "travel-demo"
USER = "traveller"
AGENT = "travel_agent"

#: sliding-window settings (mode "sliding")
COMPACTION_INTERVAL = 3
OVERLAP_SIZE = 1
#: token-threshold settings (mode "token"): compact once a prompt reaches this many tokens,
#: keeping the last events raw
TOKEN_THRESHOLD = 1_100
EVENT_RETENTION_SIZE = 3
#: what the fake model adds to the context for the system instruction and tool declarations
SYSTEM_PROMPT_TOKENS = 250

#: how long to wait for a background compaction (extractive: milliseconds; Gemini: a model call)
WAIT_EXTRACTIVE_SECONDS = 30.0
WAIT_GEMINI_SECONDS = 180.0
POLL_SECONDS = 0.01
#: how long the sidecar the demo starts may take to bind its port
SIDECAR_START_SECONDS = 30.0

#: the width of the demo's lines when its output is not a terminal (piped, in tests)
PIPED_WIDTH = 120

_clip = render.clip


def _struct(data: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


def _args(struct: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in struct.items())


# The session --------------------------------------------------------------------------------


@dataclass
class DemoResult:
    """What the demo saw (for tests and callers)."""

    #: the summary events, in the order they appeared
    summaries: list[event_pb2.Event] = field(default_factory=list)
    #: ExpandSummary of the last summary, if there was one
    expansion: kpb.ExpandSummaryResponse | None = None
    #: token estimate of each context built, in order
    context_tokens: list[int] = field(default_factory=list)
    session_id: str = ""


def _text(role: str, text: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)])


def _usage(prompt_tokens: int, answer: str) -> event_pb2.UsageMetadata:
    answer_tokens = max(1, len(answer) // 4)
    return event_pb2.UsageMetadata(
        prompt_token_count=prompt_tokens,
        candidates_token_count=answer_tokens,
        total_token_count=prompt_tokens + answer_tokens,
    )


class _Demo:
    def __init__(
        self, client: ContextEngineClient, out: TextIO, session_id: str, wait_seconds: float
    ) -> None:
        self.client = client
        self.out = out
        self.session_id = session_id
        self.wait_seconds = wait_seconds
        self.result = DemoResult(session_id=session_id)
        self.seen = 0
        self.failures = 0
        self.console = make_console(out, width=None if out.isatty() else PIPED_WIDTH)

    def say(self, line: str = "") -> None:
        print(line, file=self.out)

    async def append(self, event: event_pb2.Event) -> None:
        await self.client.append_event(APP, USER, self.session_id, event)

    async def model_call(self, call: int, show: bool) -> int:
        """BuildContext for the agent's next model call; returns the prompt token count the
        fake model reports for it."""
        context = await self.client.build_context(APP, USER, self.session_id, agent_name=AGENT)
        tokens = context.token_estimate.tokens
        self.result.context_tokens.append(tokens)
        if context.compaction_sequence:
            self.say(
                f"  (the token threshold was reached: BuildContext appended summary "
                f"#{context.compaction_sequence} before building)"
            )
            await self.collect_summaries(f"in-flow, before model call {call}")
        if show:
            events = [e async for e in self.client.list_events(APP, USER, self.session_id)]
            self.console.print(
                render.context_view(context, events, title=f"context for model call {call}")
            )
        elif call > 1:
            self.say(f"  model call {call}: {len(context.contents)} contents, ~{tokens} tokens")
        return tokens + SYSTEM_PROMPT_TOKENS

    async def invocation(self, index: int) -> None:
        turn = turn_for(index)
        invocation_id = f"inv-{index + 1}"
        self.say(f"── invocation {index + 1}: user: {_clip(turn.user, 80)}")
        await self.append(
            event_pb2.Event(
                author="user", invocation_id=invocation_id, content=_text("user", turn.user)
            )
        )
        for call, tool in enumerate(turn.tools, start=1):
            prompt = await self.model_call(call, show=call == 1)
            call_id = f"call-{index + 1}-{call}"
            part = content_pb2.Part(
                function_call=content_pb2.FunctionCall(
                    id=call_id, name=tool.name, args=_struct(tool.args)
                )
            )
            await self.append(
                event_pb2.Event(
                    author=AGENT,
                    invocation_id=invocation_id,
                    content=content_pb2.Content(role="model", parts=[part]),
                    usage_metadata=_usage(prompt, _args(tool.args)),
                )
            )
            response = content_pb2.Part(
                function_response=content_pb2.FunctionResponse(
                    id=call_id, name=tool.name, response=_struct(tool.result)
                )
            )
            await self.append(
                event_pb2.Event(
                    author=AGENT,
                    invocation_id=invocation_id,
                    content=content_pb2.Content(role="user", parts=[response]),
                )
            )
            self.say(f"  tool: {_clip(f'{tool.name}({_args(tool.args)})', 90)}")
        call = len(turn.tools) + 1
        prompt = await self.model_call(call, show=call == 1)
        await self.append(
            event_pb2.Event(
                author=AGENT,
                invocation_id=invocation_id,
                content=_text("model", turn.answer),
                usage_metadata=_usage(prompt, turn.answer),
            )
        )
        self.say(f"  {AGENT}: {_clip(turn.answer, 90)}  (prompt {prompt} tokens)")
        scheduled = await self.client.end_invocation(APP, USER, self.session_id, invocation_id)
        waited = await self.wait_for_compaction() if scheduled else 0.0
        self.say(
            "  EndInvocation: "
            + (
                f"compaction checked in the background ({waited * 1000:.0f} ms)"
                if scheduled
                else "nothing scheduled"
            )
        )
        await self.collect_summaries("after the invocation")

    async def wait_for_compaction(self) -> float:
        """Polls GetCompactionStatus until no compaction runs; returns the time waited."""
        started = time.monotonic()
        deadline = started + self.wait_seconds
        while True:
            status = await self.client.compaction_status(APP, USER, self.session_id)
            if not status.running:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the background compaction still runs after {self.wait_seconds:.0f} s"
                )
            await asyncio.sleep(POLL_SECONDS)
        if status.failures > self.failures:
            self.failures = status.failures
            self.say(f"  ! the summarizer failed: {status.last_error}")
        return time.monotonic() - started

    async def collect_summaries(self, when: str) -> None:
        async for event in self.client.list_events(
            APP, USER, self.session_id, after_sequence=self.seen
        ):
            self.seen = max(self.seen, event.sequence)
            if not event.actions.HasField("compaction"):
                continue
            self.result.summaries.append(event)
            self.console.print(render.summary_view(event, f"appended {when}"))

    async def expand_last(self) -> None:
        if not self.result.summaries:
            self.say("no summary was appended: nothing to expand")
            return
        last = self.result.summaries[-1]
        expansion = await self.client.expand_summary(APP, USER, self.session_id, last.sequence)
        self.result.expansion = expansion
        self.console.print(render.expansion_view(expansion))


def _compaction_config(mode: str) -> config_pb2.EventsCompactionConfig:
    if mode == "sliding":
        return config_pb2.EventsCompactionConfig(
            compaction_interval=COMPACTION_INTERVAL, overlap_size=OVERLAP_SIZE
        )
    if mode == "token":
        return config_pb2.EventsCompactionConfig(
            token_threshold=TOKEN_THRESHOLD, event_retention_size=EVENT_RETENTION_SIZE
        )
    raise ValueError(f"unknown mode {mode!r}: sliding or token")


def _describe_mode(mode: str) -> str:
    if mode == "sliding":
        return (
            f"sliding window (compaction_interval={COMPACTION_INTERVAL}, "
            f"overlap_size={OVERLAP_SIZE})"
        )
    return (
        f"token threshold (token_threshold={TOKEN_THRESHOLD}, "
        f"event_retention_size={EVENT_RETENTION_SIZE})"
    )


def _gemini_key_set(environ: Mapping[str, str]) -> bool:
    """Whether the sidecar will find a Gemini key (it reads the variables google-genai reads)."""
    return bool(environ.get("GOOGLE_API_KEY") or environ.get("GEMINI_API_KEY"))


def _bound_port(port_file: Path) -> int | None:
    """The port in ``port_file``, None while the sidecar has not written it (it writes the file
    once it serves, by an atomic rename)."""
    return int(port_file.read_text()) if port_file.exists() else None


async def _wait_for_port(process: asyncio.subprocess.Process, port_file: Path, log: Path) -> int:
    """The port the child sidecar bound; its log in the error if it exits first."""
    deadline = time.monotonic() + SIDECAR_START_SECONDS
    while (port := _bound_port(port_file)) is None:
        if process.returncode is not None:
            raise RuntimeError(
                f"contextengine serve exited with status {process.returncode}:\n"
                + log.read_text(errors="replace")  # noqa: ASYNC240 (once, on the way out)
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"contextengine serve did not start in {SIDECAR_START_SECONDS} s")
        await asyncio.sleep(0.05)
    return port


@contextlib.asynccontextmanager
async def _own_sidecar(out: TextIO) -> AsyncIterator[str]:
    """``contextengine serve`` as a child process on a free loopback port and a temporary SQLite
    file, stopped (SIGTERM, as ``make run``'s Ctrl-C) and removed on exit."""
    with tempfile.TemporaryDirectory(prefix="contextengine-demo-") as tmp:
        db, port_file, log = Path(tmp) / "demo.db", Path(tmp) / "port", Path(tmp) / "serve.log"
        with log.open("w") as log_stream:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "contextengine",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--db",
                str(db),
                "--port-file",
                str(port_file),
                "--log-level",
                "WARNING",
                stdout=log_stream,
                stderr=log_stream,
            )
            try:
                port = await _wait_for_port(process, port_file, log)
                target = f"127.0.0.1:{port}"
                print(f"server: contextengine serve on {target} (SQLite {db})", file=out)
                yield target
            finally:
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(process.wait(), timeout=15.0)
                    except TimeoutError:
                        process.kill()
                        await process.wait()


@contextlib.asynccontextmanager
async def _server(target: str | None, out: TextIO) -> AsyncIterator[str]:
    if target is None:
        async with _own_sidecar(out) as started:
            yield started
        return
    print(f"server: {target}", file=out)
    yield target


async def run_demo(
    target: str | None = None,
    *,
    invocations: int = DEFAULT_INVOCATIONS,
    mode: str = "sliding",
    gemini_model: str = DEFAULT_GEMINI_MODEL,
    out: TextIO | None = None,
    inspector_url: str | None = None,
) -> DemoResult:
    """Plays ``invocations`` invocations against the sidecar at ``target`` (None: one started for
    the demo, see the module docstring) and prints what happens to ``out`` (default stdout);
    ``inspector_url`` (the sidecar's session inspector, ``http://OPS/inspector/``) adds the link
    to the session's page at the end."""
    stream = sys.stdout if out is None else out
    compaction = _compaction_config(mode)
    use_gemini = _gemini_key_set(os.environ)
    summarizer = (
        config_pb2.SummarizerConfig(gemini=config_pb2.GeminiSummarizerConfig(model=gemini_model))
        if use_gemini
        else config_pb2.SummarizerConfig(extractive=config_pb2.ExtractiveSummarizerConfig())
    )
    async with _server(target, stream) as address, ContextEngineClient(address) as client:
        await client.wait_ready(10.0)
        await client.update_app_config(
            config_pb2.AppConfig(
                app_name=APP, events_compaction_config=compaction, summarizer=summarizer
            )
        )
        session = await client.create_session(APP, USER)
        print(
            f"app {APP!r}, agent {AGENT!r}, session {session.id}: {_describe_mode(mode)}, "
            f"summarizer: {f'gemini ({gemini_model})' if use_gemini else 'extractive (offline)'}",
            file=stream,
        )
        demo = _Demo(
            client,
            stream,
            session.id,
            WAIT_GEMINI_SECONDS if use_gemini else WAIT_EXTRACTIVE_SECONDS,
        )
        for index in range(invocations):
            await demo.invocation(index)
        print(file=stream)
        await demo.expand_last()
        tokens = demo.result.context_tokens
        if tokens:
            print(
                f"{invocations} invocations, {len(tokens)} model calls, "
                f"{len(demo.result.summaries)} summaries; context tokens: "
                f"max {max(tokens)}, last {tokens[-1]}",
                file=stream,
            )
        _cli_hints(stream, address, session.id, demo.result, own=target is None)
        if inspector_url:
            print(
                f"  the session inspector: {inspector_link(inspector_url, session.id)}", file=stream
            )
        return demo.result


def inspector_link(base: str, session_id: str) -> str:
    """The session inspector's page for the demo's session (the page reads app, user, session
    and agent from its location hash)."""
    query = urllib.parse.urlencode(
        {"app": APP, "user": USER, "session": session_id, "agent": AGENT}
    )
    return f"{base.rstrip('/')}/#{query}"


def _cli_hints(out: TextIO, target: str, session_id: str, result: DemoResult, own: bool) -> None:
    """The operator CLI's commands that look at the session the demo made."""
    where = f" --target {target}" if target != DEFAULT_TARGET else ""
    ids = f"{APP} {USER} {session_id}"
    print("\nlook at this session with the CLI (contextengine --help):", file=out)
    commands = [
        f"contextengine events list {ids}{where}",
        f"contextengine context {ids} --agent {AGENT}{where}",
        f"contextengine compaction status {ids}{where}",
    ]
    if result.summaries:
        commands.append(
            f"contextengine compaction expand {ids} {result.summaries[-1].sequence}{where}"
        )
    for command in commands:
        print(f"  {command}", file=out)
    if own:
        print(
            "  (the sidecar this demo started stops with it: start one with `make run`, then "
            "run the demo again, to keep the session)",
            file=out,
        )


# The command --------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="demo.py",
        description=(
            "Plays a travel-planning agent (a fake model calling tools) against a sidecar, "
            "with compaction configured, and prints each context, each summary as it appears "
            "and what the last summary replaced."
        ),
    )
    parser.add_argument(
        "--target",
        help=(
            "the sidecar, host:port (default: CONTEXTENGINE_TARGET, else "
            f"{DEFAULT_TARGET} if something listens there, else a contextengine serve started "
            "for the demo on a temporary SQLite file)"
        ),
    )
    parser.add_argument(
        "--own-sidecar",
        action="store_true",
        help="always start a contextengine serve for the demo (ignores any running sidecar)",
    )
    parser.add_argument(
        "--invocations",
        type=int,
        default=DEFAULT_INVOCATIONS,
        help=f"how many invocations to play (default {DEFAULT_INVOCATIONS})",
    )
    parser.add_argument(
        "--mode",
        choices=["sliding", "token"],
        default="sliding",
        help="sliding window (interval 3, overlap 1) or token threshold compaction",
    )
    parser.add_argument(
        "--inspector-url",
        metavar="URL",
        help=(
            "the session inspector of the sidecar (served with `contextengine serve --inspector "
            "--ops-listen HOST:PORT` at http://HOST:PORT/inspector/): print the session's page "
            "at the end"
        ),
    )
    parser.add_argument(
        "--gemini-model",
        default=DEFAULT_GEMINI_MODEL,
        help=(
            "summarizer model when GEMINI_API_KEY or GOOGLE_API_KEY is set "
            f"(default {DEFAULT_GEMINI_MODEL}; without a key: the extractive summarizer)"
        ),
    )
    return parser


def _listening(target: str, timeout: float = 0.3) -> bool:
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _target(args: argparse.Namespace) -> str | None:
    """The sidecar to use (None: start one)."""
    if args.own_sidecar:
        if args.target is not None:
            raise ValueError("--target and --own-sidecar exclude each other")
        return None
    if args.target is not None:
        return str(args.target)
    from_env = os.environ.get("CONTEXTENGINE_TARGET")
    if from_env:
        return from_env
    return DEFAULT_TARGET if _listening(DEFAULT_TARGET) else None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.invocations < 1:
        print("--invocations must be at least 1", file=sys.stderr)
        return 2
    try:
        target = _target(args)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    asyncio.run(
        run_demo(
            target,
            invocations=args.invocations,
            mode=args.mode,
            gemini_model=args.gemini_model,
            inspector_url=args.inspector_url,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
