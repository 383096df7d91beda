"""Client latency: AppendEvent and BuildContext from the Python, TypeScript, Java and Kotlin
clients against the same sidecar, in the same run.

The workload is the agent loop's: a session with a prefilled conversation (``PREFILL`` events),
then per iteration one ``AppendEvent`` (a new turn) and one ``BuildContext`` for the next model
call, each awaited before the next and timed one by one. The Python side uses
``contextengine.client.ContextEngineClient``; the TypeScript side runs
``clients/typescript/bench/latency.ts`` (Connect-ES over HTTP/2) with the same parameters. Both
run against one sidecar (``python -m contextengine serve``, SQLite, default durability), one
after the other, each after its own warm-up session. The Java side runs
``clients/java/bench/.../Latency.java`` (grpc-java, blocking calls) the same way, and the Kotlin
side ``clients/kotlin/bench/KotlinLatency.kt`` (the suspend API).

Needs the TypeScript dependencies (``make ts-deps``) and the JVM builds (``make kotlin-build``,
which builds the Java client too). Every context is checked to reflect the event appended just
before it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import DataCheckError, Measurement, Options, Report
from bench.sidecar import Sidecar
from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, event_pb2

ROOT = Path(__file__).resolve().parents[1]
TS_DIR = ROOT / "clients" / "typescript"
JAVA_DIR = ROOT / "clients" / "java"
KOTLIN_DIR = ROOT / "clients" / "kotlin"
PREFILL = 40


def turn(i: int) -> event_pb2.Event:
    user = i % 2 == 0
    text = (
        f"Question number {i}: what about city {i}?" if user else f"Answer {i}: sunny, {i % 30} C."
    )
    return event_pb2.Event(
        author="user" if user else "assistant",
        invocation_id=f"inv-{i // 2}",
        content=content_pb2.Content(
            role="user" if user else "model", parts=[content_pb2.Part(text=text)]
        ),
    )


async def _python_session(
    ce: ContextEngineClient,
    app: str,
    iterations: int,
    append_ms: list[float],
    build_ms: list[float],
) -> None:
    session = await ce.create_session(app, "bench")
    await ce.append_events(app, "bench", session.id, [turn(i) for i in range(PREFILL)])
    for i in range(iterations):
        t0 = time.perf_counter()
        await ce.append_event(app, "bench", session.id, turn(PREFILL + i))
        append_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        context = await ce.build_context(app, "bench", session.id, agent_name="assistant")
        build_ms.append((time.perf_counter() - t0) * 1000)
        if context.last_sequence != PREFILL + i + 1:
            raise DataCheckError(
                f"python: the context reflects {context.last_sequence}, not {PREFILL + i + 1}"
            )


async def bench_python(target: str, iterations: int, warmup: int) -> tuple[list[float], ...]:
    app = f"bench-py-{secrets.token_hex(4)}"
    async with ContextEngineClient(target) as ce:
        await _python_session(ce, app, warmup, [], [])
        append_ms: list[float] = []
        build_ms: list[float] = []
        await _python_session(ce, app, iterations, append_ms, build_ms)
    return append_ms, build_ms


async def _bench_program(
    name: str, program: list[str], cwd: Path, target: str, iterations: int, warmup: int
) -> tuple[list[float], ...]:
    """Runs one client's latency program (it prints its samples as JSON on its last line)."""
    command = [
        *program,
        "--target",
        target,
        "--iterations",
        str(iterations),
        "--prefill",
        str(PREFILL),
        "--warmup",
        str(warmup),
        "--json",
    ]
    completed = await asyncio.to_thread(
        subprocess.run, command, cwd=cwd, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise DataCheckError(f"the {name} benchmark failed:\n{completed.stderr}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return list(result["append_ms"]), list(result["build_context_ms"])


async def bench_typescript(target: str, iterations: int, warmup: int) -> tuple[list[float], ...]:
    tsx = TS_DIR / "node_modules" / ".bin" / "tsx"
    if not tsx.exists():
        raise RuntimeError(f"{tsx} is missing: run `make ts-deps` first")
    program = [str(tsx), "bench/latency.ts"]
    return await _bench_program("TypeScript", program, TS_DIR, target, iterations, warmup)


def _jvm_program(module: Path, main_class: str, build: str) -> list[str]:
    """``java`` on a JVM module's class path (as written by its Maven build) running ``main_class``."""
    classpath_file = module / "target" / "test-classpath.txt"
    if not classpath_file.exists():
        raise RuntimeError(f"{classpath_file} is missing: run `make {build}` first")
    classpath = ":".join(
        [classpath_file.read_text().strip(), "target/classes", "target/test-classes"]
    )
    return ["java", "-cp", classpath, main_class]


async def bench_java(target: str, iterations: int, warmup: int) -> tuple[list[float], ...]:
    program = _jvm_program(JAVA_DIR, "dev.contextengine.bench.Latency", "java-build")
    return await _bench_program("Java", program, JAVA_DIR, target, iterations, warmup)


async def bench_kotlin(target: str, iterations: int, warmup: int) -> tuple[list[float], ...]:
    program = _jvm_program(KOTLIN_DIR, "dev.contextengine.bench.KotlinLatency", "kotlin-build")
    return await _bench_program("Kotlin", program, KOTLIN_DIR, target, iterations, warmup)


async def run(options: Options) -> Report:
    iterations = 100 if options.quick else 1000
    warmup = 20 if options.quick else 50
    rounds = 2 if options.quick else 4
    per_round = iterations // rounds
    report = Report(
        "clients",
        {"iterations": iterations, "rounds": rounds, "warmup": warmup, "prefill_events": PREFILL},
    )
    samples: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ce-bench-clients-") as tmp:
        async with Sidecar(
            Path(tmp), "clients", durability="normal", profile=options.profile, check_health=True
        ) as server:
            # The clients take turns, so that a change of load on the machine hits both alike.
            for n in range(rounds):
                order = [
                    ("python", bench_python),
                    ("typescript", bench_typescript),
                    ("java", bench_java),
                    ("kotlin", bench_kotlin),
                ]
                for name, bench in order if n % 2 == 0 else order[::-1]:
                    started = time.perf_counter()
                    append_ms, build_ms = await bench(server.target, per_round, warmup)
                    seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started
                    samples.setdefault(f"{name} AppendEvent", []).extend(append_ms)
                    samples.setdefault(f"{name} BuildContext", []).extend(build_ms)
    for name, latencies in samples.items():
        client = name.split()[0]
        report.measurements.append(
            Measurement(name, len(latencies), seconds[client], tuple(latencies))
        )
    report.checks.append(
        f"every one of {len(seconds) * per_round * rounds} contexts reflected the event appended just before it"
    )
    report.notes.append(
        f"{rounds} rounds of {per_round} iterations per client, alternating which client goes "
        "first; seconds and events/s cover each client's whole loop (append + build, warm-up "
        "sessions, and for TypeScript the tsx start-up, for Java and Kotlin the JVM start-up)"
    )
    return report
