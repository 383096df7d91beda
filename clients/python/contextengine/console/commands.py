"""The console's click command tree: sessions, events, context, compaction, memory and config
get|set, each a client call (or a subscription) against a running sidecar.

Every command takes the connection options (:func:`_connection_options`): ``--target``
(``CONTEXTENGINE_TARGET``, default 127.0.0.1:50151), ``--token`` (``CONTEXTENGINE_TOKEN``) or
``--token-file`` (``CONTEXTENGINE_TOKEN_FILE``; keeps the token out of ``ps``), and TLS
(``--tls``, ``--ca-file``, ``--cert-file`` / ``--key-file`` for mTLS, ``--server-name``), as
``ContextEngineClient`` takes them. A failed call is one line on stderr, ``error: CODE REASON:
message``, and a hint, with exit status 1; usage errors exit with 2; Ctrl-C with 130
(``contextengine.cli.main``, which runs these commands under its root group and takes the
connection options before the command from :func:`connection_parameters`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml
from google.protobuf import json_format
from google.protobuf.message import Message
from rich.console import Group
from rich.text import Text

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.console import render
from contextengine.console.output import Output
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    context_service_pb2 as cpb,
    session_service_pb2 as pb,
    subscription_service_pb2 as spb,
)

__all__ = ["cli", "connection_parameters"]

DEFAULT_TARGET = "127.0.0.1:50151"
TARGET_ENV = "CONTEXTENGINE_TARGET"
TOKEN_ENV = "CONTEXTENGINE_TOKEN"
TOKEN_FILE_ENV = "CONTEXTENGINE_TOKEN_FILE"

#: exit status of a command interrupted by Ctrl-C (128 + SIGINT)
INTERRUPTED = 130

#: gRPC's reconnection backoff grows to two minutes by default; an operator following a sidecar
#: through a restart wants it back within seconds of it serving again
_RECONNECT = (("grpc.initial_reconnect_backoff_ms", 250), ("grpc.max_reconnect_backoff_ms", 2000))

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_PROVIDERS = {
    "gemini": cpb.MODEL_PROVIDER_GEMINI,
    "anthropic": cpb.MODEL_PROVIDER_ANTHROPIC,
    "litellm": cpb.MODEL_PROVIDER_LITELLM,
    "openai-responses": cpb.MODEL_PROVIDER_OPENAI_RESPONSES,
    "other": cpb.MODEL_PROVIDER_OTHER,
}
_TRIGGERS = {
    "after-invocation": kpb.COMPACTION_TRIGGER_AFTER_INVOCATION,
    "sliding-window": kpb.COMPACTION_TRIGGER_SLIDING_WINDOW,
    "token-threshold": kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD,
}


class CommandError(click.ClickException):
    """A failed command: one ``error:`` line and a hint on stderr, exit status 1."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint

    def show(self, file: Any = None) -> None:
        stream = sys.stderr if file is None else file
        click.echo(f"error: {self.message}", file=stream)
        if self.hint:
            click.echo(f"hint: {self.hint}", file=stream)


def _hint(error: ContextEngineError, target: str) -> str:
    code, reason = error.code.name, error.reason
    if code == "UNAVAILABLE":
        return (
            f"is a sidecar running at {target}? Give its address with --target or "
            f"{TARGET_ENV} (`contextengine serve` starts one)"
        )
    if code == "UNAUTHENTICATED":
        return f"the sidecar checks tokens: give one with --token-file FILE, --token or {TOKEN_ENV}"
    if code == "PERMISSION_DENIED":
        return "the token's role or apps do not allow this call (docs/security.md)"
    if reason == "SESSION_NOT_FOUND":
        return (
            "check APP USER SESSION (`contextengine sessions list APP USER` lists them), or "
            "create the session first"
        )
    if reason == "EVENT_NOT_FOUND" or reason == "NOT_A_SUMMARY":
        return "`contextengine events list APP USER SESSION` shows the sequences and summaries"
    if reason == "COMPACTION_NOT_CONFIGURED":
        return "set the app's events_compaction_config first (`contextengine config set APP`)"
    if code == "DEADLINE_EXCEEDED":
        return "the call took longer than --timeout allows"
    if code == "INVALID_ARGUMENT":
        return "check the arguments (--help)"
    return ""


