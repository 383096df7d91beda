"""Writes (or checks) ``deploy/requirements.lock``: the exact versions of everything the sidecar
needs at run time, read from the installed distributions of this virtual environment (the one
``make install-dev`` made, where they were resolved together with the test tools and google-adk).

The lock is the closure of the runtime requirements of ``contextengine`` and
``contextengine-client`` as their pyproject.toml files say (no extras: no test or dev tools),
through the installed distributions' own requirements, each ``name==version`` as installed.
The Dockerfile installs with it as pip constraints, so an image has the versions the tests ran
with. ``python deploy/lock.py --check`` fails when the file names other distributions than the
runtime closure (``make lock`` rewrites it)."""

from __future__ import annotations

import argparse
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = Path(__file__).with_name("requirements.lock")
#: the distributions the image installs from the source tree (not pinned: they are the image)
PROJECTS = {
    "contextengine": ROOT / "pyproject.toml",
    "contextengine-client": ROOT / "clients" / "python" / "pyproject.toml",
}
HEADER = (
    "# The sidecar's runtime dependencies as the tests ran them: made by `make lock`\n"
    "# (deploy/lock.py) from the development environment; checked by `make check-lock`.\n"
)


def _runtime_requirements(name: str) -> list[Requirement]:
    """A distribution's requirements without extras (a root's from its pyproject.toml, which the
    metadata of an editable install may lag behind)."""
    environment: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
    environment["extra"] = ""
    if name in PROJECTS:
        texts = tomllib.loads(PROJECTS[name].read_text())["project"].get("dependencies", [])
    else:
        texts = metadata.requires(name) or []
    found = []
    for text in texts:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            found.append(requirement)
    return found


def closure() -> dict[str, str]:
    """Every distribution the roots need at run time, by canonical name: its installed version."""
    pinned: dict[str, str] = {}
    todo = list(PROJECTS)
    seen: set[str] = set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for requirement in _runtime_requirements(name):
            dependency = canonicalize_name(requirement.name)
            try:
                version = metadata.version(dependency)
            except metadata.PackageNotFoundError:
                raise SystemExit(f"{dependency} is not installed: run `make install-dev`") from None
            if not requirement.specifier.contains(version, prereleases=True):
                raise SystemExit(f"{dependency} {version} does not satisfy {requirement}")
            if dependency not in PROJECTS:
                pinned[dependency] = version
            todo.append(dependency)
    return pinned


def render() -> str:
    return HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(closure().items()))


def _locked() -> dict[str, str]:
    lines = LOCK.read_text().splitlines() if LOCK.exists() else []
    pairs = (line.split("==", 1) for line in lines if line and not line.startswith("#"))
    return {canonicalize_name(name): version for name, version in pairs}


def check() -> int:
    """1 when the lock names other distributions than the runtime closure (a dependency added or
    dropped without `make lock`); a different installed version of a locked one is only
    reported: a fresh environment may resolve an unpinned transitive dependency anew."""
    wanted, locked = closure(), _locked()
    missing, extra = sorted(wanted.keys() - locked), sorted(locked.keys() - wanted)
    for name in sorted(wanted.keys() & locked.keys()):
        if wanted[name] != locked[name]:
            print(f"note: {name} is {wanted[name]} here, {locked[name]} in the lock")
    if missing or extra:
        print(
            f"{LOCK} is stale (missing: {', '.join(missing) or '-'}; not needed: "
            f"{', '.join(extra) or '-'}): run `make lock`",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the lock is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        return check()
    LOCK.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
