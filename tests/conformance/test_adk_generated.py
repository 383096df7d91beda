"""The generator of random ADK conversations (clients/conformance/adk/generate.py) and its runner.

Every seed gives the same conversation; the seeds together generate the awkward cases the issue
names (checked here, so that a change of the generator cannot quietly stop making them); the
runner judges generated conversations through a port against a real sidecar.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio

from tests.support.sidecar import Sidecar, running_sidecar

ADK = Path(__file__).resolve().parents[2] / "clients" / "conformance" / "adk"
SEEDS = range(1, 41)

pytestmark = [pytest.mark.timeout(300), pytest.mark.parity]


def _load(name: str) -> ModuleType:
    if str(ADK) not in sys.path:
        sys.path.insert(0, str(ADK))  # the scripts import each other, as they do when run
    spec = importlib.util.spec_from_file_location(name, ADK / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


generate = _load("generate")
generated = _load("generated")


@pytest.fixture(scope="module")
def conversations() -> list[dict[str, Any]]:
    generate.quiet()
    return [generate.conversation(seed) for seed in SEEDS]


def _calls(conversation: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for turn in conversation["turns"]:
        for answer in turn["answers"]:
            for call in answer.get("calls", []):
                yield turn, call


def test_a_seed_gives_one_conversation() -> None:
    generate.quiet()
    assert generate.conversation(7) == generate.conversation(7)
    assert generate.conversation(7) != generate.conversation(8)
    assert generate.seeds_of("1,5,9-11") == [1, 5, 9, 10, 11]


def test_every_turn_is_answered(conversations: list[dict[str, Any]]) -> None:
    """google-adk called the model at least once in every turn (a turn it ran no agent for is
    played again with a text), and every call id is unique in its conversation."""
    for conversation in conversations:
        assert 5 <= len(conversation["turns"]) <= 12
        assert all(turn["answers"] for turn in conversation["turns"])
        ids = [call["id"] for _, call in _calls(conversation)]
        assert len(ids) == len(set(ids))


def test_the_awkward_cases_are_generated(conversations: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for conversation in conversations:
        config = conversation["engine_app_config"]["eventsCompactionConfig"]
        seen.add(f"interval {config['compactionInterval']}")
        seen.add(f"overlap {config['overlapSize']}")
        threshold = config.get("tokenThreshold")
        seen.add({None: "no threshold", 1: "threshold always"}.get(threshold, "threshold never"))
        waiting: dict[str, int] = {}
        live: list[str] = []
        for number, turn in enumerate(conversation["turns"]):
            if "rewind" in turn:
                seen.add("rewind")
                if turn["rewind"] not in live:
                    seen.add("rewind to a turn already rewound away")
                live = live[: live.index(turn["rewind"])] if turn["rewind"] in live else live
            live.append(turn["id"])
            user = turn["user"]
            if "function_response" in user:
                answered = user["function_response"]["id"]
                seen.add("long-running call answered in a later turn")
                made = waiting.pop(answered, number)
                if any(n < made for n in waiting.values()):
                    seen.add("answered out of order")
                if isinstance(user["function_response"]["response"]["amount"], float):
                    seen.add("a float in an answer")
            elif not user["text"].strip():
                seen.add("a blank text")
            elif not user["text"].isascii():
                seen.add("a unicode text")
            for answer in turn["answers"]:
                calls = answer.get("calls", [])
                if len(calls) > 1:
                    seen.add("parallel calls")
                for call in calls:
                    if call["name"] == "start_refund":
                        waiting[call["id"]] = number
                    if call["name"] == "transfer_to_agent":
                        seen.add(f"transfer to {call['args']['agent_name']}")
                    amount = call["args"].get("amount")
                    if isinstance(amount, float) and str(amount) == "-0.0":
                        seen.add("-0.0 in arguments")
                    if call["id"].startswith("adk-") or not call["id"].isascii():
                        seen.add("odd call ids")
    expected = {f"interval {n}" for n in range(1, 5)} | {f"overlap {n}" for n in range(3)}
    expected |= {"no threshold", "threshold always", "threshold never", "rewind"}
    expected |= {
        "rewind to a turn already rewound away",
        "long-running call answered in a later turn",
    }
    expected |= {"answered out of order", "a float in an answer", "a blank text", "a unicode text"}
    expected |= {"parallel calls"}
    expected |= {"transfer to helper", "transfer to root", "-0.0 in arguments", "odd call ids"}
    assert expected <= seen, expected - seen


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sidecar(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sidecar]:
    workdir = tmp_path_factory.mktemp("adk-generated")
    async with running_sidecar(workdir, workdir / "ce.db", "generated") as server:
        yield server


def test_the_runner_judges_generated_conversations(
    sidecar: Sidecar, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two seeds through google-adk and the drop-ins, judged against google-adk's builder (the
    other ports run in ``make adk-parity``); a driver that fails fails the run and says why."""
    work = tmp_path / "work"
    status = generated.main(
        ["--target", sidecar.target, "--seeds", "3-4", "--work", str(work), "--ports", "python"]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "seed-0003: identical in python" in out
    assert "2 of 2 conversation(s) identical in python" in out
    status = generated.main(
        [
            "--target",
            sidecar.target,
            "--seeds",
            "5",
            "--work",
            str(work),
            "--ports",
            "python",
            "--driver",
            f"python={sys.executable} -c 'import sys; sys.exit(3)'",
        ]
    )
    out = capsys.readouterr().out
    assert status == 1
    assert "python driver: exit status 3" in out
    assert "seed-0005: 2 difference(s)" in out
    assert (work / "differences" / "seed-0005.txt").exists()
