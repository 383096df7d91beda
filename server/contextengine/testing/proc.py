"""CPU time, page faults and memory of another process, and of its threads, from Linux's
``/proc`` (see proc(5)).

The benchmarks and the tests measure what a server process (the sidecar, the bare gRPC server of
``bench/grpc_floor.py``) spends on a workload with these: read before and after, subtract.
"""

from __future__ import annotations

import os
from pathlib import Path

#: whether this system has ``/proc`` (Linux): elsewhere every function here raises ``OSError``
AVAILABLE = Path("/proc/self/stat").exists()


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds used so far by process ``pid`` (all its threads), or with
    ``tid`` by that one thread of it.

    Raises ``OSError`` when it cannot be read: no ``/proc``, or the process or thread has ended.
    """
    task = "" if tid is None else f"/task/{tid}"
    stat = Path(f"/proc/{pid}{task}/stat").read_text()
    # The fields after the command name, which is in parentheses, start at field 3 of proc(5);
    # utime and stime are fields 14 and 15.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_names(pid: int) -> dict[int, str]:
    """The live threads of process ``pid``: thread id -> name (``comm``; a thread that ends
    while they are listed is left out).

    Raises ``OSError`` when the threads cannot be listed: no ``/proc``, or the process has ended.
    """
    names: dict[int, str] = {}
    for entry in Path(f"/proc/{pid}/task").iterdir():
        try:
            names[int(entry.name)] = (entry / "comm").read_text().strip()
        except OSError:
            continue  # the thread has ended
    return names


def minor_faults(pid: int) -> int:
    """Minor page faults of process ``pid`` so far (pages the kernel mapped in for it, fresh
    memory included: what a process spends in system time when its allocator hands it new
    pages). Raises ``OSError`` as ``cpu_seconds`` does."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # minflt is field 10 of proc(5), the 8th after the command name
    return int(stat.rsplit(")", 1)[1].split()[7])


def resident_kib(pid: int, field: str = "VmRSS") -> int:
    """Resident memory of process ``pid`` in KiB: now (``VmRSS``) or its peak so far
    (``VmHWM``), from ``/proc/<pid>/status``. Raises ``OSError`` as ``cpu_seconds`` does, and
    ``KeyError`` for a field the kernel does not report."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0])
    raise KeyError(field)
