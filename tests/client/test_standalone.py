"""The Python client installs and works alone: its wheel in a fresh virtual environment that holds
only the client's declared dependencies (grpcio, grpcio-status, protobuf,
googleapis-common-protos and what they need), no server module, no server dependency.

Offline: the wheel is built from clients/python with the hatchling of the project's environment
(``--no-build-isolation``), the fresh environment has no pip of its own (the project's pip installs
into it with ``--python``), and the dependencies are the project environment's own installed files,
linked in by distribution (from their RECORDs), so nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from contextengine.testing import start_local_server

pytestmark = [pytest.mark.process, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"

#: Runs inside the fresh environment: where everything comes from, what is not there, one call.
PROBE = r"""
import asyncio, importlib.util, json, sys
import contextengine, contextengine.client, contextengine.v1
from contextengine.client import ContextEngineClient
from contextengine.v1 import event_pb2

async def call(target):
    async with ContextEngineClient(target, attempts=1) as ce:
        session = await ce.create_session("standalone", "u", state={"k": [1, "two", None]})
        await ce.append_event("standalone", "u", session.id, event_pb2.Event(author="user"))
        got = await ce.get_session("standalone", "u", session.id)
        return len(got.events)

print(json.dumps({
    "paths": [str(p) for p in contextengine.__path__],
    "client": contextengine.client.__file__,
    "missing": [m for m in ("contextengine.core", "contextengine.settings",
                            "contextengine.transport", "contextengine.engine", "contextengine.cli", "aiosqlite", "tiktoken", "google.genai")
                if importlib.util.find_spec(m) is None],
    "loaded": sorted(m for m in sys.modules if m.startswith("contextengine.")
                     and not m.startswith(("contextengine.client", "contextengine.v1"))),
    "events": asyncio.run(call(sys.argv[1])),
}))
"""


def _run(*args: str | Path) -> str:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


def _requirements(wheel: Path) -> list[Requirement]:
    """The wheel's own Requires-Dist (what an agent's pip would install with it)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    return [
        Requirement(line[len("Requires-Dist: ") :])
        for line in text.splitlines()
        if line.startswith("Requires-Dist: ")
    ]


def _closure(requirements: list[Requirement]) -> set[str]:
    """The installed distributions these requirements need, transitively (extras and markers
    that do not apply are left out)."""
    seen: set[str] = set()
    todo = [r for r in requirements if r.marker is None or r.marker.evaluate()]
    while todo:
        requirement = todo.pop()
        dist = metadata.distribution(requirement.name)
        assert dist.version in requirement.specifier, f"{requirement} vs {dist.version}"
        if dist.metadata["Name"].lower() in seen:
            continue
        seen.add(dist.metadata["Name"].lower())
        for line in dist.requires or ():
            sub = Requirement(line)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(sub)
    return seen


def _link_distributions(names: set[str], site: Path) -> None:
    """Links each distribution's top-level entries (``google/protobuf``-style for the ``google``
    namespace) from the project environment into ``site``."""
    for name in names:
        dist = metadata.distribution(name)
        for file in dist.files or ():
            parts = file.parts
            top = parts[:2] if parts[0] == "google" and len(parts) > 2 else parts[:1]
            if top[0] in ("..", "__pycache__") or top[0].endswith(".pth"):
                continue
            source = Path(str(dist.locate_file(Path(*top))))
            target = site.joinpath(*top)
            if not target.exists() and source.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(source, target_is_directory=source.is_dir())


async def test_the_client_wheel_installs_and_works_without_the_server(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-index",
        "--no-build-isolation",
        "-w",
        wheels,
        CLIENT,
    )
    (wheel,) = wheels.glob("contextengine_client-*.whl")
    every = _requirements(wheel)
    # the console's (contextengine.console) behind the `cli` extra; the rest is the client's own
    requirements = [r for r in every if r.marker is None]
    assert sorted(r.name for r in requirements) == [
        "googleapis-common-protos",
        "grpcio",
        "grpcio-status",
        "protobuf",
    ]
    extras = [r for r in every if r.marker is not None]
    assert sorted(r.name for r in extras) == ["click", "pyyaml", "rich"]
    assert all(r.marker is not None and r.marker.evaluate({"extra": "cli"}) for r in extras)
    assert all(r.specifier and all(s.operator != "==" for s in r.specifier) for r in every)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Python: >=3.10" in meta.splitlines()
    # The namespace package stays one: neither distribution ships contextengine/__init__.py.
    assert "contextengine/__init__.py" not in names
    assert {n.split("/")[1] for n in names if n.startswith("contextengine/")} == {
        "client",
        "console",
        "v1",
    }

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    )
    _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        wheel,
    )
    _link_distributions(_closure(requirements), site)
    # Every requirement of what is installed there is met there (pip's own check).
    _run(sys.executable, "-m", "pip", "--python", python, "check")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    async with start_local_server(":memory:") as server:
        probe = await asyncio.create_subprocess_exec(
            python,
            "-I",
            "-c",
            PROBE,
            server.target,
            env=env,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(probe.communicate(), 60)
    assert probe.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["paths"] == [str(site / "contextengine")]
    assert report["client"].startswith(str(site))
    assert report["missing"] == [
        "contextengine.core",
        "contextengine.settings",
        "contextengine.transport",
        "contextengine.engine",
        "contextengine.cli",
        "aiosqlite",
        "tiktoken",
        "google.genai",
    ]
    assert report["loaded"] == []
    assert report["events"] == 1
    assert sysconfig.get_path("purelib") != str(site)
