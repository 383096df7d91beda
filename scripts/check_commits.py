"""Checks the commit messages of this branch: a subject of at most 72 characters, and when there
is more, a blank line after the subject and the detail in the body (CONTRIBUTING.md, Commits).

Which commits (``make check-commits``, part of ``make check``):

- those of HEAD that ``origin/main`` does not have (a branch's own commits; none on main itself);
- without ``origin``, those that the local ``main`` branch does not have;
- on main itself (or with neither), the last ``--last`` commits (20);
- never a commit that ``scripts/commit-baseline`` names or that it descends from: the history
  before the rule keeps its long subjects. A shallow clone checks the commits it has.

``scripts/check_commits.py --message FILE`` checks one message (the commit-msg hook,
``scripts/commit-msg``; ``make hooks`` installs it). Standard library only: it runs on the
machine's Python before any environment exists.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

MAX_SUBJECT = 72
BASELINE = Path(__file__).with_name("commit-baseline")
UPSTREAMS = ("origin/main", "main")


def problems(message: str) -> list[str]:
    """What is wrong with one commit message (git's comment lines already stripped)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    found = []
    if not subject.strip():
        found.append("the subject is empty")
    if len(subject) > MAX_SUBJECT:
        found.append(
            f"the subject has {len(subject)} characters (at most {MAX_SUBJECT}: "
            "put the detail in the body)"
        )
    if len(lines) > 1 and lines[1].strip():
        found.append("the second line is not blank (a blank line separates subject and body)")
    return found


def _git(*args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout if done.returncode == 0 else ""


def _commit(name: str) -> str | None:
    """The commit ``name`` names here, or None (a missing branch, or beyond a shallow clone)."""
    out = _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False).strip()
    return out or None


def commits(last: int) -> tuple[list[str], str]:
    """The commits to check (newest first), and a line saying which they are."""
    head = _commit("HEAD")
    if head is None:
        return [], "no commits yet"
    exclude: list[str] = []
    baseline_text = BASELINE.read_text().split()[0] if BASELINE.exists() else ""
    baseline = _commit(baseline_text) if baseline_text else None
    if baseline is not None:
        exclude.append(f"^{baseline}")
    for name in UPSTREAMS:
        upstream = _commit(name)
        if upstream is not None and upstream != head:
            listed = _git("rev-list", "HEAD", f"^{upstream}", *exclude).split()
            return listed, f"{len(listed)} commit(s) of HEAD that {name} does not have"
    listed = _git("rev-list", f"--max-count={last}", "HEAD", *exclude).split()
    return listed, f"the last {len(listed)} commit(s) (at most {last})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--message", type=Path, help="check this message file (commit-msg hook)")
    parser.add_argument("--last", type=int, default=20, help="how many commits on main (20)")
    args = parser.parse_args(argv)
    if args.message is not None:
        text = "".join(
            line
            for line in args.message.read_text().splitlines(keepends=True)
            if not line.startswith("#")
        )
        found = problems(text)
        for problem in found:
            print(f"commit message: {problem}", file=sys.stderr)
        return 1 if found else 0
    listed, which = commits(args.last)
    failed = 0
    for commit in listed:
        message = _git("log", "-1", "--format=%B", commit)
        for problem in problems(message):
            failed += 1
            print(f"{commit[:12]} {message.splitlines()[0][:60]!r}...: {problem}", file=sys.stderr)
    print(f"commit messages checked: {which}; {failed} problem(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
