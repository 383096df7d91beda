"""The sidecar's configuration: the :class:`~contextengine.settings.ServerSettings` a process runs
with, from four sources with one precedence rule (highest first):

1. ``contextengine serve`` flags (``--max-request-bytes 1048576``);
2. environment variables ``CONTEXTENGINE_<NAME>`` (``CONTEXTENGINE_MAX_REQUEST_BYTES=1048576``);
3. a TOML configuration file (``--config FILE`` or ``CONTEXTENGINE_CONFIG=FILE``), flat keys
   ``<name> = value`` (``max_request_bytes = 1048576``);
4. the field's default.

Everything is derived from the dataclass fields (``contextengine.core.setting``): a setting's
*name* is its flag without the dashes (the field's name unless ``setting(flag=...)`` keeps an older
flag, as ``--subscription-max-hold-ms`` for the field ``subscription_max_hold_seconds``), and that
name gives the flag, the variable and the file key alike, in the flag's unit (``scale``). Each
value is checked by pydantic against the field's type and its ``Annotated`` range, and an error
names the setting and the source it came from (``CONTEXTENGINE_MAX_REQUEST_BYTES must be
positive (got '0')``). A file key that is no setting is an error; a ``CONTEXTENGINE_`` variable
that is none is ignored (clients read ``CONTEXTENGINE_TARGET``). An empty flag or variable unsets
an optional setting (None)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import TypeAdapter, ValidationError

from contextengine._compat import tomllib
from contextengine.core.setting import SETTING_KEY, SettingInfo
from contextengine.settings import ServerSettings

__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "Config",
    "ConfigError",
    "Setting",
    "Value",
    "load",
    "mask",
    "read_file",
    "settings_fields",
]

#: what every setting's environment variable starts with
ENV_PREFIX = "CONTEXTENGINE_"
#: the environment variable naming the configuration file (``--config`` wins over it)
CONFIG_ENV = f"{ENV_PREFIX}CONFIG"

SourceKind = Literal["default", "file", "env", "flag"]


class ConfigError(ValueError):
    """A configuration no sidecar can run with; the message names the setting and its source."""


@dataclass(frozen=True)
class Setting:
    """One field of :class:`ServerSettings` as the configuration sees it."""

    #: the dataclass field
    field: str
    #: the setting's name: the file key, and (upper-cased) the variable's tail
    name: str
    #: ``--name-with-dashes``, or ``setting(flag=...)``
    flag: str
    #: ``CONTEXTENGINE_<NAME>``
    env: str
    #: the field's default (in the field's unit)
    default: Any
    #: the field's type, with its ``Annotated`` constraints
    annotation: Any
    info: SettingInfo

    @property
    def help(self) -> str:
        return self.info.help

    @property
    def secret(self) -> bool:
        return self.info.secret

    @property
    def optional(self) -> bool:
        """Whether None is a value of the field (an empty flag or variable sets it)."""
        return type(None) in typing.get_args(_bare(self.annotation))

    @property
    def is_bool(self) -> bool:
        return _bare(self.annotation) is bool

    @property
    def choices(self) -> tuple[str, ...]:
        """The values of a ``Literal`` field (its flag's metavar), else ()."""
        bare = _bare(self.annotation)
        if typing.get_origin(bare) is Literal:
            return tuple(str(choice) for choice in typing.get_args(bare))
        return ()

    @property
    def metavar(self) -> str:
        """How ``--help`` names the flag's value: ``N``, ``NUMBER``, ``BOOL`` or ``TEXT``."""
        bare = _bare(self.annotation)
        kinds = {t for t in (typing.get_args(bare) or (bare,)) if t is not type(None)}
        names = {int: "N", float: "NUMBER", bool: "BOOL"}
        return names.get(kinds.pop(), "TEXT") if len(kinds) == 1 else "TEXT"

    def external(self, value: Any) -> Any:
        """A field value in the setting's own unit (the flag's): the inverse of ``scale``."""
        if self.info.scale is None or value is None:
            return value
        return round(value / self.info.scale, 9)

    @functools.cached_property
    def _adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.annotation)

    def parse(self, raw: Any, where: str) -> Any:
        """``raw`` (a string from a flag or variable, or a TOML value) as the field's value;
        ConfigError naming ``where`` when it is not one."""
        try:
            if isinstance(raw, str) and raw == "" and self.optional:
                return None
            value = raw
            if self.info.scale is not None:
                number = (
                    TypeAdapter(float).validate_strings(raw)
                    if isinstance(raw, str)
                    else TypeAdapter(float).validate_python(raw, strict=True)
                )
                value = number * self.info.scale
                return self._adapter.validate_python(value)
            if isinstance(raw, str):
                return self._adapter.validate_strings(raw)
            return self._adapter.validate_python(raw)
        except ValidationError as error:
            shown = mask(self, raw) if isinstance(raw, str) else raw
            raise ConfigError(f"{where} {self._explain(error)} (got {shown!r})") from None

    def _explain(self, error: ValidationError) -> str:
        """What the value must be, in words: the field's range when a bound failed (``must be
        positive``, ``must be in (0, 1]``), else pydantic's own reason."""
        first = error.errors()[0]
        if first["type"] in _BOUND_ERRORS:
            return f"must be {_describe_range(self.annotation)}"
        message = str(first["msg"])
        if message.startswith("Input should be "):
            return "must be " + message.removeprefix("Input should be ")
        return message[:1].lower() + message[1:]


