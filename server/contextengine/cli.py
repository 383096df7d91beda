"""The ``contextengine`` command line, one click command tree: ``serve``, ``config show``,
``config check`` and ``hash-token`` here; the operator's commands against a running sidecar
(``sessions``, ``events``, ``context``, ``compaction``, ``memory``, ``config get|set``) in
``contextengine.console`` (the client distribution's ``cli`` extra).

The tree is lazy both ways, so that ``serve`` loads neither rich, the console nor the client, and
a console command loads no server module (tests/test_startup_imports.py): the console's commands
are imported when one of them runs (their help lines are written here), and ``serve`` and
``config show`` build their setting flags when they run.

Those flags are not written here: one per field of ``ServerSettings``, with the field's help text,
is derived by :func:`setting_options` (``contextengine.config`` has the rule), so a field added
there is a flag, a ``CONTEXTENGINE_`` variable and a file key at once. Besides the settings, the
only option is ``--config FILE``, which says where settings come from. The console's connection
options (``--target``, ``--token``, TLS) may come before its command: the root group takes them
from the console when the command line starts with an option."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from contextengine.version import __version__

# The server's modules (settings, the transport, the stores) are imported by the functions that
# use them: the console's commands never load them.
if TYPE_CHECKING:
    from contextengine.config import Config, Setting
    from contextengine.settings import ServerSettings

#: exit status of a command interrupted by Ctrl-C (128 + SIGINT)
INTERRUPTED = 130
#: where the root context keeps the console's connection options, when it takes them
_CONNECTION = "contextengine.connection_parameters"

T = TypeVar("T")

#: the console's commands (``contextengine.console.COMMANDS``), each with its help line, written
#: here so that listing them in the help imports nothing
_CONSOLE_COMMANDS = {
    "sessions": "list, show or delete sessions of a running sidecar",
    "events": "list a session's events, or follow them live (tail)",
    "context": "the context an agent's next model call gets (BuildContext), rendered",
    "compaction": "a session's compaction status; compact now; expand a summary",
    "memory": "search a user's memories",
}
#: the console's ``config`` subcommands (``contextengine.console.CONFIG_COMMANDS``)
_CONSOLE_CONFIG_COMMANDS = {
    "get": "an app's (or a session's) configuration on a running sidecar, as YAML or JSON",
    "set": "replace an app's (or a session's) configuration from a YAML or JSON file",
}
_CONSOLE_EPILOG = (
    "The operator commands take --target (env CONTEXTENGINE_TARGET), --token / --token-file "
    "(env CONTEXTENGINE_TOKEN / CONTEXTENGINE_TOKEN_FILE) and TLS options, before or after the "
    "command; `contextengine COMMAND --help` has each one's."
)


class ConfigRefused(click.ClickException):
    """A configuration no sidecar can run with: its one line (which names the setting and its
    source) on stderr, exit status 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(self.message, file=sys.stderr if file is None else file)


class _LazyGroup(click.Group):
    """A group some of whose commands are built or imported only when they run: ``lazy`` maps
    a name to its help line and a function returning the command."""

    def __init__(
        self, *args: Any, lazy: Mapping[str, tuple[str, Callable[[], click.Command]]], **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self._lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *self._lazy]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._lazy:
            return self._lazy[cmd_name][1]()
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands with their help lines, importing none of the lazy ones."""
        rows = [
            (name, cmd.get_short_help_str(formatter.width))
            for name, cmd in self.commands.items()
            if not cmd.hidden
        ]
        rows += [(name, text) for name, (text, _) in self._lazy.items()]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))


def _console_command(*path: str) -> Callable[[], click.Command]:
    """The console's command at ``path`` in its tree (contextengine.console.commands), imported
    when it runs."""

    def load() -> click.Command:
        from contextengine.console.commands import cli as console

        command: click.Command = console
        for name in path:
            assert isinstance(command, click.Group)
            found = command.commands.get(name)
            if found is None:
                raise click.UsageError(f"no such command {name!r}")
            command = found
        return command

    return load


class _Root(_LazyGroup):
    """The ``contextengine`` group. A command line that starts with an option other than
    ``--help`` / ``--version`` is a console command with its connection options in front
    (``contextengine --target HOST sessions list APP``): the group takes the console's connection
    options then, which the console's commands read from the root context."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0].startswith("-") and args[0] not in ("--help", "-h", "--version"):
            from contextengine.console.commands import connection_parameters

            ctx.meta[_CONNECTION] = connection_parameters()
        return super().parse_args(ctx, args)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return [*super().get_params(ctx), *ctx.meta.get(_CONNECTION, ())]


