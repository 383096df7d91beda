"""Where the sidecar listens, and whether that is safe without authentication.

Without tokens the sidecar trusts whoever can reach its socket. That is today's behaviour and
fine where only the pod or host can connect: a loopback address or a Unix socket (whose file
mode and group then decide who may connect, :func:`apply_socket_permissions`). Any other
address needs authentication (tokens, or mTLS: a client CA), or ``insecure`` said explicitly.
"""

from __future__ import annotations

import contextlib
import grp
import ipaddress
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "apply_socket_permissions",
    "exposure_problem",
    "group_id",
    "is_local_address",
    "parse_mode",
    "socket_umask",
]


def is_local_address(listen: str) -> bool:
    """Whether ``listen`` (``host:port`` or ``unix:...``) can only be reached from this host."""
    if listen.startswith(("unix:", "unix-abstract:")):
        return True
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def exposure_problem(listen: str, *, tokens: bool, mtls: bool, insecure: bool) -> str | None:
    """Why the sidecar must not start on ``listen``, or None."""
    if insecure or tokens or mtls or is_local_address(listen):
        return None
    return (
        f"refusing to listen on {listen} without authentication: set auth_tokens_file or "
        "auth_token (or tls_client_ca_file for mTLS), listen on loopback or a unix socket, "
        "or pass --insecure to accept every caller"
    )


def parse_mode(text: str) -> int | None:
    """``unix_socket_mode`` ("0660", "660", "0o660") as an int; None when empty."""
    if not text:
        return None
    try:
        mode = int(text.removeprefix("0o"), 8)
    except ValueError:
        raise ValueError(f"unix_socket_mode {text!r} is not an octal mode such as 0660") from None
    if not 0 <= mode <= 0o777:
        raise ValueError(f"unix_socket_mode {text!r} is not a permission mode (0000..0777)")
    return mode


def group_id(name: str) -> int | None:
    """``unix_socket_group`` (a name or a numeric id) as a gid; None when empty."""
    if not name:
        return None
    if name.isdigit():
        return int(name)
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise ValueError(f"unix_socket_group {name!r} is not a group of this host") from None


def apply_socket_permissions(listen: str, mode: int | None, gid: int | None) -> None:
    """Gives the bound unix socket file ``mode`` and group ``gid`` (each when set)."""
    if not listen.startswith("unix:") or (mode is None and gid is None):
        return
    path = Path(listen.removeprefix("unix:").removeprefix("//"))
    if gid is not None:
        os.chown(path, -1, gid)
    if mode is not None:
        os.chmod(path, mode)


@contextlib.contextmanager
def socket_umask(listen: str, mode: int | None) -> Iterator[None]:
    """While binding ``listen``: a umask that creates the unix socket with at most ``mode``, so
    that it is never reachable more widely than asked, not even before
    :func:`apply_socket_permissions` runs (the process's umask is restored after)."""
    if mode is None or not listen.startswith("unix:"):
        yield
        return
    previous = os.umask(0o777 & ~mode)
    try:
        yield
    finally:
        os.umask(previous)
