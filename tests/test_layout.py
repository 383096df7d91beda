"""The tests are laid out by the package they test, and every module declares its level
(``tests/README.md``).

- A test module (``test_*.py``) sits in the folder of what it tests: ``tests/<package>/`` for a
  package of ``server/contextengine`` (subfolders mirror its subpackages), ``tests/config`` for
  the ``contextengine serve`` command and its settings (``cli.py``, ``config.py``,
  ``settings.py``), ``tests/client``, ``tests/console`` and ``tests/adk`` for the client
  distributions, or one of the cross-cutting suites (``tests/docs``, ``tests/conformance``);
  the repository's own rules (layers, the Makefile, commits, this file) stay at the top.
- The support folders (``tests/support``, ``tests/fakes``, ``tests/golden``) hold no test module.
- Every test module assigns ``pytestmark`` with exactly one level marker (``LEVELS``), each
  declared in ``pyproject.toml``.

Modules are parsed with ``ast``, not imported; the meta-tests plant offenders in a fake tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from contextengine._compat import tomllib

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SERVER = ROOT / "server" / "contextengine"
#: a module's level: how much of the system it runs, or the kind of judge it is
LEVELS = ("unit", "service", "process", "parity", "fuzz", "scaling")
#: folders that test no single server package, and why (tests/README.md says the same)
EXTRA_FOLDERS = {
    "config": "the serve command and its settings: cli.py, config.py, settings.py",
    "client": "the client distribution's contextengine.client (clients/python)",
    "console": "the client distribution's operator console, contextengine.console",
    "adk": "the ADK drop-ins' distribution, contextengine.adk (clients/adk_python)",
    "docs": "cross-cutting: runs every guide's code and the README's commands",
    "conformance": "cross-cutting: the scenarios and the ADK ports every client runs",
}
#: folders of shared support, never of tests
SUPPORT_FOLDERS = frozenset({"support", "fakes", "golden"})
#: subfolders that are no subpackage: one suite every implementation of the package passes
SUITE_FOLDERS = {("store", "contract"): "the contract every store backend passes"}
SKIPPED = frozenset({"__pycache__", "snapshots"})


def packages(server: Path = SERVER) -> frozenset[str]:
    """The server's packages: ``server/contextengine/<name>/__init__.py``."""
    return frozenset(p.parent.name for p in server.glob("*/__init__.py"))


def misplaced(tests: Path, server: Path, known: frozenset[str]) -> list[str]:
    """Every test module outside a known folder, and every test module in a support folder."""
    found: list[str] = []
    for path in sorted(tests.rglob("test_*.py")):
        parts = path.relative_to(tests).parts
        if len(parts) == 1 or SKIPPED.intersection(parts):
            continue
        top = parts[0]
        if top in SUPPORT_FOLDERS:
            found.append(f"{path.relative_to(tests)}: a support folder holds no tests")
        elif top not in known:
            found.append(f"{path.relative_to(tests)}: tests/{top} is no package's folder")
        elif top not in EXTRA_FOLDERS and len(parts) > 2:
            # a subfolder mirrors a subpackage (tests/core/context -> core/context)
            mirrored = server.joinpath(*parts[:-1])
            if not mirrored.is_dir() and tuple(parts[:-1]) not in SUITE_FOLDERS:
                found.append(f"{path.relative_to(tests)}: {mirrored.name} is no subpackage")
    return found


def level_markers(path: Path) -> list[str] | None:
    """The ``pytest.mark.<name>`` names of the module's ``pytestmark`` (None: it has none)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            names = [
                sub.attr
                for sub in ast.walk(node.value)
                if isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Attribute)
                and sub.value.attr == "mark"
            ]
            return [name for name in names if name in LEVELS]
    return None


def unlevelled(tests: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(tests.rglob("test_*.py")):
        if SKIPPED.intersection(path.parts):
            continue
        levels = level_markers(path)
        where = path.relative_to(tests)
        if levels is None:
            found.append(f"{where}: no pytestmark (one of {', '.join(LEVELS)})")
        elif len(levels) != 1:
            found.append(f"{where}: {len(levels)} level markers {levels} (exactly one)")
    return found


def test_every_test_module_sits_in_a_known_folder() -> None:
    known = packages() | set(EXTRA_FOLDERS)
    offenders = misplaced(TESTS, SERVER, known)
    assert not offenders, "move them (tests/README.md):\n  " + "\n  ".join(offenders)


def test_every_test_module_declares_one_level() -> None:
    offenders = unlevelled(TESTS)
    assert not offenders, "add `pytestmark` (tests/README.md):\n  " + "\n  ".join(offenders)


def test_the_levels_are_declared_markers() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {line.split(":")[0] for line in config["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(LEVELS) <= declared
    assert "--strict-markers" in config["tool"]["pytest"]["ini_options"]["addopts"]


def test_the_folders_are_found() -> None:
    found = packages()
    assert {"core", "store", "service", "compaction", "prompt_cache"} <= found
    assert all((TESTS / name).is_dir() for name in ("core", "store", "client", "adk", "docs"))


# --------------------------------------------------------------------------- the checks themselves


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checks_catch_planted_offenders(tmp_path: Path) -> None:
    server, tests = tmp_path / "server", tmp_path / "tests"
    _plant(
        server, {"core/__init__.py": "", "core/context/__init__.py": "", "store/__init__.py": ""}
    )
    marked = "import pytest\npytestmark = pytest.mark.unit\n"
    _plant(
        tests,
        {
            "core/test_ok.py": marked,
            "core/context/test_ok.py": marked,
            "store/test_two.py": "pytestmark = [pytest.mark.unit, pytest.mark.service]\n",
            "store/test_slow_only.py": "pytestmark = pytest.mark.slow\n",
            "core/test_none.py": "def test_x() -> None: ...\n",
            "faults/test_crash.py": marked,
            "core/nowhere/test_x.py": marked,
            "support/test_helper.py": marked,
            "test_rules.py": marked,
        },
    )
    wrong = misplaced(tests, server, packages(server))
    assert [line.split(":")[0] for line in wrong] == [
        "core/nowhere/test_x.py",
        "faults/test_crash.py",
        "support/test_helper.py",
    ]
    assert [line.split(":")[0] for line in unlevelled(tests)] == [
        "core/test_none.py",
        "store/test_slow_only.py",
        "store/test_two.py",
    ]
    assert level_markers(tests / "core/test_ok.py") == ["unit"]