def _rpc_failure(error: ContextEngineError, target: str) -> CommandError:
    reason = f" {error.reason}" if error.reason else ""
    message = error.message or "(no message)"
    if error.code.name == "UNAVAILABLE":
        message = f"{target}: {message}"
    return CommandError(f"{error.code.name}{reason}: {message}", _hint(error, target))


@dataclass(frozen=True)
class Connection:
    """Where the sidecar is and how to authenticate, as the options gave it."""

    target: str
    token: str | None
    tls: bool
    root_certificates: bytes | None
    certificate_chain: bytes | None
    private_key: bytes | None
    server_name: str | None
    timeout: float

    def client(self) -> ContextEngineClient:
        try:
            return ContextEngineClient(
                self.target,
                timeout=self.timeout,
                channel_options=_RECONNECT,
                token=self.token,
                tls=self.tls,
                root_certificates=self.root_certificates,
                certificate_chain=self.certificate_chain,
                private_key=self.private_key,
                server_name=self.server_name,
            )
        except ValueError as error:
            raise click.UsageError(str(error)) from None


def _read(path: Path | None) -> bytes | None:
    return None if path is None else path.read_bytes()


def _connection(options: dict[str, Any]) -> Connection:
    token: str | None = options.pop("token")
    token_file: Path | None = options.pop("token_file")
    if token_file is not None:
        token = token_file.read_text().strip()
        if not token:
            raise click.UsageError(f"{token_file} holds no token")
    return Connection(
        target=options.pop("target"),
        token=token or None,
        tls=options.pop("tls"),
        root_certificates=_read(options.pop("ca_file")),
        certificate_chain=_read(options.pop("cert_file")),
        private_key=_read(options.pop("key_file")),
        server_name=options.pop("server_name"),
        timeout=options.pop("timeout"),
    )


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _connection_option_list() -> list[Callable[[Any], Any]]:
    """The sidecar's address, token and TLS options, as click decorators."""
    return [
        click.option(
            "--target",
            envvar=TARGET_ENV,
            default=DEFAULT_TARGET,
            show_default=True,
            help=f"the sidecar, host:port or unix:PATH (env {TARGET_ENV})",
        ),
        click.option(
            "--token",
            envvar=TOKEN_ENV,
            default=None,
            help=f"bearer token (env {TOKEN_ENV}); prefer --token-file, which ps does not show",
        ),
        click.option(
            "--token-file",
            envvar=TOKEN_FILE_ENV,
            type=_FILE,
            default=None,
            help=f"file holding the bearer token (env {TOKEN_FILE_ENV}); wins over --token",
        ),
        click.option("--tls", is_flag=True, help="connect with TLS (the system's roots)"),
        click.option("--ca-file", type=_FILE, help="PEM roots to verify the server (implies TLS)"),
        click.option("--cert-file", type=_FILE, help="client certificate, PEM (mTLS)"),
        click.option("--key-file", type=_FILE, help="client private key, PEM (mTLS)"),
        click.option(
            "--server-name", default=None, help="the name the server's certificate must carry"
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0.1),
            default=10.0,
            show_default=True,
            help="deadline of each call in seconds, retries included",
        ),
    ]


#: the parameter names of the connection options
_CONNECTION_NAMES = (
    "target",
    "token",
    "token_file",
    "tls",
    "ca_file",
    "cert_file",
    "key_file",
    "server_name",
    "timeout",
)


