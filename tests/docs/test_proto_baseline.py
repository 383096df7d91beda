"""``make lint``'s ``buf breaking`` has a baseline that can fail it: ``proto/baseline.json`` (the
released API) accepts today's protos and an added field, and refuses a renumbered one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUF = Path(sys.executable).with_name("buf")
BASELINE = ROOT / "proto" / "baseline.json"
EVENT = Path("contextengine") / "v1" / "event.proto"

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not BUF.exists(), reason="buf is installed by `make test`"),
]


def _breaking(proto: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BUF), "breaking", str(proto), "--against", str(BASELINE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _copy(tmp_path: Path) -> Path:
    proto = tmp_path / "proto"
    shutil.copytree(ROOT / "proto", proto, ignore=shutil.ignore_patterns("baseline.json"))
    shutil.copy(ROOT / "buf.yaml", tmp_path / "buf.yaml")
    return proto


def test_todays_protos_are_compatible_with_the_baseline() -> None:
    result = _breaking(ROOT / "proto")
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_added_field_is_compatible(tmp_path: Path) -> None:
    proto = _copy(tmp_path)
    event = proto / EVENT
    text = event.read_text()
    head, sep, tail = text.partition("message Event {")
    assert sep, "event.proto has no message Event"
    event.write_text(head + sep + "\n  string added_for_the_test = 999;" + tail)
    result = _breaking(proto)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_renumbered_field_breaks(tmp_path: Path) -> None:
    proto = _copy(tmp_path)
    event = proto / EVENT
    text = event.read_text()
    assert "string author = " in text
    start = text.index("string author = ")
    end = text.index(";", start)
    event.write_text(text[:start] + "string author = 998" + text[end:])
    result = _breaking(proto)
    assert result.returncode != 0
    assert "author" in result.stdout + result.stderr
