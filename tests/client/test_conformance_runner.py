"""The conformance scenarios through the driver and the Python client's harness
(clients/python/conformance/harness.py, in this process) against an in-process server on the
in-memory store: every step sent through ContextEngineClient passes, as it does in
`make conformance` against `contextengine serve`."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from contextengine.client import ContextEngineClient
from contextengine.testing import start_local_server

pytestmark = pytest.mark.service

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "clients" / "conformance" / "scenarios"
NAME = "python-client"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


harness = _load(ROOT / "clients" / "python" / "conformance" / "harness.py", "client_harness")
driver = harness.driver
SCENARIO_LIST = driver.load_scenarios(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIO_LIST, ids=[s.name for s in SCENARIO_LIST])
async def test_scenario_passes_through_the_client(scenario: Any) -> None:
    results: list[Any] = []
    async with start_local_server(":memory:") as server:
        local = driver.LocalHarness(harness.ClientHarness())
        counts = await driver.run_all(local, server.target, [scenario], results.append, NAME)
    failures = [r.as_json(NAME) for r in results if r.status == "fail"]
    assert counts == (1, 0), json.dumps(failures, indent=2)


def test_every_unary_rpc_of_the_scenarios_has_a_client_method() -> None:
    used = {
        step[kind]
        for scenario in SCENARIO_LIST
        for step in scenario.data["steps"]
        for kind in ("call", "poll")
        if kind in step
    }
    methods = {
        rpc: harness.METHODS.get(rpc, re.sub(r"(?<!^)([A-Z])", r"_\1", rpc).lower())
        for rpc in (name.split("/")[1] for name in used)
    }
    assert all(hasattr(ContextEngineClient, m) for m in methods.values()), methods
