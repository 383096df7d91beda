"""The Makefile documents itself: every target is defined by one rule, which carries a ``## ``
description on its line, and ``make help`` lists each target once with that line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = ROOT / "Makefile"
#: a rule's first line: ``name: prerequisites`` (not ``name := value``, not a pattern or a file)
RULE = re.compile(r"^([a-z][a-z0-9-]*)\s*:(?!=)(.*)$")


def _rules() -> list[tuple[str, str]]:
    return [
        (found.group(1), found.group(2))
        for line in MAKEFILE.read_text().splitlines()
        if (found := RULE.match(line))
    ]


def test_every_target_has_one_rule_and_a_description() -> None:
    names = [name for name, _ in _rules()]
    assert len(names) > 40
    twice = sorted({name for name in names if names.count(name) > 1})
    assert twice == [], f"targets defined by more than one rule: {twice}"
    undocumented = [name for name, rest in _rules() if "## " not in rest]
    assert undocumented == [], f"targets without a `## ` description: {undocumented}"


def test_make_help_lists_every_target_once() -> None:
    done = subprocess.run(
        ["make", "--no-print-directory", "-s", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    assert sorted(listed) == sorted(name for name, _ in _rules())
    descriptions = {line.split()[0]: line.split(None, 1)[1] for line in done.stdout.splitlines()}
    assert descriptions["check"].startswith("The fast loop")
    assert "CI" in descriptions["test"]
