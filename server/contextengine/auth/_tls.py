"""TLS and mutual TLS server credentials from PEM files, reloaded when the files change.

The certificate chain, key and (for mTLS) client CA are read at start-up (unreadable or invalid
files fail the start with ValueError naming the setting). Then, at each new TLS handshake, grpc
asks :class:`_Reloader` whether the configuration changed: it compares the files' modification
times and sizes (one ``stat`` each) and, when one changed, reads them again. A rotated
certificate (cert-manager, a Kubernetes secret update) is thus served to new connections without
a restart; open connections keep the one they started with. A half-written set (a key that does
not load) is skipped and the previous configuration kept until the files are consistent again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

# grpc is imported where credentials are made: checking the files (``check_pem_files``, which
# the settings run) must not load it (tests/test_startup_imports.py).
if TYPE_CHECKING:
    import grpc

__all__ = ["check_pem_files", "server_credentials"]

_LOG = logging.getLogger("contextengine.auth")


def _read(path: str, setting: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ValueError(f"{setting} {path!r} cannot be read: {error.strerror or error}") from None
    if b"-----BEGIN" not in data:
        raise ValueError(f"{setting} {path!r} is not a PEM file")
    return data


def _read_all(
    cert_file: str, key_file: str, client_ca_file: str
) -> tuple[bytes, bytes, bytes | None]:
    """The certificate chain, the key and the client CA (None without one), read and checked."""
    chain = _read(cert_file, "tls_cert_file")
    key = _read(key_file, "tls_key_file")
    ca = _read(client_ca_file, "tls_client_ca_file") if client_ca_file else None
    return chain, key, ca


def check_pem_files(cert_file: str, key_file: str, client_ca_file: str = "") -> None:
    """ValueError naming the setting when one of the files cannot be read or is not PEM (what
    ``server_credentials`` checks first, without grpc)."""
    _read_all(cert_file, key_file, client_ca_file)


def _signature(paths: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    result = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            result.append((-1, -1))
        else:
            result.append((st.st_mtime_ns, st.st_size))
    return tuple(result)


class _Reloader:
    """grpc's certificate configuration fetcher: a new configuration when the files changed."""

    def __init__(self, cert_file: str, key_file: str, client_ca_file: str) -> None:
        self._cert_file = cert_file
        self._key_file = key_file
        self._ca_file = client_ca_file
        self._paths = tuple(p for p in (cert_file, key_file, client_ca_file) if p)
        self._seen = _signature(self._paths)
        #: the signature of files that did not load (logged once, not at every handshake)
        self._failed: tuple[tuple[int, int], ...] | None = None
        self.initial = self._load()

    def _load(self) -> grpc.ServerCertificateConfiguration:
        import grpc

        chain, key, ca = _read_all(self._cert_file, self._key_file, self._ca_file)
        return grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=ca)

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        seen = _signature(self._paths)
        if seen in (self._seen, self._failed):
            return None
        try:
            config = self._load()
        except ValueError as error:
            self._failed = seen
            _LOG.warning(
                "TLS files changed but cannot be loaded yet (%s); keeping the old ones", error
            )
            return None
        self._seen = seen
        _LOG.info("TLS certificate files changed: reloaded for new connections")
        return config


def server_credentials(
    cert_file: str, key_file: str, client_ca_file: str = ""
) -> grpc.ServerCredentials:
    """TLS credentials serving ``cert_file``/``key_file``; with ``client_ca_file``, mutual TLS:
    every client must present a certificate that CA signed."""
    import grpc

    if not cert_file or not key_file:
        raise ValueError("tls_cert_file and tls_key_file are set together")
    reloader = _Reloader(cert_file, key_file, client_ca_file)
    return grpc.dynamic_ssl_server_credentials(
        reloader.initial,
        # grpc takes None from the fetcher as "unchanged" (its stubs do not say so)
        cast(Callable[[], grpc.ServerCertificateConfiguration], reloader),
        require_client_authentication=bool(client_ca_file),
    )
