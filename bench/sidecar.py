"""The sidecar under benchmark: ``python -m contextengine serve`` as a child process
(``contextengine.testing.sidecar``, the one way every test, benchmark and script starts one).

The benchmarks measure the engine as it is deployed, a separate process reached over gRPC on
loopback, so that what it costs (its CPU time, from ``/proc``) is told apart from what the
benchmark process itself spends.
"""

from __future__ import annotations

import io
import pstats
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Literal

from contextengine.testing.sidecar import THREAD_KINDS, LogLevel, SidecarProcess

Durability = Literal["normal", "full"]

__all__ = ["THREAD_KINDS", "Durability", "LogLevel", "Sidecar", "profile_summary"]


@dataclass(eq=False)
class Sidecar(SidecarProcess):
    """The benchmarks' sidecar: ``contextengine.testing``'s process, at WARNING (no line per
    call in the measured process) and without the health check unless asked."""

    _: KW_ONLY
    log_level: LogLevel | None = "WARNING"
    check_health: bool = False


def profile_summary(paths: Sequence[Path], title: str, limit: int) -> str:
    """The hottest functions on the main thread of the sidecar processes that wrote the cProfile
    files ``paths``, merged ("" when none was written). cProfile sees neither the SQLite
    connection threads nor gRPC's Cython code, which shows up as ``Context.run``."""
    existing = [str(path) for path in paths if path.exists()]
    if not existing:
        return ""
    out = io.StringIO()
    stats = pstats.Stats(existing[0], stream=out)
    for path in existing[1:]:
        stats.add(path)
    stats.strip_dirs().sort_stats(pstats.SortKey.TIME).print_stats(limit)
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(limit)
    return f"--- cProfile of the {title}, main thread ---\n{out.getvalue()}"
