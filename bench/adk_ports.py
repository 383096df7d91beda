"""Per model call overhead of every ADK port's drop-ins against that port's own in-memory session
service and in-process context building, at 100, 1,000 and 10,000 events (``--quick``: 100 and
1,000), all ports in the same run: ``python -m bench adk-ports``.

Each port's benchmark is its own (they time the port's own ``Runner`` loop, one model call per
invocation, a scripted model answering at once, no compaction, after one warm-up invocation):

* Python: :mod:`bench.adk` (``ADK in-memory`` vs ``drop-ins sidecar``; its other sides are
  measured too and left out of this table);
* TypeScript: ``clients/typescript-adk/bench/overhead.ts`` (``ADK in-memory`` vs ``drop-ins
  sidecar``, its own sidecar), run with ``tsx`` and its printed table read;
* Java: ``clients/java-adk/bench``'s ``Overhead`` (when the port is built), against a sidecar
  started here. It times one model call's work outside the model, not the whole ``Runner``
  loop: the request's contents (``ContextEnginePlugin.beforeModelCallback``, one
  ``BuildContext``; ADK Java's ``Contents`` request processor over the session's events) and
  recording the answer (``appendEvent``), median of ``calls`` calls; it always runs all three
  sizes, the table keeps those of the run.

The table's rows are each port's two sides per size; ``vs ADK`` is the side's invocations per
second over the port's own in-memory side at the same size, and the notes give the per model
call ratio of medians (drop-ins / the port's own ADK). Ports are compared with themselves only:
the ratios, not the milliseconds, are comparable across languages.

Data checks: each port's benchmark checks its own data (every reply arrived; the last model
request of both sides had the same contents) and fails otherwise; here, every size has both
sides of every port that ran.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from bench import DataCheckError, Measurement, Options, Report, adk
from bench.sidecar import Sidecar

ROOT = Path(__file__).resolve().parents[1]
TS_ADK = ROOT / "clients" / "typescript-adk"
JAVA_ADK = ROOT / "clients" / "java-adk"
OWN, DROPINS = "ADK in-memory", "drop-ins sidecar"
#: a TypeScript result row: size, side, median ms, mean ms
_TS_ROW = re.compile(
    rf"^\s*(\d+)\s+({re.escape(OWN)}|{re.escape(DROPINS)})\s+([\d.]+)\s+([\d.]+)", re.M
)
#: a Java result row: size, drop-ins ms, ADK Java ms, ratio
_JAVA_ROW = re.compile(r"^(\d+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+x\s*$", re.M)
TS_TIMEOUT_SECONDS = 1800


@dataclass(frozen=True)
class PortResult:
    """One port's medians per (size, side), in ms per invocation (one model call each)."""

    port: str
    medians: dict[tuple[int, str], float]
    invocations: int
    #: why the port has no numbers (None: it ran)
    missing: str | None = None


def _sizes(options: Options) -> tuple[int, ...]:
    return adk.QUICK_SIZES if options.quick else adk.SIZES


def _invocations(options: Options) -> int:
    return adk.QUICK_INVOCATIONS if options.quick else adk.INVOCATIONS


async def _python(options: Options) -> PortResult:
    # its own results file is not written: this benchmark writes adk-ports.json
    report = await adk.run(replace(options, profile=False))
    medians = {}
    for m in report.measurements:
        side, _, size = m.name.partition(" @ ")
        if side in (OWN, DROPINS):
            medians[int(size.split()[0].replace(",", "")), side] = statistics.median(m.latencies_ms)
    return PortResult("python", medians, _invocations(options))


