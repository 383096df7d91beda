"""Writes the golden event vectors that other languages' clients test against.

For each representative event of the ADK parity corpus (``tests/core/adk_corpus.py``, events
made by google-adk 2.13 with fixed ids and timestamps) it writes, under ``tests/golden/events/``:

* ``<name>.json`` - canonical proto3 JSON: ``json_format.MessageToJson`` with proto field names
  preserved and sorted keys;
* ``<name>.binpb`` - the binary encoding, ``SerializeToString(deterministic=True)``.

One extra vector, ``engine_compaction_with_sequences``, carries the engine-only fields
(``sequence``, ``start_sequence``, ``end_sequence``; int64, so strings in JSON).

Usage (from the repository root)::

    .venv/bin/python scripts/gen_golden_events.py          # (re)write the files
    .venv/bin/python scripts/gen_golden_events.py --check  # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from google.protobuf import json_format

from contextengine.core.adk_json import event_from_adk_json
from contextengine.v1 import event_pb2

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = ROOT / "tests" / "golden" / "events"


def golden_events() -> dict[str, event_pb2.Event]:
    """Name -> proto event, in a stable order."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.core import adk_corpus

    events: dict[str, event_pb2.Event] = {}
    for name, case_name in adk_corpus.GOLDEN_CASES.items():
        adk_event = adk_corpus.find_case(case_name).event
        events[name] = event_from_adk_json(adk_event.model_dump_json(exclude_none=True))

    engine = event_from_adk_json(
        adk_corpus.find_case("compaction").event.model_dump_json(exclude_none=True)
    )
    engine.sequence = 12
    engine.actions.compaction.start_sequence = 1
    engine.actions.compaction.end_sequence = 11
    events["engine_compaction_with_sequences"] = engine
    return events


def render() -> dict[str, bytes]:
    """File name -> file content, for every golden file."""
    files: dict[str, bytes] = {}
    for name, event in golden_events().items():
        text = json_format.MessageToJson(event, preserving_proto_field_name=True, sort_keys=True)
        files[f"{name}.json"] = (text + "\n").encode("utf-8")
        files[f"{name}.binpb"] = event.SerializeToString(deterministic=True)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the files are stale")
    args = parser.parse_args(argv)

    files = render()
    on_disk = {path.name: path.read_bytes() for path in sorted(GOLDEN_DIR.glob("*"))}
    if args.check:
        if on_disk != files:
            stale = sorted(
                set(files) ^ set(on_disk) | {n for n in files if on_disk.get(n) != files[n]}
            )
            print(f"golden events are stale: {', '.join(stale)}", file=sys.stderr)
            return 1
        print(f"{len(files)} golden files are up to date")
        return 0

    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for name in set(on_disk) - set(files):
        (GOLDEN_DIR / name).unlink()
    for name, content in files.items():
        (GOLDEN_DIR / name).write_bytes(content)
    print(f"wrote {len(files)} files to {GOLDEN_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