class _SettingsFormatter(click.HelpFormatter):
    """The option column at most 22 wide (argparse's was 24), so that at 80 columns the help
    column holds the longest ``CONTEXTENGINE_`` variable unbroken."""

    def write_dl(
        self, rows: Iterable[tuple[str, str]], col_max: int = 22, col_spacing: int = 2
    ) -> None:
        super().write_dl(rows, col_max, col_spacing)


class _SettingsContext(click.Context):
    formatter_class = _SettingsFormatter


class _SettingsCommand(click.Command):
    """A command whose options are the settings (``serve``, ``config show``)."""

    context_class = _SettingsContext


def _precedence() -> str:
    from contextengine.config import CONFIG_ENV

    return (
        "Each setting is taken from, highest first: its flag, its CONTEXTENGINE_<NAME> "
        f"environment variable, the TOML file of --config (or {CONFIG_ENV}), its default."
    )


def _flag_help(item: Setting) -> str:
    default = item.external(item.default)
    shown = "unset" if default is None or default == "" else default
    return f"{item.help} (default: {shown}; env {item.env})"


def setting_options() -> list[click.Parameter]:
    """One option per setting (a bool as ``--x/--no-x``; its value is the raw text the
    configuration parses), and ``--config``."""
    from contextengine.config import CONFIG_ENV, settings_fields

    options: list[click.Parameter] = [
        click.Option(
            ["--config", "config_file"],
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            metavar="FILE",
            help=f"TOML configuration file, flat keys named as the settings (env {CONFIG_ENV})",
        )
    ]
    for item in settings_fields():
        if item.is_bool:
            flag = item.flag.removeprefix("--")
            options.append(
                click.Option(
                    [f"--{flag}/--no-{flag}", item.name], default=None, help=_flag_help(item)
                )
            )
            continue
        metavar = "{" + ",".join(item.choices) + "}" if item.choices else item.metavar
        options.append(click.Option([item.flag, item.name], metavar=metavar, help=_flag_help(item)))
    return options


@dataclass(frozen=True)
class SettingsArgs:
    """What a ``serve`` / ``config show`` command line says of the settings: the flags given
    (setting name -> the flag's raw value) and ``--config``."""

    flags: dict[str, object]
    config_file: Path | None


def _settings_args(ctx: click.Context) -> SettingsArgs:
    from contextengine.config import settings_fields

    given = {
        item.name: ctx.params[item.name]
        for item in settings_fields()
        if ctx.get_parameter_source(item.name) is click.core.ParameterSource.COMMANDLINE
    }
    return SettingsArgs(given, ctx.params["config_file"])


def parse(argv: Sequence[str]) -> SettingsArgs:
    """The settings part of a ``serve ...`` or ``config show ...`` command line (a click usage
    error on bad syntax)."""
    words = list(argv)
    name = " ".join(words[:2]) if words[:1] == ["config"] else words[0]
    command = {"serve": _serve_command, "config show": _show_command}[name]()
    ctx = command.make_context(name, words[len(name.split()) :])
    return _settings_args(ctx)


def load_config(args: SettingsArgs) -> Config:
    """The configuration of ``serve`` / ``config show``: flags, environment, file, defaults."""
    from contextengine.config import load

    return load(args.flags, config_file=args.config_file)


