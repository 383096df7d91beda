"""A throw-away PostgreSQL cluster for tests and benchmarks: ``initdb`` in a temporary directory,
``pg_ctl start`` on a free loopback port, trust authentication for the ``postgres`` superuser.

PostgreSQL refuses to run as root: as root, every server command runs as the ``postgres`` user
(``runuser``). Without fsync unless ``durable`` (a test cluster need not survive power loss;
commits still reach the WAL before they are acknowledged); a durable cluster is what the
benchmarks measure commits on. On a machine without the server binaries, :func:`find_binaries`
installs them with apt when it runs as root (``apt-get install postgresql-15``).

The test run's fixtures (a database per test, made from a template holding the store's schema)
are in ``tests/pg_server.py``; ``bench/pg_cluster.py`` starts a durable cluster from here.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, overload

__all__ = [
    "APT_PACKAGE",
    "PostgresCluster",
    "PostgresUnavailableError",
    "find_binaries",
    "start_cluster",
    "stop_cluster",
]

#: the Debian package :func:`find_binaries` installs when the binaries are missing
APT_PACKAGE = "postgresql-15"


class PostgresUnavailableError(RuntimeError):
    """No PostgreSQL server can run here (no binaries, or root without a ``postgres`` user)."""


@dataclass
class PostgresCluster:
    """A running cluster: superuser ``postgres``, trust authentication, loopback only."""

    port: int
    directory: Path
    binaries: Path
    #: started with fsync, synchronous commit and full page writes on (benchmarks); else off
    durable: bool = False

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.binaries / "pg_ctl"), "-D", str(self.directory / "data"), *args]
        return subprocess.run(as_server_user(command), capture_output=True, text=True, check=False)

    def stop(self, mode: str = "immediate") -> None:
        """Stops the server (``immediate``: like a crash; ``fast``: a clean shutdown)."""
        self._pg_ctl("-m", mode, "-w", "stop")

    def start_again(self) -> str | None:
        """(Re)starts the server on its port and data; None, or pg_ctl's error."""
        options = f"-k {self.directory} -p {self.port} -c listen_addresses=127.0.0.1"
        options += " -c max_connections=300"
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        done = self._pg_ctl("-l", str(self.directory / "log"), "-w", "-o", options, "start")
        return None if done.returncode == 0 else done.stderr.strip()


C = TypeVar("C", bound=PostgresCluster)


def _installed_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, or None."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return Path(candidate)
    initdb = shutil.which("initdb")
    return Path(os.path.realpath(initdb)).parent if initdb else None


def find_binaries(*, install: bool = True) -> Path | None:
    """The server binaries' directory; when missing and ``install``, installs them first with
    apt (only as root with apt-get). None where they cannot be had."""
    found = _installed_binaries()
    if found is not None or not install:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", APT_PACKAGE]
    if subprocess.run(command, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
        subprocess.run(command, env=env, capture_output=True, check=False)
    return _installed_binaries()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def as_server_user(command: list[str]) -> list[str]:
    """``command`` as the ``postgres`` user when this process is root (the server refuses root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@overload
def start_cluster(binaries: Path, *, durable: bool = False) -> PostgresCluster: ...
@overload
def start_cluster(binaries: Path, *, durable: bool = False, cluster: type[C]) -> C: ...
def start_cluster(
    binaries: Path, *, durable: bool = False, cluster: type[PostgresCluster] = PostgresCluster
) -> PostgresCluster:
    """A new cluster in a fresh temporary directory, started (``cluster``: a subclass to make).
    Raises PostgresUnavailableError when it cannot run here, RuntimeError when initdb or pg_ctl
    fails."""
    directory = Path(tempfile.mkdtemp(prefix="ce-pg-"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(directory)
            raise PostgresUnavailableError(
                "running as root and there is no 'postgres' user to run the server"
            ) from None
        os.chown(directory, user.pw_uid, user.pw_gid)
    data = directory / "data"
    initdb = [
        str(binaries / "initdb"),
        *("-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync"),
        *("-E", "UTF8", "--locale=C.UTF-8"),
    ]
    done = subprocess.run(as_server_user(initdb), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
    error: str | None = None
    for _attempt in range(5):  # a free port can be taken before the server binds it
        server = cluster(port=_free_port(), directory=directory, binaries=binaries, durable=durable)
        error = server.start_again()
        if error is None:
            return server
    log = (directory / "log").read_text(errors="replace") if (directory / "log").exists() else ""
    shutil.rmtree(directory, ignore_errors=True)
    raise RuntimeError(f"pg_ctl start failed: {error} {log[-2000:]}")


def stop_cluster(cluster: PostgresCluster) -> None:
    """Stops the cluster (immediately) and deletes its directory."""
    cluster.stop()
    shutil.rmtree(cluster.directory, ignore_errors=True)