_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def _bare(annotation: Any) -> Any:
    """The type without its ``Annotated`` constraints."""
    if typing.get_origin(annotation) is typing.Annotated:
        return typing.get_args(annotation)[0]
    return annotation


def _bounds(annotation: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if typing.get_origin(annotation) is not typing.Annotated:
        return found
    for meta in typing.get_args(annotation)[1:]:
        items = list(meta) if isinstance(meta, annotated_types.GroupedMetadata) else [meta]
        for item in items:
            for key in ("gt", "ge", "lt", "le"):
                if hasattr(item, key):
                    found[key] = getattr(item, key)
    return found


def _describe_range(annotation: Any) -> str:
    bounds = _bounds(annotation)
    low = ("(", bounds["gt"]) if "gt" in bounds else ("[", bounds["ge"]) if "ge" in bounds else None
    high = (
        (")", bounds["lt"]) if "lt" in bounds else ("]", bounds["le"]) if "le" in bounds else None
    )
    if low is not None and high is not None:
        return f"in {low[0]}{low[1]}, {high[1]}{high[0]}"
    if low is not None:
        if low[1] == 0:
            return "positive" if low[0] == "(" else "zero or more"
        return f"{'greater than' if low[0] == '(' else 'at least'} {low[1]}"
    if high is not None:
        return f"{'less than' if high[0] == ')' else 'at most'} {high[1]}"
    return "valid"


@functools.cache
def settings_fields() -> tuple[Setting, ...]:
    """Every setting, in the order of the dataclass fields (the engine's first)."""
    hints = typing.get_type_hints(ServerSettings, include_extras=True)
    found = []
    for field in dataclasses.fields(ServerSettings):
        info = field.metadata.get(SETTING_KEY)
        if not isinstance(info, SettingInfo):
            raise TypeError(f"ServerSettings.{field.name} is not declared with setting(...)")
        flag = info.flag or "--" + field.name.replace("_", "-")
        name = flag.removeprefix("--").replace("-", "_")
        if name == "config":  # --config and CONTEXTENGINE_CONFIG name the file
            raise TypeError(f"ServerSettings.{field.name}: 'config' cannot be a setting's name")
        found.append(
            Setting(
                field=field.name,
                name=name,
                flag=flag,
                env=ENV_PREFIX + name.upper(),
                default=field.default,
                annotation=hints[field.name],
                info=info,
            )
        )
    return tuple(found)


@dataclass(frozen=True)
class Value:
    """Where one setting's effective value came from."""

    setting: Setting
    #: the field's value
    value: Any
    kind: SourceKind
    #: ``--flag``, ``CONTEXTENGINE_NAME``, ``FILE: name`` or ``default``
    where: str


@dataclass(frozen=True)
class Config:
    """The loaded configuration: the settings, where each value came from, and the file read."""

    settings: ServerSettings
    values: tuple[Value, ...]
    file: Path | None


def read_file(path: Path) -> dict[str, Any]:
    """A configuration file's raw keys and values; ConfigError when it cannot be read, is not
    TOML, or has a key that is no setting (with the nearest setting's name)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: is not UTF-8 text ({error.reason})") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: is not valid TOML ({error})") from None
    names = [s.name for s in settings_fields()]
    for key in data:
        if key not in names:
            near = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigError(f"{path}: {key!r} is not a setting{hint}")
    return data


def load(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Config:
    """The settings from ``flags`` (setting name -> the flag's raw value, only the flags given),
    ``environ`` (default ``os.environ``) and the configuration file (``config_file``, else
    ``CONTEXTENGINE_CONFIG``), highest first, then the defaults. ConfigError names the setting
    and the source of the first bad value."""
    flags = flags or {}
    environ = os.environ if environ is None else environ
    if config_file is None and environ.get(CONFIG_ENV):
        config_file = Path(environ[CONFIG_ENV])
    file_values = read_file(config_file) if config_file is not None else {}
    chosen: list[Value] = []
    for item in settings_fields():
        kind: SourceKind
        if item.name in flags:
            raw, kind, where = flags[item.name], "flag", item.flag
        elif item.env in environ:
            raw, kind, where = environ[item.env], "env", item.env
        elif item.name in file_values:
            raw, kind, where = file_values[item.name], "file", f"{config_file}: {item.name}"
        else:
            chosen.append(Value(item, item.default, "default", "default"))
            continue
        chosen.append(Value(item, item.parse(raw, where), kind, where))
    try:
        settings = ServerSettings(**{v.setting.field: v.value for v in chosen})
    except ValueError as error:  # checks across fields (the pacer's)
        kinds = {v.kind for v in chosen}
        named = {"flag": "flags", "env": "environment", "file": str(config_file)}
        given = ", ".join(text for kind, text in named.items() if kind in kinds) or "defaults"
        raise ConfigError(f"{error} (settings from {given})") from None
    return Config(settings, tuple(chosen), config_file)


_URL_PASSWORD = re.compile(r"(://[^/:@\s]*:)[^@/\s]+@")


def mask(item: Setting, value: Any) -> Any:
    """``value`` as it may be shown: a secret as ``***``, a password inside a URL (a database
    DSN) as ``***``; an unset secret (None or empty) as it is."""
    if value is None or value == "":
        return value
    if item.secret:
        return "***"
    if isinstance(value, str):
        return _URL_PASSWORD.sub(r"\1***@", value)
    return value


def toml_value(value: Any) -> str:
    """``value`` as a TOML literal (what ``config show`` prints)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple | list | frozenset):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return toml_value(str(value))