def serve_settings(args: SettingsArgs) -> ServerSettings:
    """The settings ``serve`` runs with; ValueError (ConfigError: its message names the setting
    and its source) for values no server can run with."""
    return load_config(args).settings


def _refused(work: Callable[[], T]) -> T:
    """``work()``, with a ConfigError as :class:`ConfigRefused` (one line, exit status 2)."""
    from contextengine.config import ConfigError

    try:
        return work()
    except ConfigError as error:
        raise ConfigRefused(str(error)) from None


def _serve_command() -> click.Command:
    def run(**_given: object) -> int:  # the settings' values: read with their sources
        args = _settings_args(click.get_current_context())
        return _serve(_refused(lambda: serve_settings(args)))

    return _SettingsCommand(
        "serve",
        callback=run,
        params=setting_options(),
        help=f"Run the sidecar until SIGTERM/SIGINT. {_precedence()}",
        short_help="run the sidecar until SIGTERM/SIGINT",
    )


def _show_command() -> click.Command:
    def run(**_given: object) -> int:  # the settings' values: read with their sources
        args = _settings_args(click.get_current_context())
        return _refused(lambda: _write(_show(load_config(args))))

    return _SettingsCommand(
        "show",
        callback=run,
        params=setting_options(),
        help=(
            "The settings `serve` would run with (the same flags, environment and file), each "
            f"line commented with its source; secrets are masked. {_precedence()}"
        ),
        short_help="print the effective configuration as TOML, with where each value came from",
    )


def _write(text: str) -> int:
    sys.stdout.write(text)
    return 0


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


@click.command(
    "check", short_help="check a configuration file (keys and values), ignoring the environment"
)
@click.argument("file", type=click.Path(path_type=Path), metavar="FILE")
def _check(file: Path) -> int:
    """Check a configuration file (keys and values), ignoring the environment."""

    def check() -> int:
        from contextengine.config import load

        checked = load({}, environ={}, config_file=file)
        given = sum(1 for value in checked.values if value.kind == "file")
        click.echo(f"{file}: ok ({given} of {len(checked.values)} settings set)")
        return 0

    return _refused(check)


@click.command(
    "hash-token",
    short_help="print the SHA-256 of a bearer token read from standard input (for a token file)",
)
def _hash_token() -> int:
    """Reads one token from standard input (not an argument: it stays out of the shell's
    history and the process list) and prints the hex digest a token file's sha256 takes."""
    from contextengine.auth import hash_token

    token = sys.stdin.readline().strip()
    if not token:
        click.echo("no token on standard input", err=True)
        return 2
    click.echo(hash_token(token))
    return 0


_config = _LazyGroup(
    "config",
    help="Show or check the configuration; get or set an app's on a sidecar.",
    short_help="show or check the configuration; get or set an app's on a sidecar",
    lazy={
        "show": (
            "print the effective configuration as TOML, with where each value came from",
            _show_command,
        ),
        **{
            name: (text, _console_command("config", name))
            for name, text in _CONSOLE_CONFIG_COMMANDS.items()
        },
    },
)
_config.add_command(_check)

root = _Root(
    "contextengine",
    help="A context engine for AI agents, as a gRPC sidecar.",
    epilog=_CONSOLE_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"]},
    lazy={
        "serve": ("run the sidecar until SIGTERM/SIGINT", _serve_command),
        **{name: (text, _console_command(name)) for name, text in _CONSOLE_COMMANDS.items()},
    },
)
root.add_command(_config)
root.add_command(_hash_token)
click.version_option(__version__, prog_name="contextengine", message="%(prog)s %(version)s")(root)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; its exit status (2 for usage errors and configurations no sidecar can
    run with, 1 for a failed console command, 130 after Ctrl-C)."""
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        result = root.main(args=given, prog_name="contextengine", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except KeyboardInterrupt:  # Ctrl-C, also while the console's modules load
        return INTERRUPTED
    except OSError as error:
        click.echo(f"error: {error}", err=True)
        return 1
    return result if isinstance(result, int) else 0


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
