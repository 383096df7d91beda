"""A real headless Chromium for the browser tests: Debian's ``chromium`` package, driven by
Playwright for Python (``chromium.launch(executable_path=...)``; Playwright's own browser
download is never used, and ``playwright install`` is never run).

On a machine without it, ``ensure_chromium`` installs it (``apt-get install -y chromium``) when it
runs as root with apt: ``make browser`` does so before pytest, so the install is not inside a
test's time limit. A missing Chromium fails the browser tests in CI (``CI=true``) and when
running as root (``make browser`` could have installed it); only elsewhere (not root, so no
install) are they skipped, with a loud reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

_APT_PACKAGE = "chromium"
#: where Debian's package puts the browser (``/usr/bin/chromium`` is a shell wrapper around it)
_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")


def chromium_path() -> Path | None:
    """Debian's Chromium, or None."""
    for candidate in _CANDIDATES:
        if os.access(candidate, os.X_OK):
            return Path(candidate)
    found = shutil.which("chromium")
    return Path(found) if found else None


def _install() -> Path | None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", _APT_PACKAGE]
    if subprocess.run(command, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
        subprocess.run(command, env=env, capture_output=True, check=False)
    return chromium_path()


def ensure_chromium() -> Path | None:
    """Chromium's path, installing it first when missing and possible; None where it cannot
    be had."""
    return chromium_path() or _install()


def require_chromium() -> Path:
    """Chromium's path for a test: when there is none, fails in CI or as root, skips otherwise."""
    found = chromium_path()
    if found is not None:
        return found
    message = "BROWSER TESTS NOT RUN: no Chromium (Debian's 'chromium' package)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: a missing Chromium is a failure)", pytrace=False)
    if os.geteuid() == 0:
        pytest.fail(message + " (running as root: run `make browser` to install it)", pytrace=False)
    pytest.skip(message + " and not root, so `make browser` cannot install it")


if __name__ == "__main__":
    path = ensure_chromium()
    print(f"Chromium: {path}" if path else "Chromium: NOT AVAILABLE (apt-get install chromium)")
