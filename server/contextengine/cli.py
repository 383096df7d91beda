"""The ``contextengine`` command line: ``serve``, ``config show``, ``config check`` and
``hash-token`` here; the operator's commands against a running sidecar (``sessions``, ``events``,
``context``, ``compaction``, ``memory``, ``config get|set``) in ``contextengine.console``, a
click command tree imported only when one of them runs, so that ``serve`` loads neither click,
rich nor the client (tests/test_startup_imports.py).

``serve``'s setting flags are not written here: one flag per field of ``ServerSettings``, with the
field's help text, is derived by :func:`add_setting_flags` (``contextengine.config`` has the
rule), so a field added there is a flag, a ``CONTEXTENGINE_`` variable and a file key at once.
Besides the settings, the only option is ``--config FILE``, which says where settings come from."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from contextengine.version import __version__

# The server's modules (settings, the transport, the stores) are imported by the functions that
# use them: the console's commands (contextengine.console) never load them.
if TYPE_CHECKING:
    from contextengine.config import Config, Setting
    from contextengine.settings import ServerSettings


def _precedence() -> str:
    from contextengine.config import CONFIG_ENV

    return (
        "Each setting is taken from, highest first: its flag, its CONTEXTENGINE_<NAME> "
        f"environment variable, the TOML file of --config (or {CONFIG_ENV}), its default."
    )


def _flag_help(item: Setting) -> str:
    default = item.external(item.default)
    shown = "unset" if default is None or default == "" else default
    text = f"{item.help} (default: {shown}; env {item.env})"
    return text.replace("%", "%%")  # argparse formats help strings with %


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting (only the flags given end up in the namespace, under the setting's
    name), and ``--config``."""
    from contextengine.config import CONFIG_ENV, settings_fields

    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"TOML configuration file, flat keys named as the settings (env {CONFIG_ENV})",
    )
    group = parser.add_argument_group("settings", _precedence())
    for item in settings_fields():
        if item.is_bool:
            group.add_argument(
                item.flag,
                dest=item.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=_flag_help(item),
            )
            continue
        metavar = "{" + ",".join(item.choices) + "}" if item.choices else item.metavar
        group.add_argument(
            item.flag,
            dest=item.name,
            default=argparse.SUPPRESS,
            metavar=metavar,
            help=_flag_help(item),
        )


#: the console's commands (contextengine.console.COMMANDS, repeated here so that listing them in
#: the help imports nothing), each with its help line
_CONSOLE_COMMANDS = {
    "sessions": "list, show or delete sessions of a running sidecar",
    "events": "list a session's events, or follow them live (tail)",
    "context": "the context an agent's next model call gets (BuildContext), rendered",
    "compaction": "a session's compaction status; compact now; expand a summary",
    "memory": "search a user's memories",
}
_CONSOLE_CONFIG_COMMANDS = {
    "get": "an app's (or a session's) configuration on a running sidecar, as YAML or JSON",
    "set": "replace an app's (or a session's) configuration from a YAML or JSON file",
}
_CONSOLE_EPILOG = (
    "The operator commands take --target (env CONTEXTENGINE_TARGET), --token / --token-file "
    "(env CONTEXTENGINE_TOKEN / CONTEXTENGINE_TOKEN_FILE) and TLS options, before or after the "
    "command; `contextengine COMMAND --help` has each one's."
)
#: the console's connection options (contextengine.console.commands), which may also come before
#: the command: those that take a value, and the flags
_CONNECTION_VALUED = frozenset(
    {
        "--target",
        "--token",
        "--token-file",
        "--ca-file",
        "--cert-file",
        "--key-file",
        "--server-name",
        "--timeout",
    }
)
_CONNECTION_FLAGS = frozenset({"--tls"})


def _command_words(argv: Sequence[str]) -> list[str]:
    """``argv`` without the connection options in front of the command."""
    words = list(argv)
    while words:
        name = words[0].split("=", 1)[0]
        if name in _CONNECTION_FLAGS or (name in _CONNECTION_VALUED and "=" in words[0]):
            words = words[1:]
        elif name in _CONNECTION_VALUED:
            words = words[2:]
        else:
            break
    return words


