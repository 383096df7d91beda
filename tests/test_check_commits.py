"""scripts/check_commits.py, the commit-message rule of ``make check`` and of the commit-msg hook,
on throw-away repositories: which commits it checks (a branch's own, the last ones on main, none
before the baseline, a shallow clone's) and what it refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_commits.py"
HOOK = ROOT / "scripts" / "commit-msg"
LONG = "x" * 73
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _repo(path: Path) -> Path:
    """A repository holding the script, on branch main."""
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    (path / "scripts").mkdir()
    (path / "scripts" / "check_commits.py").write_text(SCRIPT.read_text())
    return path


def _check(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(repo / "scripts" / "check_commits.py"), *args],
        cwd=repo,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_branch_is_checked_for_its_own_commits_only(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    _commit(repo, "an old subject that is far too long: " + LONG)  # main's, before the branch
    _git(repo, "checkout", "-q", "-b", "topic")
    _commit(repo, "short subject\n\nThe detail, in the body, as long as it likes: " + LONG)
    done = _check(repo)
    assert done.returncode == 0, done.stderr
    assert "1 commit(s) of HEAD that main does not have; 0 problem(s)" in done.stdout

    bad = _commit(repo, "a subject of seventy-three characters, which is one too many: " + "y" * 11)
    done = _check(repo)
    assert done.returncode == 1
    assert bad[:12] in done.stderr
    assert "73 characters" in done.stderr


def test_origin_main_is_preferred_to_the_local_main(tmp_path: Path) -> None:
    upstream = _repo(tmp_path / "upstream")
    _commit(upstream, "first")
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", str(upstream), str(clone)], env=ENV, check=True, capture_output=True
    )
    (clone / "scripts").mkdir()
    (clone / "scripts" / "check_commits.py").write_text(SCRIPT.read_text())
    _git(clone, "checkout", "-q", "-b", "topic")
    _commit(clone, LONG)
    _git(clone, "branch", "-f", "main", "topic")  # a local main that has the commit too
    done = _check(clone)
    assert done.returncode == 1
    assert "that origin/main does not have" in done.stdout


def test_on_main_the_last_commits_after_the_baseline_are_checked(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    old = _commit(repo, "before the rule: " + LONG)
    (repo / "scripts" / "commit-baseline").write_text(old + "\nwhy\n")
    _commit(repo, "after the rule, short")
    done = _check(repo)
    assert done.returncode == 0, done.stderr
    assert "the last 1 commit(s) (at most 20)" in done.stdout

    _commit(repo, LONG)
    _commit(repo, "short again")
    assert _check(repo).returncode == 1
    assert _check(repo, "--last", "1").returncode == 0  # the long one is the second to last


def test_a_shallow_clone_checks_the_commits_it_has(tmp_path: Path) -> None:
    upstream = _repo(tmp_path / "upstream")
    baseline = _commit(upstream, "before the rule: " + LONG)
    (upstream / "scripts" / "commit-baseline").write_text(baseline + "\n")
    _git(upstream, "add", "scripts")
    _commit(upstream, "the rule")
    for n in range(3):
        _commit(upstream, f"change {n}")
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "2", f"file://{upstream}", str(clone)],
        env=ENV,
        check=True,
        capture_output=True,
    )
    _git(clone, "checkout", "-q", "-b", "topic")
    _commit(clone, "fine")
    done = _check(clone)  # the baseline is beyond the clone's depth: no error
    assert done.returncode == 0, done.stderr
    assert "1 commit(s) of HEAD that origin/main does not have" in done.stdout
    _git(clone, "checkout", "-q", "main")
    done = _check(clone)  # main == origin/main: the last commits it has
    assert done.returncode == 0, done.stderr
    assert "the last 2 commit(s)" in done.stdout


@pytest.mark.parametrize(
    ("message", "word"),
    [
        (LONG, "73 characters"),
        ("subject\nno blank line before the body", "second line"),
        ("# only a comment\n", "empty"),
    ],
)
def test_the_hook_refuses_a_bad_message(tmp_path: Path, message: str, word: str) -> None:
    file = tmp_path / "COMMIT_EDITMSG"
    file.write_text(message)
    done = _check(ROOT, "--message", str(file))
    assert done.returncode == 1
    assert word in done.stderr


def test_the_hook_takes_a_good_message_and_refuses_a_long_subject(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    hook = repo / ".git" / "hooks" / "commit-msg"
    hook.write_text(HOOK.read_text())
    hook.chmod(0o755)
    _git(repo, "commit", "-q", "--allow-empty", "-m", "good\n\nbody " + LONG)
    refused = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", LONG],
        cwd=repo,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0
    assert "73 characters" in refused.stderr
    assert _git(repo, "log", "--format=%s") == "good"