def _with_root_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The command's connection options, where those given before the command (``contextengine
    --target HOST sessions list``) stand in for the ones the command's own line left out: the
    command's line wins, then the line before the command, then the environment, then the
    default."""
    ctx = click.get_current_context()
    root = ctx.find_root()
    if root is ctx:
        return kwargs
    merged = dict(kwargs)
    for name in _CONNECTION_NAMES:
        given_before = root.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
        given_here = ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
        if given_before and not given_here:
            merged[name] = root.params[name]
    return merged


def _connection_options(fn: F) -> F:
    """The sidecar's address, token and TLS options, on the command (and, through the root
    group, before it); the command receives a ``Connection`` as ``conn``."""

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        conn = _connection(_with_root_options(kwargs))
        for name in _CONNECTION_NAMES:
            kwargs.pop(name, None)
        return fn(conn=conn, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_connection_option_list()):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


_json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="print proto3 JSON for scripts (proto field names; 64-bit integers as numbers)",
)


def _run(conn: Connection, work: Callable[[ContextEngineClient], Awaitable[T]]) -> T:
    """Runs ``work`` with a client of ``conn``; an ContextEngineError becomes a CommandError."""

    async def go() -> T:
        async with conn.client() as client:
            return await work(client)

    try:
        return asyncio.run(go())
    except ContextEngineError as error:
        raise _rpc_failure(error, conn.target) from None


# The command tree ---------------------------------------------------------------------------


def _root(**_connection: Any) -> None:
    """The connection options given before the command: each command reads them from the root
    context (``_with_root_options``)."""


for _option in reversed(_connection_option_list()):
    _root = _option(_root)

cli = click.group(
    name="contextengine",
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Look at a running sidecar's sessions, events, contexts, summaries and memories. The "
        "connection options may come before the command or after it (after wins)."
    ),
)(_root)


@cli.group(
    help=(
        "List, show and delete sessions. The sidecar has no RPC that lists apps or users: "
        "ListSessions needs the app (and optionally the user), so they are arguments."
    )
)
def sessions() -> None:
    pass


@sessions.command(name="list")
@click.argument("app")
@click.argument("user", required=False, default="")
@_json_option
@_connection_options
def sessions_list(conn: Connection, app: str, user: str, as_json: bool) -> None:
    """The sessions of APP (of one USER when given), by user and session id."""

    async def work(client: ContextEngineClient) -> list[Any]:
        return [session async for session in client.list_sessions(app, user)]

    found = _run(conn, work)
    scope = f"{app} / {user}" if user else app
    Output(as_json).answer(
        pb.ListSessionsResponse(sessions=found),
        lambda: render.sessions_table(found, title=f"{len(found)} sessions of {scope}"),
    )


@sessions.command(name="show")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@click.option(
    "--events", "recent", type=click.IntRange(min=0), default=None, help="only the last N events"
)
@_json_option
@_connection_options
def sessions_show(
    conn: Connection, app: str, user: str, session: str, recent: int | None, as_json: bool
) -> None:
    """A session: ids, times, state and its events."""
    found = _run(
        conn, lambda client: client.get_session(app, user, session, num_recent_events=recent)
    )
    Output(as_json).answer(found, lambda: render.session_view(found))


@sessions.command(name="delete")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@click.option("--yes", "-y", is_flag=True, help="do not ask for confirmation")
@click.option("--allow-missing", is_flag=True, help="succeed when the session does not exist")
@_connection_options
def sessions_delete(
    conn: Connection, app: str, user: str, session: str, yes: bool, allow_missing: bool
) -> None:
    """Deletes a session and its events (asks first unless --yes)."""
    if not yes:
        click.confirm(f"delete session {app}/{user}/{session} and its events?", abort=True)
    deleted = _run(
        conn,
        lambda client: client.delete_session(app, user, session, allow_missing=allow_missing),
    )
    click.echo(f"deleted {app}/{user}/{session}" if deleted else f"no session {session}: nothing")


@cli.group(help="List a session's events, or follow them live.")
def events() -> None:
    pass


@events.command(name="list")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@click.option(
    "--after", type=click.IntRange(min=0), default=0, help="only events after this sequence"
)
@click.option("--last", type=click.IntRange(min=1), default=None, help="only the last N events")
@_json_option
@_connection_options
def events_list(
    conn: Connection,
    app: str,
    user: str,
    session: str,
    after: int,
    last: int | None,
    as_json: bool,
) -> None:
    """The events of a session in log order: sequence, time, author, kind, content."""

    async def work(client: ContextEngineClient) -> pb.ListEventsResponse:
        start = after
        if last is not None:  # sequences have no gaps: only the last pages are read
            probe = await client.list_events_page(app, user, session, page_size=1)
            start = max(after, probe.last_sequence - last)
        first = await client.list_events_page(app, user, session, after_sequence=start)
        answer = pb.ListEventsResponse(last_sequence=first.last_sequence)
        answer.events.extend(first.events)
        if first.next_page_token:
            async for event in client.list_events(
                app, user, session, after_sequence=first.events[-1].sequence
            ):
                answer.events.append(event)
        if last is not None and len(answer.events) > last:
            del answer.events[: len(answer.events) - last]
        return answer

    answer = _run(conn, work)
    Output(as_json).answer(
        answer,
        lambda: render.events_table(
            answer.events,
            title=(
                f"{len(answer.events)} events of {app} / {user} / {session} "
                f"(last sequence {answer.last_sequence})"
            ),
        ),
    )


@events.command(name="tail")
@click.argument("app")
@click.argument("user", required=False, default="")
@click.argument("session", required=False, default="")
@click.option(
    "--last",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="show the session's last N events first",
)
@click.option(
    "--after",
    type=click.IntRange(min=0),
    default=None,
    help="start after this sequence of the session instead (0: the whole log)",
)
@click.option(
    "--from-start",
    is_flag=True,
    help="a user or an app: print the events recorded so far too (by default only new ones)",
)
@click.option(
    "--max-failures",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="give up after this many failed resubscriptions in a row (about 2 s apart)",
)
@_json_option
@_connection_options
def events_tail(
    conn: Connection,
    app: str,
    user: str,
    session: str,
    last: int,
    after: int | None,
    from_start: bool,
    max_failures: int,
    as_json: bool,
) -> int:
    """Follows events live (SubscribeEvents): one session's, or with only APP [USER] every
    session's of the user or the app (each line then starts with user/session). One line per
    event; --json: one JSON object per line (an Event; a SubscribedEvent, with its app, user and
    session, for a user or an app). Resubscribes from the last event seen when the sidecar
    restarts or the connection drops. Ctrl-C stops it (status 130)."""
    if session and not user:
        raise click.UsageError("a SESSION needs its USER")
    out = Output(as_json)
    notes = Output(False, sys.stderr)
    one_session = bool(session)

    async def work(client: ContextEngineClient) -> int:
        cursor = ""
        if one_session:
            start = after
            if start is None:
                page = await client.list_events_page(app, user, session, page_size=1)
                start = max(page.last_sequence - last, 0)
            cursor = str(start)
        # Ctrl-C (and SIGTERM) end the subscription cleanly, whatever the shell did to SIGINT
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        stopped: list[int] = []

        def stop(signum: int) -> None:
            stopped.append(signum)
            task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop, signum)
        frames = client.subscribe_events(
            app, user, session, cursor=cursor, max_failures=max_failures
        )
        # a user's or an app's replay is skipped unless --from-start (its cursor is opaque)
        live = one_session or from_start
        try:
            async with contextlib.aclosing(frames):
                async for frame in frames:
                    kind = frame.WhichOneof("frame")
                    if kind == "event" and live:
                        _print_followed(out, frame.event, one_session)
                    elif kind == "caught_up":
                        live = True
                        notes.show(Text("-- caught up; following (Ctrl-C stops) --", style="dim"))
        except asyncio.CancelledError:
            if not stopped:
                raise
            if sys.version_info >= (3, 11):  # Python 3.10 counts no cancellations to undo
                task.uncancel()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        return INTERRUPTED if stopped and stopped[0] == signal.SIGINT else 0

    return _run(conn, work)


def _print_followed(out: Output, followed: spb.SubscribedEvent, one_session: bool) -> None:
    event = followed.event
    if out.as_json:
        out.json_line(event if one_session else followed)
        return
    line = render.event_line(event, width=10**6)
    if not one_session:
        where = Text()
        where.append(f"{followed.user_id}/{followed.session_id} ", style="yellow")
        where.append_text(line)
        line = where
    out.line(line)


@cli.command()
@click.argument("app")
@click.argument("user")
@click.argument("session")
@click.option("--agent", required=True, help="the agent whose model call the context is for")
@click.option("--branch", default=None, help="the agent's branch (ADK's event.branch)")
@click.option(
    "--model",
    default="",
    help="the model the call is for (the prompt cache's fingerprint covers it)",
)
@click.option(
    "--provider",
    type=click.Choice(sorted(_PROVIDERS)),
    default=None,
    help="the model's provider (default: the server's guess from --model)",
)
@click.option(
    "--compact",
    is_flag=True,
    help=(
        "let BuildContext run the token-threshold compaction first, as an agent's call would "
        "(by default the CLI only looks: skip_compaction)"
    ),
)
@_json_option
@_connection_options
def context(
    conn: Connection,
    app: str,
    user: str,
    session: str,
    agent: str,
    branch: str | None,
    model: str,
    provider: str | None,
    compact: bool,
    as_json: bool,
) -> None:
    """The context AGENT's next model call gets (BuildContext): each content with its role,
    author (another agent's reframed turn says so), estimated tokens and parts; summaries with
    the events they cover; the cacheable prefix boundary."""
    identity = None
    if model or provider:
        identity = cpb.ModelIdentity(
            model=model,
            provider=_PROVIDERS[provider] if provider else cpb.MODEL_PROVIDER_UNSPECIFIED,
        )

    async def work(client: ContextEngineClient) -> tuple[cpb.BuildContextResponse, list[Any]]:
        built = await client.build_context(
            app,
            user,
            session,
            agent_name=agent,
            branch=branch,
            model=identity,
            skip_compaction=not compact,
        )
        if as_json:
            return built, []
        log = [event async for event in client.list_events(app, user, session)]
        return built, log

    built, log = _run(conn, work)
    Output(as_json).answer(
        built, lambda: render.context_view(built, log, title=f"context of {agent}")
    )


@cli.group(help="A session's compaction: its status, compacting now, expanding a summary.")
def compaction() -> None:
    pass


@compaction.command(name="status")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@_json_option
@_connection_options
def compaction_status(conn: Connection, app: str, user: str, session: str, as_json: bool) -> None:
    """Whether a compaction runs, how many ran and failed, the last error."""
    status = _run(conn, lambda client: client.compaction_status(app, user, session))
    Output(as_json).answer(status, lambda: render.compaction_status_view(status))


@compaction.command(name="compact")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@click.option(
    "--trigger",
    type=click.Choice(sorted(_TRIGGERS)),
    default="after-invocation",
    show_default=True,
    help="which rule picks the range",
)
@click.option("--agent", default="", help="the agent whose view is compacted")
@click.option("--branch", default=None, help="the branch whose view is compacted")
@click.option(
    "--deadline",
    type=click.FloatRange(min=0.1),
    default=120.0,
    show_default=True,
    help="seconds to wait for the summarizer",
)
@_json_option
@_connection_options
def compaction_compact(
    conn: Connection,
    app: str,
    user: str,
    session: str,
    trigger: str,
    agent: str,
    branch: str | None,
    deadline: float,
    as_json: bool,
) -> None:
    """Compacts now (Compact) and prints the summary appended, or why none was."""
    answer = _run(
        conn,
        lambda client: client.compact(
            app,
            user,
            session,
            trigger=_TRIGGERS[trigger],
            agent_name=agent,
            branch=branch,
            deadline_seconds=deadline,
        ),
    )
    Output(as_json).answer(
        answer,
        lambda: (
            render.summary_view(answer.summary, "appended")
            if answer.HasField("summary")
            else Text(f"no summary: {answer.skipped_reason or 'nothing to compact'}")
        ),
    )


@compaction.command(name="expand")
@click.argument("app")
@click.argument("user")
@click.argument("session")
@click.argument("sequence", type=click.IntRange(min=1))
@_json_option
@_connection_options
def compaction_expand(
    conn: Connection, app: str, user: str, session: str, sequence: int, as_json: bool
) -> None:
    """The raw events and earlier summaries the summary at SEQUENCE replaced (ExpandSummary)."""
    answer = _run(conn, lambda client: client.expand_summary(app, user, session, sequence))
    Output(as_json).answer(
        answer, lambda: Group(render.summary_view(answer.summary), render.expansion_view(answer))
    )


@cli.group(help="Search a user's memories.")
def memory() -> None:
    pass


@memory.command(name="search")
@click.argument("app")
@click.argument("user")
@click.argument("query")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=0,
    help="at most N memories (0: the app's max_results)",
)
@_json_option
@_connection_options
def memory_search(
    conn: Connection, app: str, user: str, query: str, limit: int, as_json: bool
) -> None:
    """USER's memories that share words with QUERY, best first (SearchMemory)."""
    answer = _run(conn, lambda client: client.search_memory(app, user, query, limit=limit))
    Output(as_json).answer(
        answer,
        lambda: render.memory_table(
            answer, title=f"{len(answer.memories)} memories for {query!r} ({answer.ranking})"
        ),
    )


@cli.group(
    name="config",
    help=(
        "App and session configuration on a running sidecar (`config show` and `config check` "
        "are about the sidecar's own settings)."
    ),
)
def config_group() -> None:
    pass


def _scope(app: str, user: str | None, session: str | None) -> tuple[str, str] | None:
    if (user is None) != (session is None):
        raise click.UsageError("give both USER and SESSION (session configuration) or neither")
    return None if user is None or session is None else (user, session)


def _print_config(message: Message, as_json: bool) -> None:
    out = Output(as_json)
    if as_json:
        out.json(message)
        return
    from contextengine.console.output import to_json

    data = to_json(message)
    out.file.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True) if data else "{}\n")


