"""The sidecar's settings: :class:`ServerSettings`, the engine's settings (``EngineSettings``)
and the transport's, with their defaults, help texts and the checks a process runs before
anything starts.

Every field is declared with ``setting(...)`` (``contextengine.core.setting``): the flags,
``CONTEXTENGINE_`` variables and file keys of ``contextengine.config`` are derived from them.
Neither importing this module nor making settings loads grpc (tests/test_startup_imports.py):
the edge's files (tokens, certificates) are read and checked here without it, and
``contextengine.transport`` builds the credentials.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, fields
from typing import Annotated, Literal

from annotated_types import Ge, Gt, Le

from contextengine.auth import check_edge_files, check_edge_settings, is_local_address
from contextengine.core.setting import setting
from contextengine.engine import DEFAULT_DB, MEMORY_DB, EngineSettings

__all__ = [
    "DEFAULT_DB",
    "DEFAULT_LISTEN",
    "DEFAULT_PORT",
    "MEMORY_DB",
    "LogFormat",
    "ServerSettings",
]

DEFAULT_PORT = 50151
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"

#: ``log_format``: text, or one JSON object per line (``contextengine.observability.logs``)
LogFormat = Literal["text", "json"]


@dataclass(frozen=True)
class ServerSettings(EngineSettings):
    """How the sidecar runs: the engine's settings (:class:`EngineSettings`: the database,
    subscriptions, compaction, memory, Gemini) and the transport's. Defaults are what
    ``contextengine serve`` uses without flags."""

    listen: str = setting(
        DEFAULT_LISTEN, "host:port (port 0 picks a free port) or unix:/path/to.sock"
    )
    #: larger requests fail with RESOURCE_EXHAUSTED / REQUEST_TOO_LARGE (beyond twice it, with
    #: gRPC's own RESOURCE_EXHAUSTED and no ErrorInfo: see errors.proto)
    max_request_bytes: Annotated[int, Gt(0)] = setting(
        4 * 1024 * 1024, "largest accepted request in bytes"
    )
    grace_seconds: Annotated[float, Ge(0)] = setting(
        10.0, "seconds in-flight requests get to finish on shutdown"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = setting(
        "INFO", "log level of `contextengine serve` (INFO logs one line per RPC)"
    )
    port_file: str | None = setting(
        None, "`contextengine serve` writes the bound port to this file once it serves"
    )
    event_loop: Literal["asyncio", "uvloop"] = setting(
        "asyncio",
        "the event loop `contextengine serve` runs on: asyncio, or uvloop (the `uvloop` extra; "
        "docs/design/hot-paths.md, Fan-out, says what it changes)",
    )
    gc_freeze: bool = setting(
        True,
        "`contextengine serve` freezes what survives each full garbage collection, so that the "
        "next one does not traverse the event cache again (docs/design/hot-paths.md, Garbage "
        "collection); false: CPython's own behaviour",
    )
    gc_thaw_seconds: Annotated[float, Gt(0)] = setting(
        3600.0,
        "with gc_freeze, how often the frozen objects are handed back to one full collection "
        "(which frees cycles that formed among them)",
    )
    malloc_tuning: bool = setting(
        True,
        "`contextengine serve` has glibc's malloc keep large freed blocks (up to 64 MiB) for "
        "reuse, so that big BuildContext answers do not map and zero fresh pages every time "
        "(docs/design/hot-paths.md, Large answers); false: glibc's own thresholds",
    )

    # -- observability: operations port, metrics, traces, logs (docs/design/observability.md)
    ops_listen: str = setting(
        "",
        "host:port of the operations HTTP server (/healthz, /readyz, /metrics), for example "
        "127.0.0.1:50152 (port 0 picks a free port); empty: off, and no metrics are kept",
    )
    tracing_otlp_endpoint: str = setting(
        "",
        "OTLP/gRPC collector the sidecar exports traces to (http://host:4317 plaintext, "
        "https:// TLS); empty: no traces",
    )
    tracing_sample_ratio: Annotated[float, Ge(0), Le(1)] = setting(
        1.0, "share of traces sampled when the client's traceparent did not decide, in [0, 1]"
    )
    log_format: LogFormat = setting(
        "text", "text, or json: one JSON object per line (RPC lines with app, session, trace id)"
    )
    inspector: bool = setting(
        False,
        "serve the read-only session inspector at http://<ops_listen>/inspector/ (needs "
        "ops_listen; with tokens configured its API needs a token, as the gRPC API does)",
    )

    # -- the edge: tokens, TLS, unix socket permissions (contextengine.auth, docs/security.md)
    auth_tokens_file: str = setting(
        "",
        "a TOML/YAML/JSON file of bearer tokens (their sha256) and what each grants "
        "(apps, users, role read/write/admin); set: every RPC needs a token",
    )
    auth_token: str = setting(
        "",
        "one bearer token granting admin on every app (with or without auth_tokens_file)",
        secret=True,
    )
    tls_cert_file: str = setting(
        "", "PEM certificate chain the API port serves TLS with (reloaded when it changes)"
    )
    tls_key_file: str = setting("", "PEM private key of tls_cert_file")
    tls_client_ca_file: str = setting(
        "", "PEM CA bundle: with it clients must present a certificate it signed (mTLS)"
    )
    unix_socket_mode: str = setting(
        "", "file mode of the unix socket (octal, for example 0660; empty: as created)"
    )
    unix_socket_group: str = setting(
        "", "group (name or id) that owns the unix socket (empty: the server's)"
    )
    insecure: bool = setting(
        False,
        "allow a non-loopback listen address without tokens or mTLS (every caller may do "
        "everything)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.event_loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
            raise ValueError(
                "event_loop uvloop needs the uvloop package, which is not installed: "
                "pip install 'contextengine[uvloop]' (or event_loop asyncio)"
            )
        check_edge_settings(
            listen=self.listen,
            tokens=bool(self.auth_tokens_file or self.auth_token),
            cert_file=self.tls_cert_file,
            key_file=self.tls_key_file,
            client_ca_file=self.tls_client_ca_file,
            unix_socket_mode=self.unix_socket_mode,
            unix_socket_group=self.unix_socket_group,
            insecure=self.insecure,
        )
        if self.auth_tokens_file or self.auth_token or self.tls_cert_file:
            # unreadable or malformed token and certificate files fail here (the transport
            # reads them again when it builds the edge: contextengine.transport.server_edge)
            check_edge_files(
                tokens_file=self.auth_tokens_file,
                token=self.auth_token,
                cert_file=self.tls_cert_file,
                key_file=self.tls_key_file,
                client_ca_file=self.tls_client_ca_file,
                unix_socket_group=self.unix_socket_group,
            )
        if self.inspector:
            _check_inspector(self)

    def engine(self) -> EngineSettings:
        """The engine's part of these settings."""
        return EngineSettings(**{f.name: getattr(self, f.name) for f in fields(EngineSettings)})


def _check_inspector(settings: ServerSettings) -> None:
    """The inspector is served on the operations port, and shows every session it can read: it
    needs ``ops_listen``, and off loopback tokens (or ``insecure``), as the API port does."""
    if not settings.ops_listen:
        raise ValueError(
            "inspector needs ops_listen: the inspector is served on the operations port "
            "(for example --ops-listen 127.0.0.1:50152)"
        )
    tokens = bool(settings.auth_tokens_file or settings.auth_token)
    if not tokens and not settings.insecure and not is_local_address(settings.ops_listen):
        raise ValueError(
            f"inspector on the non-loopback ops_listen {settings.ops_listen!r} would show every "
            "session to anyone who reaches it: configure auth_tokens_file or auth_token, "
            "listen on loopback, or set insecure"
        )
