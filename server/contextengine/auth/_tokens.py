"""Bearer tokens and what each one grants, loaded from a token file and/or one token given in the
settings (``auth_token``, typically from ``CONTEXTENGINE_AUTH_TOKEN``).

A token file is TOML, YAML or JSON (by its suffix) holding a list ``tokens`` of entries::

    [[tokens]]
    name = "billing-agent"          # shown in logs instead of the token
    sha256 = "9f86d081884c7d65..."  # hex SHA-256 of the token (``contextengine hash-token``)
    # token = "..."                 # or the token itself (then the file is a secret)
    role = "write"                  # read | write | admin
    apps = ["billing", "support-*"] # app names or globs; "*" is every app
    users = ["alice"]               # optional: only these users (globs); default every user

Tokens are kept only as their SHA-256 digests: a presented token is hashed and looked up, so the
sidecar holds no token of the file in memory after loading it, and never logs one. The file is
followed: tokens added or removed take effect within a second, without a restart.
"""

from __future__ import annotations

import enum
import fnmatch
import hashlib
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contextengine._compat import tomllib

_LOG = logging.getLogger("contextengine.auth")

__all__ = ["Grant", "Role", "TokenTable", "hash_token", "load_token_file"]

_HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")
#: what a token may consist of: printable ASCII without spaces (it travels in an HTTP/2 header)
_TOKEN = re.compile(r"^[\x21-\x7e]+$")


class Role(enum.IntEnum):
    """What a grant allows, each role including the ones below it."""

    #: Get/List/BuildContext/Search, subscriptions, status and plans
    READ = 1
    #: sessions, events, rewinds, compactions, invocations, memory ingestion
    WRITE = 2
    #: app and session configuration (summarizer, cache, compaction), memory deletion
    ADMIN = 3

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(r.name.lower() for r in cls)
            raise ValueError(f"unknown role {text!r} (one of {names})") from None


@dataclass(frozen=True)
class Grant:
    """What one token may do: a role on a set of apps, optionally only for some users."""

    #: a name for logs and errors (never the token)
    name: str
    role: Role
    #: app names or globs (``fnmatch``); ``"*"`` matches every app
    apps: tuple[str, ...]
    #: user ids or globs, or None for every user (also what app-wide RPCs need)
    users: tuple[str, ...] | None = None

    def covers_app(self, app: str) -> bool:
        return any(_matches(app, pattern) for pattern in self.apps)

    def covers_user(self, user: str | None) -> bool:
        """Whether the grant reaches ``user``'s data; None means every user of an app (an
        app-wide listing or subscription), which only an unrestricted grant reaches."""
        if self.users is None:
            return True
        if user is None:
            return False
        return any(_matches(user, pattern) for pattern in self.users)


def _matches(value: str, pattern: str) -> bool:
    if pattern == "*":
        return True
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(value, pattern)
    return value == pattern


def hash_token(token: str) -> str:
    """The hex SHA-256 of ``token``: what a token file's ``sha256`` holds (``contextengine
    hash-token`` prints it). ValueError for a token no client could send."""
    if not _TOKEN.match(token):
        raise ValueError("a token is printable ASCII without spaces, and not empty")
    return hashlib.sha256(token.encode("ascii")).hexdigest()


