"""The shared conformance scenarios (clients/conformance/) against a real server, through the
driver and its reference harness (raw gRPC); plus the scenario files' format and the matcher's
shared cases (the one matcher: the driver's).

`make test` also runs the driver as a command line against one `contextengine serve` process,
with the reference harness and every client's harness (scripts/with_server.py).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml

from contextengine.transport import ContextEngineServer

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "clients" / "conformance"
SCENARIOS = CONFORMANCE / "scenarios"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("driver", CONFORMANCE / "driver.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("driver", module)
    spec.loader.exec_module(module)
    return module


runner = _runner()
SCENARIO_LIST = runner.load_scenarios(SCENARIOS)
NAMES = [s.name for s in SCENARIO_LIST]
MATCHER_CASES: list[dict[str, Any]] = yaml.safe_load(
    (CONFORMANCE / "matcher_cases.yaml").read_text("utf-8")
)["cases"]


def test_there_are_enough_scenarios_in_every_area() -> None:
    assert len(NAMES) >= 40
    areas = {name.split("/")[0] for name in NAMES}
    assert {
        "sessions",
        "events",
        "context",
        "rewind",
        "subscriptions",
        "compaction",
        "cache",
        "memory",
        "config",
        "errors",
    } <= areas


@pytest.mark.parametrize("scenario", SCENARIO_LIST, ids=NAMES)
def test_scenario_file_is_well_formed(scenario: Any) -> None:
    schema = json.loads((CONFORMANCE / "scenario.schema.json").read_text("utf-8"))
    jsonschema.validate(scenario.data, schema)
    runner.check_shape(scenario.data)
    assert scenario.data["name"] == scenario.name, "name must be the file's path under scenarios/"


@pytest.mark.parametrize("case", MATCHER_CASES, ids=[c["name"] for c in MATCHER_CASES])
def test_matcher_case(case: dict[str, Any]) -> None:
    actual = case.get("actual", runner.MISSING)
    try:
        runner.match(case["expected"], actual)
    except runner.StepFailure:
        assert not case["ok"], "should have matched"
    else:
        assert case["ok"], "should not have matched"


@pytest.mark.parametrize("scenario", SCENARIO_LIST, ids=NAMES)
async def test_scenario_passes(server: ContextEngineServer, scenario: Any) -> None:
    results: list[Any] = []
    harness = runner.LocalHarness(runner.RawHarness())
    ok = await runner.run_all(harness, server.target, [scenario], results.append)
    failures = [r.as_json() for r in results if r.status == "fail"]
    assert ok == (1, 0), json.dumps(failures, indent=2)
