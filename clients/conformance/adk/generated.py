"""Generated conversations through every ADK port, judged call by call (README.md here).

    python clients/conformance/adk/generated.py --target HOST:PORT --seeds 1-6 \\
        --work build/adk-generated [--ports python,java,typescript] [--driver PORT=COMMAND]

The drivers are this repository's (``--driver`` names another command for a port, the README's
contract; the Java driver needs ``make java-adk-build``, the TypeScript one ``make
ts-adk-deps``).

1. ``generate.py`` writes one conversation per seed into ``WORK/conversations/``;
2. every port's driver runs all of them against the sidecar (the ports side by side, each
   conversation on its own app: ``adk-generated-<port>-seed-NNNN``), one report per port and
   conversation in ``WORK/reports/<port>/``;
3. ``compare.py`` judges each conversation: every model request of every port against
   google-adk 2.13's contents builder, and the ports against each other (session logs, summaries
   included, and every request, call by call).

Prints one line per conversation and the differences of those that differ (all of them in
``WORK/differences/<seed>.txt``); exit status 1 if any conversation differs or a driver failed.
``make adk-parity`` runs a handful; ``make adk-parity-generated SEEDS=1-300`` as many as asked.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import compare
import generate

#: Differences printed per conversation (all of them are in the work directory).
SHOWN = 3
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def default_driver(port: str) -> str:
    """The shell command of this repository's driver of ``port`` (arguments appended)."""
    if port == "python":
        return f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'python_driver.py'))}"
    if port == "java":
        java = ROOT / "clients" / "java-adk"
        classpath = java / "target" / "test-classpath.txt"
        if not classpath.exists():
            raise SystemExit(f"{classpath} is missing: run make java-adk-build first")
        entries = [classpath.read_text().strip(), "target/classes", "target/test-classes"]
        return (
            f"cd {shlex.quote(str(java))} && java -cp {shlex.quote(':'.join(entries))} "
            "dev.contextengine.adk.parity.Driver"
        )
    if port == "typescript":
        typescript = ROOT / "clients" / "typescript-adk"
        return f"cd {shlex.quote(str(typescript))} && node_modules/.bin/tsx parity/driver.ts"
    raise SystemExit(f"no driver of port {port!r} in this repository: name one with --driver")


def run_drivers(target: str, drivers: dict[str, str], conversations: Path, reports: Path) -> None:
    """Every port's driver over every conversation, the ports side by side."""
    running = []
    for port, command in drivers.items():
        out = reports / port
        out.mkdir(parents=True, exist_ok=True)
        arguments = [
            f"--target {shlex.quote(target)}",
            f"--conversation {shlex.quote(str(conversations))}",
            f"--app adk-generated-{port}",
            "--user generated-user --session generated-session",
            f"--out {shlex.quote(str(out))}",
        ]
        log = (reports / f"{port}.log").open("w", encoding="utf-8")
        running.append(
            (
                port,
                log,
                subprocess.Popen(
                    f"{command} {' '.join(arguments)}",
                    shell=True,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
            )
        )
    for port, log, process in running:
        status = process.wait()
        log.close()
        print(f"  {port} driver: exit status {status} (log: {log.name})", flush=True)


def judge(
    target: str, conversations: Path, reports: Path, ports: Sequence[str], differences: Path
) -> int:
    """Compares each conversation's reports; returns how many differ."""
    failed = 0
    for path in sorted(conversations.glob("*.json")):
        conversation = json.loads(path.read_text("utf-8"))
        report_paths = [reports / port / f"{path.stem}.jsonl" for port in ports]
        present = [p for p in report_paths if p.exists()]
        problems = [f"no report {p}" for p in report_paths if not p.exists()]
        problems += compare.compare(target, present, ports, conversation)
        calls = sum(len(turn["answers"]) for turn in conversation["turns"])
        summary = f"{len(conversation['turns'])} turns, {calls} model calls a port"
        if not problems:
            print(f"{path.stem}: identical in {', '.join(ports)} ({summary})", flush=True)
            continue
        failed += 1
        differences.mkdir(parents=True, exist_ok=True)
        (differences / f"{path.stem}.txt").write_text("\n".join(problems) + "\n", "utf-8")
        print(f"{path.stem}: {len(problems)} difference(s) ({summary})", flush=True)
        for problem in problems[:SHOWN]:
            print("    " + problem.replace("\n", "\n    ")[:2000], flush=True)
    return failed


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the sidecar, HOST:PORT")
    parser.add_argument("--seeds", required=True, help='"7", "1-20" or "1,5,9-12"')
    parser.add_argument("--work", required=True, type=Path, help="a directory (emptied first)")
    parser.add_argument("--ports", default="python,java,typescript", help="the ports to run")
    parser.add_argument(
        "--driver",
        action="append",
        default=[],
        metavar="PORT=COMMAND",
        help="another driver command for a port (README.md's contract; arguments appended)",
    )
    args = parser.parse_args(argv)
    named = dict(item.split("=", 1) for item in args.driver)
    drivers = {
        port: named.get(port) or default_driver(port) for port in args.ports.split(",") if port
    }
    work: Path = args.work.resolve()
    conversations, reports = work / "conversations", work / "reports"
    for directory in (conversations, reports, work / "differences"):
        for old in directory.glob("**/*"):
            if old.is_file():
                old.unlink()
    seeds = generate.seeds_of(args.seeds)
    started = time.monotonic()
    generate.quiet()
    conversations.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        text = json.dumps(generate.conversation(seed), ensure_ascii=False, indent=1)
        (conversations / f"seed-{seed:04d}.json").write_text(text + "\n", "utf-8")
    print(f"adk parity (generated): {len(seeds)} conversation(s) in {conversations}", flush=True)
    run_drivers(args.target, drivers, conversations, reports)
    failed = judge(args.target, conversations, reports, list(drivers), work / "differences")
    elapsed = time.monotonic() - started
    print(
        f"adk parity (generated): {len(seeds) - failed} of {len(seeds)} conversation(s) "
        f"identical in {', '.join(drivers)} and equal to google-adk 2.13's at every model call "
        f"({elapsed:.0f} s)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
