"""The CLI guide (docs/guide/cli.md) is true: each command of its synopsis exists with the options
it names, and each ``$ contextengine ...`` of its sample sessions prints what the page shows when
run against the console's fixture sidecar (the same app, user and sessions), at 120 columns.

The page may shorten a rule line (``─── cacheable prefix ... ───``) and writes ``<now>`` and
``<uuid>`` for what differs between runs; everything else must match character for character.
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.console.helpers import Sidecar, cli
from tests.docs.guides import blocks

pytestmark = pytest.mark.process

GUIDE = "docs/guide/cli.md"
_RULE = re.compile(r"─{3,}")
#: what the page writes for a value that differs between runs (with the column's padding)
_PLACEHOLDER = re.compile(r"(<now>|<uuid>) *")


@pytest.fixture(autouse=True)
def _plain_120_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.delenv("NO_COLOR", raising=False)
    for name in ("CONTEXTENGINE_TARGET", "CONTEXTENGINE_TOKEN", "CONTEXTENGINE_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)


def _synopsis() -> list[tuple[list[str], list[str]]]:
    """Each synopsis line as (command words, options), one entry per ``a|b|c`` alternative."""
    [block] = [b for b in blocks(GUIDE, "sh") if b.startswith("contextengine sessions list")]
    lines = []
    for line in block.splitlines():
        words = line.split("#", 1)[0].split()[1:]
        command: list[str] = []
        for word in words:
            if not re.fullmatch(r"[a-z|]+", word):
                break
            command.append(word)
        options = re.findall(r"--[a-z-]+|(?<=\s)-[a-z]\b", line.split("#", 1)[0])
        *head, last = command
        lines += [([*head, alternative], options) for alternative in last.split("|")]
    return lines


def test_the_synopsis_names_commands_and_options_that_exist() -> None:
    synopsis = _synopsis()
    assert len(synopsis) >= 12
    for command, options in synopsis:
        run = cli(*command, "--help")
        assert run.status == 0, (command, run.err)
        for option in options:
            assert option in run.out, f"`contextengine {' '.join(command)}` has no {option}"


def _samples() -> list[tuple[list[str], list[str]]]:
    """Each ``$ contextengine ...`` line of the console blocks and the lines shown after it."""
    samples: list[tuple[list[str], list[str]]] = []
    for block in blocks(GUIDE, "console"):
        for line in block.splitlines():
            if line.startswith("$ contextengine "):
                samples.append((shlex.split(line[2:])[1:], []))
            else:
                samples[-1][1].append(line)
    return samples


def _pattern(shown: str) -> re.Pattern[str]:
    """``shown`` as a pattern: rule lines any length, placeholders any value and padding."""
    parts = _PLACEHOLDER.split(_RULE.sub("───", shown.rstrip()))
    text = "".join(
        r"\S+ *" if i % 2 else re.escape(part).replace("───", "─+") for i, part in enumerate(parts)
    )
    return re.compile(text)


def test_the_sample_sessions_print_what_the_page_shows(console_sidecar: Sidecar) -> None:
    samples = _samples()
    assert len(samples) >= 3
    for argv, shown in samples:
        run = cli(*argv, "--target", console_sidecar.target)
        printed = (run.out + run.err).rstrip().splitlines()
        assert len(printed) == len(shown), (argv, printed)
        for got, want in zip(printed, shown, strict=True):
            assert _pattern(want).fullmatch(got.rstrip()), f"{' '.join(argv)}:\n{got}\n{want}"
