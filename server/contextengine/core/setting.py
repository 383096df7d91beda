"""``setting``: how one field of the sidecar's settings describes itself, once, for every place it
can be set (a ``contextengine serve`` flag, a ``CONTEXTENGINE_...`` environment variable, a key of
the configuration file) and documented (its help text).

Settings are frozen dataclasses (``EngineSettings``, ``ServerSettings``); every field is made with
:func:`setting`, so the command line, the environment and the configuration file are derived from
the dataclasses and cannot drift from them (``contextengine.config``)."""

from __future__ import annotations

from dataclasses import field
from typing import Any

__all__ = ["SETTING_KEY", "SettingInfo", "setting"]

#: the key of a field's ``metadata`` that holds its :class:`SettingInfo`
SETTING_KEY = "contextengine.setting"


class SettingInfo:
    """What a settings field says about itself besides its type and default."""

    __slots__ = ("flag", "help", "scale", "secret")

    def __init__(self, help: str, *, flag: str | None, scale: float | None, secret: bool) -> None:
        #: one sentence for ``--help`` and docs
        self.help = help
        #: the flag when it is not ``--<name with dashes>`` (kept for flags older than this rule)
        self.flag = flag
        #: a flag/env/file value is multiplied by this to get the field's value (a ``-ms`` flag
        #: of a field in seconds: 0.001); None: taken as it is
        self.scale = scale
        #: never logged or echoed back (tokens, keys)
        self.secret = secret


def setting(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    scale: float | None = None,
    secret: bool = False,
) -> Any:
    """A settings field with ``default`` (immutable values only) and what the configuration
    layer needs to offer it: ``x: int = setting(3, "how many")``."""
    info = SettingInfo(help, flag=flag, scale=scale, secret=secret)
    return field(default=default, metadata={SETTING_KEY: info})