@config_group.command(name="get")
@click.argument("app")
@click.argument("user", required=False)
@click.argument("session", required=False)
@_json_option
@_connection_options
def config_get(
    conn: Connection, app: str, user: str | None, session: str | None, as_json: bool
) -> None:
    """APP's configuration (GetAppConfig) as YAML, or with USER and SESSION the session's own
    configuration and the compaction configuration in effect for it (GetSessionConfig)."""
    scope = _scope(app, user, session)
    if scope is None:
        found: Message = _run(conn, lambda client: client.get_app_config(app))
    else:
        found = _run(conn, lambda client: client.get_session_config(app, *scope))
    _print_config(found, as_json)


def _load(file: str, message: Message) -> Message:
    """``message`` filled from a YAML or JSON file ('-': standard input)."""
    text = sys.stdin.read() if file == "-" else Path(file).read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise click.UsageError(f"{file}: not YAML or JSON: {error}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise click.UsageError(f"{file}: the configuration must be a mapping")
    try:
        json_format.ParseDict(json.loads(json.dumps(data, default=str)), message)
    except json_format.ParseError as error:
        raise click.UsageError(f"{file}: {error}") from None
    return message


@config_group.command(name="set")
@click.argument("app")
@click.argument("user", required=False)
@click.argument("session", required=False)
@click.option(
    "--file",
    "-f",
    "file",
    required=True,
    help="YAML or JSON file with the configuration's fields ('-': standard input)",
)
@_json_option
@_connection_options
def config_set(
    conn: Connection,
    app: str,
    user: str | None,
    session: str | None,
    file: str,
    as_json: bool,
) -> None:
    """Replaces APP's configuration (UpdateAppConfig; app_name comes from APP), or with USER and
    SESSION the session's own (UpdateSessionConfig), from a YAML or JSON file, and prints what
    the sidecar stored."""
    scope = _scope(app, user, session)
    if scope is None:
        app_config = _load(file, config_pb2.AppConfig())
        assert isinstance(app_config, config_pb2.AppConfig)
        app_config.app_name = app
        stored: Message = _run(conn, lambda client: client.update_app_config(app_config))
    else:
        session_config = _load(file, config_pb2.SessionConfig())
        assert isinstance(session_config, config_pb2.SessionConfig)
        stored = _run(
            conn, lambda client: client.update_session_config(app, *scope, session_config)
        )
    _print_config(stored, as_json)


def connection_parameters() -> list[click.Parameter]:
    """The connection options, for a group that takes them before the command
    (``contextengine.cli``'s root: ``contextengine --target HOST sessions list APP``); the
    commands read them from the root context."""
    return list(cli.params)