def _typescript(options: Options) -> PortResult:
    tsx = TS_ADK / "node_modules" / ".bin" / "tsx"
    if not tsx.exists():
        return PortResult("typescript", {}, 0, "clients/typescript-adk has no node_modules")
    command = [
        str(tsx),
        "bench/overhead.ts",
        "--invocations",
        str(_invocations(options)),
        "--sizes",
        ",".join(map(str, _sizes(options))),
    ]
    done = subprocess.run(
        command,
        cwd=TS_ADK,
        capture_output=True,
        text=True,
        timeout=TS_TIMEOUT_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        raise DataCheckError(f"the TypeScript benchmark failed: {done.stderr[-2000:]}")
    medians = {
        (int(size), side): float(median) for size, side, median, _ in _TS_ROW.findall(done.stdout)
    }
    return PortResult("typescript", medians, _invocations(options))


def _java_command(target: str, calls: int) -> list[str] | None:
    classes = JAVA_ADK / "target"
    if not (classes / "test-classes" / "dev/contextengine/adk/bench/Overhead.class").exists():
        return None
    path = (classes / "test-classpath.txt").read_text("utf-8").strip()
    classpath = f"{path}:{classes / 'classes'}:{classes / 'test-classes'}"
    return ["java", "-cp", classpath, "dev.contextengine.adk.bench.Overhead", target, str(calls)]


async def _java(options: Options) -> PortResult:
    calls = _invocations(options)
    if _java_command("", calls) is None:
        return PortResult("java", {}, 0, "clients/java-adk is not built (make the Java ADK build)")
    with tempfile.TemporaryDirectory(prefix="bench-adk-ports-") as tmp:
        sidecar = Sidecar(Path(tmp), "java", check_health=True)
        await sidecar.start()
        try:
            command = _java_command(sidecar.target, calls)
            assert command is not None
            done = await asyncio.to_thread(
                subprocess.run,
                command,
                cwd=JAVA_ADK,
                capture_output=True,
                text=True,
                timeout=TS_TIMEOUT_SECONDS,
                check=False,
            )
        finally:
            await sidecar.stop()
    if done.returncode != 0:
        raise DataCheckError(f"the Java benchmark failed: {done.stderr[-2000:]}")
    medians = {}
    for size, ours, theirs in _JAVA_ROW.findall(done.stdout):
        if int(size) in _sizes(options):
            medians[int(size), OWN] = float(theirs)
            medians[int(size), DROPINS] = float(ours)
    return PortResult("java", medians, calls)


async def run(options: Options) -> Report:
    sizes = _sizes(options)
    results = [
        await _python(options),
        await asyncio.to_thread(_typescript, options),
        await _java(options),
    ]
    report = Report(
        "adk-ports",
        {
            "sizes": list(sizes),
            "invocations_per_size": _invocations(options),
            "ports": [r.port for r in results],
            "sides": [OWN, DROPINS],
        },
    )
    for result in results:
        if result.missing is not None:
            report.notes.append(f"{result.port}: not measured ({result.missing})")
            continue
        ratios = []
        for size in sizes:
            if (size, OWN) not in result.medians or (size, DROPINS) not in result.medians:
                raise DataCheckError(f"{result.port} at {size:,} events: a side has no result")
            own = result.medians[size, OWN]
            for side in (OWN, DROPINS):
                ms = result.medians[size, side]
                report.measurements.append(
                    Measurement(
                        f"{result.port} {side} @ {size:,} events",
                        result.invocations,
                        ms * result.invocations / 1e3,  # at the median, for the rate columns
                        baseline_events_per_second=None if side == OWN else 1e3 / own,
                    )
                )
            ratios.append(
                f"{size:,}: {result.medians[size, DROPINS] / own:.2f}x "
                f"({result.medians[size, DROPINS]:.2f} vs {own:.2f} ms)"
            )
        report.notes.append(
            f"{result.port}: per model call, drop-ins sidecar / the port's own ADK in-memory "
            f"(medians): {'; '.join(ratios)}"
        )
    report.notes.append(
        "'events' is timed invocations (one model call each); the rates are from the medians; "
        "each port is compared with its own in-memory ADK only"
    )
    report.checks.append(
        "each port's benchmark checked its own data (every reply; both sides' last model "
        "request equal); every size has both sides of every port that ran"
    )
    return report
