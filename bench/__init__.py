"""Side-by-side benchmarks: this engine against google-adk, on the same machine, in the same run.

``python -m bench`` runs every benchmark, ``python -m bench append`` one of them. Each prints a
table and writes its numbers to ``bench/results/<name>.json``. Benchmarks measure; they do not
assert speed. They do fail (exit status 1) when a check on the data fails, for example when an
acknowledged event is missing from the log: a fast benchmark that loses data measures nothing.
"""

from __future__ import annotations

import os
import platform
import socket
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

RESULTS_DIR = Path(__file__).resolve().parent / "results"


class DataCheckError(AssertionError):
    """The benchmark's data check failed: the numbers must not be trusted."""


@dataclass(frozen=True)
class Options:
    """Knobs shared by every benchmark (see ``python -m bench --help``)."""

    #: a smaller workload, for a smoke run
    quick: bool = False
    #: run the sidecar under cProfile and print where its main thread spends time
    profile: bool = False
    results_dir: Path = RESULTS_DIR


@dataclass(frozen=True)
class Measurement:
    """One timed workload."""

    name: str
    events: int
    seconds: float
    #: per-call latencies in milliseconds (empty when calls were not timed one by one)
    latencies_ms: tuple[float, ...] = ()
    #: CPU seconds used by the benchmark process during the workload
    client_cpu_seconds: float | None = None
    #: CPU seconds used by the sidecar process during the workload (None: no separate process)
    server_cpu_seconds: float | None = None
    #: events per second of the reference this row is compared with, if any
    baseline_events_per_second: float | None = None
    #: the sidecar's CPU seconds during the workload, by kind of thread
    server_threads: tuple[tuple[str, float], ...] = ()

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")

    @property
    def ratio(self) -> float | None:
        if not self.baseline_events_per_second:
            return None
        return self.events_per_second / self.baseline_events_per_second

    def percentile_ms(self, fraction: float) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
        return ordered[index]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "events": self.events,
            "seconds": self.seconds,
            "events_per_second": self.events_per_second,
            "ratio_vs_baseline": self.ratio,
            "latency_p50_ms": self.percentile_ms(0.50),
            "latency_p99_ms": self.percentile_ms(0.99),
            "client_cpu_seconds": self.client_cpu_seconds,
            "server_cpu_seconds": self.server_cpu_seconds,
            "server_cpu_seconds_by_thread": dict(self.server_threads),
        }


@dataclass(frozen=True)
class Target:
    """A goal a measurement is compared with (reported, never asserted)."""

    name: str
    measured: float
    required: float
    unit: str

    @property
    def met(self) -> bool:
        return self.measured >= self.required

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "measured": self.measured,
            "required": self.required,
            "unit": self.unit,
            "met": self.met,
        }


@dataclass(frozen=True)
class Ceiling(Target):
    """A target met at or below ``required`` (a ratio to a floor, a time budget)."""

    @property
    def met(self) -> bool:
        return self.measured <= self.required


@dataclass
class Report:
    """What one benchmark run produced."""

    benchmark: str
    parameters: dict[str, Any]
    measurements: list[Measurement] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    #: the data checks that passed, in words
    checks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "environment": environment(),
            "parameters": self.parameters,
            "measurements": [m.to_json() for m in self.measurements],
            "targets": [t.to_json() for t in self.targets],
            "checks": self.checks,
            "notes": self.notes,
        }

    def render(self) -> str:
        header = (
            "workload",
            "events",
            "seconds",
            "events/s",
            "vs ADK",
            "p50 ms",
            "p99 ms",
            "bench CPU us/ev",
            "server CPU us/ev",
        )
        rows: list[tuple[str, ...]] = []
        for m in self.measurements:
            ratio = m.ratio
            rows.append(
                (
                    m.name,
                    str(m.events),
                    f"{m.seconds:.2f}",
                    f"{m.events_per_second:,.0f}",
                    "" if ratio is None else f"{ratio:.2f}x",
                    _ms(m.percentile_ms(0.50)),
                    _ms(m.percentile_ms(0.99)),
                    _per_event_us(m.client_cpu_seconds, m.events),
                    _per_event_us(m.server_cpu_seconds, m.events),
                )
            )
        lines = [f"== {self.benchmark} ==", *table(header, rows)]
        threaded = [m for m in self.measurements if m.server_threads and m.events]
        if threaded:
            lines.append("")
            lines.append("sidecar CPU by thread, us per event:")
            for m in threaded:
                parts = ", ".join(
                    f"{name} {seconds / m.events * 1e6:,.0f}" for name, seconds in m.server_threads
                )
                lines.append(f"  {m.name}: {parts}")
        lines.extend(self.footer())
        return "\n".join(lines)

    def footer(self) -> list[str]:
        """The lines that end ``render``: the targets, the data checks and the notes, each list
        after a blank line and its title (nothing for an empty one)."""
        lines: list[str] = []
        if self.targets:
            lines.append("")
            lines.append("targets:")
            lines.extend(f"  {self.target_line(target)}" for target in self.targets)
        for title, items in (("data checks passed:", self.checks), ("notes:", self.notes)):
            if items:
                lines.append("")
                lines.append(title)
                lines.extend(f"  {item}" for item in items)
        return lines

    def target_line(self, target: Target) -> str:
        """One target in ``footer``: what was measured, in which unit, what is needed, met or
        not."""
        verdict = "met" if target.met else "MISSED"
        need = "<=" if isinstance(target, Ceiling) else ">="
        return (
            f"{target.name}: {target.measured:,.2f} {target.unit} "
            f"(need {need} {target.required:,.2f}) {verdict}"
        )


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` under ``header`` as lines of text: columns two spaces apart, the first one
    aligned left and the others right, a line of dashes under the header."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for n, row in enumerate([header, *rows]):
        cells = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * width for width in widths))
    return lines


def load_average(*, all_three: bool = False) -> str:
    """The machine's load average for the printed notes: the 1-minute one, or all three
    ("unknown" where the system has none)."""
    try:
        values = os.getloadavg()
    except OSError:
        return "unknown"
    return ", ".join(f"{value:.2f}" for value in (values if all_three else values[:1]))


def free_port() -> int:
    """A loopback port free right now (the bench sidecars log at WARNING, so an operations port
    is chosen here rather than read from the INFO line that names it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def number(value: float | None, digits: int = 1) -> str:
    """``value`` with ``digits`` decimals and thousands separators; "" for None and NaN."""
    if value is None or value != value:
        return ""
    return f"{value:,.{digits}f}"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _per_event_us(seconds: float | None, events: int) -> str:
    return "" if seconds is None or events == 0 else f"{seconds / events * 1e6:,.0f}"


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """The machine and the versions the numbers were measured with."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "google-adk": _version("google-adk"),
        "grpcio": _version("grpcio"),
        "contextengine": _version("contextengine"),
    }


class JsonRow(Protocol):
    """A row of a :class:`RowsReport`."""

    def to_json(self) -> dict[str, Any]: ...


RowT = TypeVar("RowT", bound=JsonRow)


@dataclass
class RowsReport(Report, Generic[RowT]):
    """A report whose results are rows of the benchmark's own kind, kept in its JSON under
    ``rows`` (the subclass renders them)."""

    rows: list[RowT] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data["rows"] = [row.to_json() for row in self.rows]
        return data
