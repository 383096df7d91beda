"""The golden event vectors (tests/golden/events) are consistent and up to date.

Each ``<name>.binpb`` must decode to the message its ``<name>.json`` parses to, and
``scripts/gen_golden_events.py`` must still produce exactly the committed files.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from google.adk.events.event import Event
from google.protobuf import json_format

from contextengine.core.adk_json import event_to_adk_json
from contextengine.v1 import event_pb2

from . import adk_corpus

pytestmark = [
    pytest.mark.parity,
    *(pytest.mark.filterwarnings(mark) for mark in adk_corpus.ADK_WARNING_MARKS),
]

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = ROOT / "tests" / "golden" / "events"
NAMES = sorted(path.stem for path in GOLDEN_DIR.glob("*.json"))


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_golden_events", ROOT / "scripts" / "gen_golden_events.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(name: str) -> tuple[event_pb2.Event, bytes]:
    from_json = json_format.Parse(
        (GOLDEN_DIR / f"{name}.json").read_text("utf-8"), event_pb2.Event()
    )
    return from_json, (GOLDEN_DIR / f"{name}.binpb").read_bytes()


def test_there_are_golden_vectors() -> None:
    assert len(NAMES) >= 12
    assert {path.suffix for path in GOLDEN_DIR.iterdir()} == {".json", ".binpb"}
    assert sorted(path.stem for path in GOLDEN_DIR.glob("*.binpb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_binpb_equals_json(name: str) -> None:
    from_json, wire = _load(name)
    assert event_pb2.Event.FromString(wire) == from_json
    assert from_json.SerializeToString(deterministic=True) == wire


@pytest.mark.parametrize("name", NAMES)
def test_golden_event_loads_in_adk(name: str) -> None:
    event, _ = _load(name)
    loaded = Event.model_validate_json(event_to_adk_json(event))
    assert loaded.id == event.id
    assert loaded.timestamp == event.timestamp


def test_golden_files_match_the_generator() -> None:
    expected = _generator().render()
    on_disk = {path.name: path.read_bytes() for path in GOLDEN_DIR.iterdir()}
    assert sorted(on_disk) == sorted(expected), "run scripts/gen_golden_events.py"
    stale = [name for name in sorted(expected) if on_disk[name] != expected[name]]
    assert stale == [], "stale golden files; run scripts/gen_golden_events.py"