class TokenTable:
    """The grants of every known token, by the SHA-256 of the token. Made from settings, it
    follows the token file: at most once a second (:data:`RELOAD_SECONDS`) a lookup compares the
    file's modification time and size with what was loaded and, when they changed, loads it
    again, so tokens are added and revoked without a restart. A file that no longer loads (half
    written, malformed) is logged once and the previous tokens are kept."""

    def __init__(
        self,
        grants: Mapping[str, Grant],
        *,
        tokens_file: str = "",
        extra: Mapping[str, Grant] | None = None,
    ) -> None:
        self._extra = dict(extra or {})
        self._grants = {**grants, **self._extra}
        self._file = Path(tokens_file) if tokens_file else None
        self._seen = _signature(self._file) if self._file is not None else None
        self._failed: tuple[int, int] | None = None
        self._next_check = time.monotonic() + RELOAD_SECONDS

    def __len__(self) -> int:
        return len(self._grants)

    def lookup(self, token: str) -> Grant | None:
        """The grant of ``token``, None when no such token is known."""
        if self._file is not None and time.monotonic() >= self._next_check:
            self._reload(self._file)
        if not _TOKEN.match(token):
            return None
        return self._grants.get(hashlib.sha256(token.encode("ascii")).hexdigest())

    def _reload(self, path: Path) -> None:
        self._next_check = time.monotonic() + RELOAD_SECONDS
        seen = _signature(path)
        if seen in (self._seen, self._failed):
            return
        try:
            grants = load_token_file(path)
        except ValueError as error:
            self._failed = seen
            _LOG.warning(
                "the token file changed but cannot be used (%s); keeping the old tokens", error
            )
            return
        self._grants = {**grants, **self._extra}
        self._seen = seen
        _LOG.info("token file reloaded: %d tokens", len(grants))

    @classmethod
    def from_settings(cls, tokens_file: str, token: str) -> TokenTable:
        """The tokens of ``tokens_file`` (when set; followed as it changes) and ``token`` (when
        set; admin on every app). ValueError naming the file and entry for anything malformed."""
        grants: dict[str, Grant] = {}
        if tokens_file:
            grants.update(load_token_file(Path(tokens_file)))
        extra: dict[str, Grant] = {}
        if token:
            try:
                digest = hash_token(token)
            except ValueError as error:
                raise ValueError(f"auth_token: {error}") from None
            extra[digest] = Grant("auth_token", Role.ADMIN, ("*",))
        return cls(grants, tokens_file=tokens_file, extra=extra)


#: how often (seconds, at most) a lookup looks whether the token file changed
RELOAD_SECONDS = 1.0


def _signature(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def load_token_file(path: Path) -> dict[str, Grant]:
    """The grants of a token file by token digest (see the module docstring for the format)."""
    where = f"auth_tokens_file {str(path)!r}"
    try:
        text = path.read_text("utf-8")
    except OSError as error:
        raise ValueError(f"{where} cannot be read: {error.strerror or error}") from None
    try:
        document = _parse(path.suffix.lower(), text)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    entries = document.get("tokens") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{where}: expected a list 'tokens' of token entries")
    grants: dict[str, Grant] = {}
    for index, entry in enumerate(entries):
        label = f"{where}: tokens[{index}]"
        try:
            digest, grant = _entry(entry, index)
        except ValueError as error:
            raise ValueError(f"{label}: {error}") from None
        if digest in grants:
            raise ValueError(f"{label}: the same token as {grants[digest].name!r}")
        grants[digest] = grant
    return grants


def _parse(suffix: str, text: str) -> Any:
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"not valid TOML: {error}") from None
    if suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ValueError(f"not valid YAML: {error}") from None
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"not valid JSON: {error}") from None
    raise ValueError("the file name must end in .toml, .yaml, .yml or .json")


_KEYS = frozenset({"name", "sha256", "token", "role", "apps", "users"})


def _entry(entry: object, index: int) -> tuple[str, Grant]:
    if not isinstance(entry, dict):
        raise ValueError("expected a table/object")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ValueError(f"unknown keys {unknown} (known: {sorted(_KEYS)})")
    name = entry.get("name", f"tokens[{index}]")
    if not isinstance(name, str) or not name:
        raise ValueError("'name' must be a non-empty string")
    digest = _digest(entry)
    role = entry.get("role")
    if not isinstance(role, str):
        raise ValueError("'role' is required: read, write or admin")
    apps = _patterns(entry.get("apps"), "apps")
    if apps is None:
        raise ValueError("'apps' is required: a list of app names or globs ('*': every app)")
    users = _patterns(entry.get("users"), "users")
    return digest, Grant(name, Role.parse(role), apps, users)


def _digest(entry: Mapping[str, object]) -> str:
    if ("sha256" in entry) == ("token" in entry):
        raise ValueError("exactly one of 'sha256' and 'token' is required")
    if "token" in entry:
        token = entry["token"]
        if not isinstance(token, str):
            raise ValueError("'token' must be a string")
        return hash_token(token)
    digest = entry["sha256"]
    if not isinstance(digest, str) or not _HEX_DIGEST.match(digest.lower()):
        raise ValueError("'sha256' must be 64 hexadecimal digits (contextengine hash-token)")
    return digest.lower()


def _patterns(value: object, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, Sequence)
        or not value
        or not all(isinstance(p, str) and p for p in value)
    ):
        raise ValueError(f"{key!r} must be a non-empty list of non-empty strings")
    return tuple(value)
