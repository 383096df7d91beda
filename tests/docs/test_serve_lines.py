"""Every ``contextengine serve ...`` line of the documentation's shell blocks (what a reader
runs; the console blocks show sessions, refusals included, and their own tests run them) is a
configuration the sidecar accepts: each is run as ``contextengine config show`` with the same flags (the settings serve
would run with, checked the same way, nothing started), so a renamed or removed flag, or a value
out of range, fails here before a reader copies it."""

from __future__ import annotations

import contextlib
import io
import re
import shlex

import pytest

from contextengine.cli import main
from tests.docs.guides import ROOT, blocks, pages

pytestmark = pytest.mark.unit

_SERVE = re.compile(r"^(?:\$ )?contextengine serve\b(.*)$")


def _serve_lines() -> list[tuple[str, str]]:
    found = []
    for page in pages():
        for language in ("sh",):
            for block in blocks(page, language):
                for line in block.splitlines():
                    match = _SERVE.match(line.strip())
                    if match:
                        found.append((str(page.relative_to(ROOT)), match.group(1)))
    return found


def test_the_docs_have_serve_lines() -> None:
    pages_with_lines = {page for page, _ in _serve_lines()}
    assert {"docs/guide/inspector.md", "docs/operations/scaling-out.md"} <= pages_with_lines


@pytest.mark.parametrize(("page", "flags"), _serve_lines())
def test_each_serve_line_is_an_accepted_configuration(
    page: str, flags: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CONTEXTENGINE_CONFIG", "CONTEXTENGINE_DB", "CONTEXTENGINE_LISTEN"):
        monkeypatch.delenv(name, raising=False)
    argv = shlex.split(flags.split("  #", 1)[0].split(" # ", 1)[0])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["config", "show", *argv])
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
    assert status == 0, f"{page}: contextengine serve {flags}\n{err.getvalue()}"