def _console_argv(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is one of the console's commands (handed to contextengine.console),
    with or without connection options in front of it."""
    words = _command_words(argv)
    if not words:
        return False
    if words[0] in _CONSOLE_COMMANDS:
        return True
    return words[0] == "config" and len(words) > 1 and words[1] in _CONSOLE_CONFIG_COMMANDS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextengine",
        description="A context engine for AI agents, as a gRPC sidecar.",
        epilog=_CONSOLE_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"contextengine {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="run the sidecar until SIGTERM/SIGINT")
    add_setting_flags(run)
    config = sub.add_parser(
        "config", help="show or check the configuration; get or set an app's on a sidecar"
    )
    config_sub = config.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser(
        "show",
        help="print the effective configuration as TOML, with where each value came from",
        description=(
            "The settings `serve` would run with (the same flags, environment and file), each "
            "line commented with its source; secrets are masked."
        ),
    )
    add_setting_flags(show)
    check = config_sub.add_parser(
        "check",
        help="check a configuration file (keys and values), ignoring the environment",
    )
    check.add_argument("file", type=Path, metavar="FILE")
    for name, text in _CONSOLE_CONFIG_COMMANDS.items():
        config_sub.add_parser(name, help=text, add_help=False)  # run by contextengine.console
    sub.add_parser(
        "hash-token",
        help="print the SHA-256 of a bearer token read from standard input (for a token file)",
        description=(
            "Reads one token from standard input (not an argument: it stays out of the shell's "
            "history and the process list) and prints the hex digest a token file's sha256 "
            "takes."
        ),
    )
    for name, text in _CONSOLE_COMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)  # run by contextengine.console
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line (exits with status 2 and usage on bad syntax, as argparse does)."""
    return _parser().parse_args(argv)


def _flags_given(args: argparse.Namespace) -> dict[str, object]:
    from contextengine.config import settings_fields

    return {item.name: getattr(args, item.name) for item in settings_fields() if item.name in args}


def load_config(args: argparse.Namespace) -> Config:
    """The configuration of ``serve`` / ``config show``: flags, environment, file, defaults."""
    from contextengine.config import load

    return load(_flags_given(args), config_file=args.config)


def serve_settings(args: argparse.Namespace) -> ServerSettings:
    """The settings ``serve`` runs with; ValueError (ConfigError: its message names the setting
    and its source) for values no server can run with."""
    return load_config(args).settings


def _show(config: Config) -> str:
    from contextengine.config import mask, toml_value

    lines = [
        "# the effective configuration of `contextengine serve`: flags > CONTEXTENGINE_ "
        "environment > file > defaults",
    ]
    if config.file is not None:
        lines.append(f"# file: {config.file}")
    for value in config.values:
        item = value.setting
        shown = mask(item, item.external(value.value))
        source = value.where if value.kind != "file" else f"file {config.file}"
        if shown is None:
            lines.append(f"# {item.name} is unset  # {source}")
        else:
            lines.append(f"{item.name} = {toml_value(shown)}  # {source}")
    return "\n".join(lines) + "\n"


def _config_command(args: argparse.Namespace) -> int:
    from contextengine.config import load

    if args.config_command == "show":
        sys.stdout.write(_show(load_config(args)))
        return 0
    checked = load({}, environ={}, config_file=args.file)
    given = sum(1 for value in checked.values if value.kind == "file")
    print(f"{args.file}: ok ({given} of {len(checked.values)} settings set)")
    return 0


def _hash_token() -> int:
    from contextengine.auth import hash_token

    token = sys.stdin.readline().strip()
    if not token:
        print("no token on standard input", file=sys.stderr)
        return 2
    print(hash_token(token))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if _console_argv(given):
        try:
            from contextengine.console.commands import main as console_main

            return console_main(given)
        except KeyboardInterrupt:  # Ctrl-C while the console's modules load
            return 130
    from contextengine.config import ConfigError

    args = parse(given)
    try:
        if args.command == "config":
            return _config_command(args)
        if args.command == "hash-token":
            return _hash_token()
        settings = serve_settings(args)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    return _serve(settings)


def _serve(settings: ServerSettings) -> int:
    import sqlite3

    from contextengine.process import run_server
    from contextengine.store import mask_dsn
    from contextengine.store.sqlite import DatabaseLockedError

    logging.basicConfig(
        level=getattr(logging, settings.log_level),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    port_file = Path(settings.port_file) if settings.port_file else None
    try:
        run_server(settings, port_file=port_file)
    except DatabaseLockedError as error:
        # Another sidecar serves this file (``make run`` twice, two replicas on one volume).
        logging.getLogger("contextengine.server").error("not started: %s", error)
        return 1
    except (sqlite3.Error, OSError) as error:
        # The database cannot be opened or brought to the current schema (a full disk, a
        # read-only or missing directory, a file that is not a database): one line, no traceback.
        logging.getLogger("contextengine.server").error(
            "the database %s cannot be used: %s (%s)",
            mask_dsn(settings.db),  # a postgresql:// URL may hold a password
            error,
            type(error).__name__,
        )
        return 1
    return 0
