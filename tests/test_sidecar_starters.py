"""One starter of ``contextengine serve`` per language (issue #36): every test, benchmark and
script that needs a real sidecar out of process starts it through its language's starter
(CONTRIBUTING.md, "Starting a sidecar in a test"), so they all start it the same way (a free
loopback port written to a port file, the output in a log shown when the start fails, a stop on
exit) and a change to that protocol is made once per language.

A file starts the sidecar when it both names ``serve`` as a command-line word (``"serve"`` or
``'serve'``, or a quoted ``contextengine serve`` command line) and launches a process
(``ProcessBuilder``, ``spawn``, ``execFile``, ``subprocess``, ``Popen``...). Checked: every Java,
Kotlin, TypeScript and Python file under ``clients/``, and the Python under ``server/``,
``tests/``, ``bench/`` and ``scripts/`` (never ``node_modules``, ``target``, ``dist`` or
``build``). Outside the starters, only the few Python files in ``EXCEPTIONS`` may, each for the
reason given there. The meta-tests at the end plant starters in fake trees, so the check cannot
pass by finding nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
#: this file, whose planted sources would count
THIS = Path(__file__).resolve()

#: the one starter per language, from the repository's root
STARTERS = {
    "Python": "server/contextengine/testing/sidecar.py",
    "JVM (Java, Kotlin, ADK Java)": "clients/java/src/test/java/dev/contextengine/client/Sidecar.java",
    "TypeScript (client, ADK TypeScript)": "clients/typescript/test/sidecar.ts",
}

#: Python files that start ``serve`` themselves, by the end of their path (the tests/ folder's
#: layout may change around them): what they test is the command line itself.
EXCEPTIONS = {
    "config/test_serve_config.py": "serve from a config file alone; a bad file's exit status",
    "config/serving.py": "serve with only a config file's settings, as an operator runs it",
    "config/test_event_loop.py": "serve refused at start (uvloop missing): its exit and message",
    "test_startup_imports.py": "not a sidecar: `serve --help` in a child Python, for its imports",
}

#: what is scanned: (folder, file endings)
SCANNED = (
    ("clients", (".java", ".kt", ".ts", ".py")),
    ("server", (".py",)),
    ("tests", (".py",)),
    ("bench", (".py",)),
    ("scripts", (".py",)),
)
#: directories never scanned (dependencies, build output, environments)
SKIPPED_DIRS = frozenset(
    {"node_modules", "target", "dist", "build", ".venv", "venv", "__pycache__", ".git"}
)

#: ``serve`` as a word of a command line: an argument of its own, or in a quoted command
SERVE_WORD = re.compile(r"""(["'])serve\1|(["'])(?:[^"'`\n]*/)?contextengine serve\b""")
#: a process being launched, in any of the scanned languages
LAUNCH = re.compile(
    r"\bProcessBuilder\b|\bspawn(?:Sync)?\(|\bexecFile(?:Sync)?\(|\bexecSync\(|"
    r"\bsubprocess\.|\bcreate_subprocess_(?:exec|shell)\b|\bPopen\b"
)


def scanned_files(root: Path) -> Iterator[Path]:
    for folder, endings in SCANNED:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            relative = path.relative_to(root)
            if path.suffix not in endings or SKIPPED_DIRS.intersection(relative.parts):
                continue
            if path.is_file() and path.resolve() != THIS:
                yield path


def starts_serve(text: str) -> bool:
    """Whether a file's text names ``serve`` as a command-line word and launches a process."""
    return SERVE_WORD.search(text) is not None and LAUNCH.search(text) is not None


def starting_files(root: Path) -> list[str]:
    """The files under ``root`` that start ``serve``, from ``root``, in order."""
    return [
        path.relative_to(root).as_posix()
        for path in scanned_files(root)
        if starts_serve(path.read_text(encoding="utf-8", errors="replace"))
    ]


def unexpected(found: list[str]) -> list[str]:
    """What starts ``serve`` outside the starters and the exceptions."""
    allowed = set(STARTERS.values())
    return [
        path
        for path in found
        if path not in allowed and not any(path.endswith(f"/{end}") for end in EXCEPTIONS)
    ]


def test_only_the_starters_start_the_sidecar() -> None:
    offenders = unexpected(starting_files(ROOT))
    assert offenders == [], (
        "these files start `contextengine serve` themselves; use their language's starter "
        f"(CONTRIBUTING.md, 'Starting a sidecar in a test': {sorted(STARTERS.values())}): "
        f"{offenders}"
    )


def test_every_starter_starts_it() -> None:
    found = starting_files(ROOT)
    missing = [path for path in STARTERS.values() if path not in found]
    assert missing == [], f"a starter that no longer starts serve (moved?): {missing}"


def test_every_exception_is_still_needed() -> None:
    found = starting_files(ROOT)
    stale = [end for end in EXCEPTIONS if not any(path.endswith(f"/{end}") for path in found)]
    assert stale == [], f"exceptions that no file needs any more (remove them): {stale}"


def test_contributing_names_every_starter() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "## Starting a sidecar in a test" in text
    section = text.split("## Starting a sidecar in a test", 1)[1].split("\n## ", 1)[0]
    for path in STARTERS.values():
        assert f"`{path}`" in section, f"CONTRIBUTING.md's section does not name {path}"


# --- meta-tests: planted starters are found ---------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "source"),
    [
        (
            "clients/kotlin/src/test/kotlin/Own.kt",
            'val p = ProcessBuilder(python, "-m", "contextengine", "serve", "--db", ":memory:")',
        ),
        (
            "clients/java-adk/src/test/java/Own.java",
            'List<String> argv = List.of("contextengine", "serve");\n'
            "Process p = new ProcessBuilder(argv).start();",
        ),
        (
            "clients/typescript-adk/test/own.test.ts",
            'const child = spawn(PYTHON, ["-m", "contextengine", "serve"]);',
        ),
        (
            "clients/typescript/bench/own.ts",
            'execSync(".venv/bin/contextengine serve --db :memory: &");',
        ),
        (
            "bench/own.py",
            "subprocess.Popen([sys.executable, '-m', 'contextengine', 'serve'])",
        ),
        (
            "tests/store/own.py",
            'await asyncio.create_subprocess_exec(python, "-m", "contextengine", "serve")',
        ),
    ],
)
def test_a_planted_starter_is_found(tmp_path: Path, relative: str, source: str) -> None:
    path = tmp_path / relative
    path.parent.mkdir(parents=True)
    path.write_text(source + "\n")
    assert unexpected(starting_files(tmp_path)) == [relative]


@pytest.mark.parametrize(
    ("relative", "source"),
    [
        # in-process: the command line parsed, no process
        ("tests/config/own.py", 'assert cli.main(["serve", "--help"]) == 0'),
        # a comment and a process of something else
        (
            "clients/typescript/test/own.test.ts",
            '// against `contextengine serve`\nspawn(PYTHON, ["-m", "tests.auth.certs"]);',
        ),
        # not scanned: dependencies and build output
        ("clients/typescript/node_modules/x/own.ts", 'spawn("contextengine", ["serve"]);'),
        ("clients/java/target/own.java", 'new ProcessBuilder("contextengine", "serve");'),
    ],
)
def test_what_is_not_a_starter(tmp_path: Path, relative: str, source: str) -> None:
    path = tmp_path / relative
    path.parent.mkdir(parents=True)
    path.write_text(source + "\n")
    assert starting_files(tmp_path) == []


def test_the_starters_and_the_exceptions_are_allowed(tmp_path: Path) -> None:
    launch = 'subprocess.run(["contextengine", "serve"])\n'
    planted = [*STARTERS.values(), "tests/elsewhere/config/serving.py"]
    for relative in planted:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(launch)
    assert sorted(starting_files(tmp_path)) == sorted(planted)
    assert unexpected(starting_files(tmp_path)) == []
