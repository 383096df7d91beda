"""The cross-language ADK parity check (clients/conformance/adk/) can pass and can fail.

The Python driver (google-adk 2.13 with the drop-ins) runs the scripted conversation against a
real sidecar, as ``make adk-parity`` runs every port's driver; a second run of it stands for
another port (its report relabelled, as a port's report reads). ``compare.py`` must accept those
and refuse every kind of wrong report: a content altered, a call missing, a wrong
``last_sequence``, a missing ``done`` line, a required port without a report, and a port whose
session log is not the Python run's even though each of its requests is what ADK builds from its
own log.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio

from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, event_pb2
from tests.support.sidecar import Sidecar, running_sidecar

ROOT = Path(__file__).resolve().parents[2]
ADK = ROOT / "clients" / "conformance" / "adk"
CONVERSATION = ADK / "conversation.json"
USER, SESSION = "parity-user", "parity-session"

pytestmark = [pytest.mark.timeout(240), pytest.mark.parity]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"adk_{name}", ADK / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


compare = _load("compare")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sidecar(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sidecar]:
    workdir = tmp_path_factory.mktemp("adk-parity")
    async with running_sidecar(workdir, workdir / "ce.db", "parity") as server:
        yield server


def drive(target: str, app: str, out: Path, conversation: Path = CONVERSATION) -> None:
    """Runs the Python driver as ``make adk-parity`` does; fails the test if it fails."""
    done = _driver(target, app, out, conversation)
    assert done.returncode == 0, done.stderr[-4000:]


def _driver(
    target: str, app: str, out: Path, conversation: Path
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        str(ADK / "python_driver.py"),
        "--target",
        target,
        "--conversation",
        str(conversation),
        "--app",
        app,
        "--user",
        USER,
        "--session",
        SESSION,
        "--out",
        str(out),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


@dataclass
class Runs:
    target: str
    python: Path
    #: a second Python run, its report saying port "java"
    java: Path
    workdir: Path

    def lines(self, path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text("utf-8").splitlines()]

    def write(self, name: str, lines: list[dict[str, Any]]) -> Path:
        path = self.workdir / name
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
        return path

    def edited(self, edit: Callable[[list[dict[str, Any]]], object]) -> Path:
        """The Python report, edited."""
        lines = self.lines(self.python)
        edit(lines)
        return self.write("edited.jsonl", lines)


def relabel(lines: list[dict[str, Any]], port: str) -> None:
    lines[-1]["port"] = port


@pytest.fixture(scope="module")
def runs(sidecar: Sidecar, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    workdir = tmp_path_factory.mktemp("adk-parity-reports")
    python, other = workdir / "python.jsonl", workdir / "other.jsonl"
    drive(sidecar.target, "adk-parity-python", python)
    drive(sidecar.target, "adk-parity-java", other)
    made = Runs(sidecar.target, python, other, workdir)
    lines = made.lines(other)
    relabel(lines, "java")
    made.java = made.write("java.jsonl", lines)
    return made


def run_compare(
    capsys: pytest.CaptureFixture[str], target: str, *reports: Path, require: str = ""
) -> tuple[int, str]:
    argv = ["--target", target, *([f"--require={require}"] if require else []), *map(str, reports)]
    status = compare.main(argv)
    return status, capsys.readouterr().out


def model_calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["kind"] == "model_call"]


def call_of(lines: list[dict[str, Any]], turn: str, index: int) -> dict[str, Any]:
    [found] = [c for c in model_calls(lines) if c["turn"] == turn and c["index"] == index]
    return found


# ---- passing ---------------------------------------------------------------------------------


def test_the_python_driver_reports_every_scripted_call(runs: Runs) -> None:
    lines = runs.lines(runs.python)
    conversation = json.loads(CONVERSATION.read_text("utf-8"))
    assert len(model_calls(lines)) == sum(len(t["answers"]) for t in conversation["turns"])
    assert lines[-1] == {
        "kind": "done",
        "app": "adk-parity-python",
        "user": USER,
        "session": SESSION,
        "port": "python",
        "model_calls": len(model_calls(lines)),
    }
    # camelCase genai JSON, as the Java and TypeScript ports write theirs
    assert call_of(lines, "t2", 1)["contents"][3]["parts"][0]["functionCall"]["id"] == "lk-1"
    turns = {line["turn"]: line["invocation_id"] for line in lines if line["kind"] == "turn"}
    # ADK Python: the answer to a long-running call resumes that call's invocation
    assert turns["t5"] == turns["t4"]
    assert len(set(turns.values())) == len(turns) - 1
    # the engine compacted: a summary is what later calls start with
    assert "User requests:" in call_of(lines, "t12", 0)["contents"][0]["parts"][0]["text"]
    # the transfer: helper answers the second call of t6 and the calls of t7
    assert [c["agent"] for c in model_calls(lines) if c["turn"] in ("t6", "t7")] == [
        "root",
        "helper",
        "helper",
        "helper",
    ]


def test_correct_reports_pass(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run_compare(capsys, runs.target, runs.python, runs.java, require="python,java")
    assert status == 0, out
    assert "2 report(s), 40 model calls equal to google-adk 2.13's" in out


# ---- failing ---------------------------------------------------------------------------------


def test_an_altered_content_fails(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    def alter(lines: list[dict[str, Any]]) -> None:
        call_of(lines, "t3", 1)["contents"][2]["parts"][0]["text"] = "weather 2!"

    status, out = run_compare(capsys, runs.target, runs.edited(alter))
    sequence = call_of(runs.lines(runs.python), "t3", 1)["last_sequence"]
    assert status == 1
    assert (
        f"[python] turn t3 call 1 agent 'root' last_sequence {sequence}: the port's request "
        "differs from google-adk 2.13's from content 2 on"
    ) in out
    assert '2: {"parts": [{"text": "weather 2!"}], "role": "user"}' in out
    assert '2: {"parts": [{"text": "weather 2?"}], "role": "user"}' in out
    assert "adk parity: FAILED (1 difference(s))" in out


def test_an_altered_payload_key_fails(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    """Keys inside function-call arguments are the model's: never renamed to match."""

    def alter(lines: list[dict[str, Any]]) -> None:
        args = call_of(lines, "t2", 1)["contents"][3]["parts"][0]["functionCall"]["args"]
        args["theCity"] = args.pop("city")

    status, out = run_compare(capsys, runs.target, runs.edited(alter))
    assert status == 1
    assert "[python] turn t2 call 1 agent 'root'" in out
    assert '"args": {"theCity": "city2"}' in out


def test_a_missing_call_fails(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    def drop(lines: list[dict[str, Any]]) -> None:
        lines.remove(call_of(lines, "t7", 1))
        lines[-1]["model_calls"] -= 1

    status, out = run_compare(capsys, runs.target, runs.edited(drop))
    assert status == 1
    assert "[python] turn t7: model calls [0], the conversation scripts [0, 1]" in out


def test_a_call_count_that_disagrees_fails(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    def miscount(lines: list[dict[str, Any]]) -> None:
        lines[-1]["model_calls"] = 19

    status, out = run_compare(capsys, runs.target, runs.edited(miscount))
    assert status == 1
    assert "[python] the done line says 19 model calls, the report has 20" in out


@pytest.mark.parametrize("delta", [-1, 1])
def test_a_wrong_last_sequence_fails(
    runs: Runs, capsys: pytest.CaptureFixture[str], delta: int
) -> None:
    def shift(lines: list[dict[str, Any]]) -> None:
        call_of(lines, "t9", 1)["last_sequence"] += delta

    status, out = run_compare(capsys, runs.target, runs.edited(shift))
    assert status == 1
    assert "[python] turn t9 call 1 agent 'root' last_sequence" in out
    assert "the port's request differs from google-adk 2.13's" in out


def test_a_last_sequence_outside_the_session_fails(
    runs: Runs, capsys: pytest.CaptureFixture[str]
) -> None:
    def beyond(lines: list[dict[str, Any]]) -> None:
        call_of(lines, "t1", 0)["last_sequence"] = 10_000

    status, out = run_compare(capsys, runs.target, runs.edited(beyond))
    assert status == 1
    assert "[python] turn t1 call 0 agent 'root' last_sequence 10000: last_sequence is not" in out


def test_calls_numbered_across_the_run_read_as_numbered_within_turns(
    runs: Runs, capsys: pytest.CaptureFixture[str]
) -> None:
    def number(lines: list[dict[str, Any]]) -> None:
        for n, call in enumerate(model_calls(lines)):
            call["index"] = n

    status, out = run_compare(capsys, runs.target, runs.edited(number))
    assert status == 0, out

    def skip(lines: list[dict[str, Any]]) -> None:
        number(lines)
        call_of(lines, "t3", 4)["index"] = 9  # t3's second call, numbered across the run

    status, out = run_compare(capsys, runs.target, runs.edited(skip))
    assert status == 1
    assert "[python] turn t3: model calls [3, 9]" in out


def test_a_turn_with_an_invocation_the_session_lacks_fails(
    runs: Runs, capsys: pytest.CaptureFixture[str]
) -> None:
    def rename(lines: list[dict[str, Any]]) -> None:
        [turn] = [line for line in lines if line["kind"] == "turn" and line["turn"] == "t8"]
        turn["invocation_id"] = "e-not-recorded"

    status, out = run_compare(capsys, runs.target, runs.edited(rename))
    assert status == 1
    assert "[python] turn t8: its invocation 'e-not-recorded' has no event in the session" in out


def test_a_report_without_its_done_line_fails(
    runs: Runs, capsys: pytest.CaptureFixture[str]
) -> None:
    path = runs.edited(lambda lines: lines.pop())
    status, out = run_compare(capsys, runs.target, runs.python, path)
    assert status == 1
    assert f"{path}: no done line (the driver did not finish)" in out


def test_a_required_port_without_a_report_fails(
    runs: Runs, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = run_compare(
        capsys, runs.target, runs.python, runs.java, require="python,java,typescript"
    )
    assert status == 1
    assert "no report of the required port 'typescript'" in out


async def _copied_run(
    client: ContextEngineClient, app: str, edit: Callable[[list[event_pb2.Event]], object]
) -> list[event_pb2.Event]:
    """The 'java' run's log (summaries and rewind included) as a new session of ``app``, after
    ``edit``; returns the log as read."""
    events = [e async for e in client.list_events("adk-parity-java", USER, SESSION)]
    await client.create_session(app, USER, SESSION)
    copied = []
    for event in events:
        clone = event_pb2.Event()
        clone.CopyFrom(event)
        clone.sequence = 0
        copied.append(clone)
    edit(copied)
    await client.append_events(app, USER, SESSION, copied)
    return events


async def test_a_changed_log_fails(
    runs: Runs, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A port that wrote one more event than the Python run: each of its requests is still
    what ADK builds from its log, but the log is not the Python run's."""
    lines = runs.lines(runs.java)
    app = "adk-parity-changed"
    lines[-1]["app"] = app

    def one_more(events: list[event_pb2.Event]) -> None:
        extra = event_pb2.Event(
            id="extra",
            invocation_id="extra-invocation",
            author="user",
            timestamp=max(e.timestamp for e in events) + 1,
        )
        extra.content.CopyFrom(
            content_pb2.Content(role="user", parts=[content_pb2.Part(text="one more")])
        )
        events.append(extra)

    async with ContextEngineClient(runs.target) as client:
        await _copied_run(client, app, one_more)
    path = tmp_path / "changed.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    # compare.py runs its own event loop
    status, out = await asyncio.to_thread(run_compare, capsys, runs.target, runs.python, path)
    assert status == 1
    found = re.search(r"\[java\] session log has (\d+) events, the python run's (\d+)", out)
    assert found is not None, out
    assert int(found[1]) == int(found[2]) + 1
    assert "turn " not in out.split("session log")[0]  # every request still ADK's


async def test_a_summary_elsewhere_fails(
    runs: Runs, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A port whose compaction landed elsewhere (one summary fewer): its requests may each be
    ADK's for its own log, but summaries are part of the log comparison, and its requests are
    compared with the Python run's call by call."""
    lines = runs.lines(runs.java)
    app = "adk-parity-summary-elsewhere"
    lines[-1]["app"] = app

    def is_summary(event: event_pb2.Event) -> bool:
        return event.HasField("actions") and event.actions.HasField("compaction")

    async with ContextEngineClient(runs.target) as client:
        events = await _copied_run(
            client, app, lambda log: log.remove(next(filter(is_summary, log)))
        )
    first = next(i for i, e in enumerate(events) if is_summary(e))
    path = tmp_path / "elsewhere.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    status, out = await asyncio.to_thread(run_compare, capsys, runs.target, runs.python, path)
    assert status == 1
    assert f"[java] session log event {first} differs from the python run's" in out
    assert "[java] session log has" in out


def test_requests_are_compared_across_ports() -> None:
    """Each port's call against the Python run's same call: agent, place in the log, contents
    (the port's tolerances applied to both)."""
    python = compare.Report(Path("python.jsonl"), port="python")
    java = compare.Report(Path("java.jsonl"), port="java")
    content = {"role": "user", "parts": [{"text": "hi"}]}
    python.calls = [
        {"turn": "t1", "index": 0, "agent": "root", "last_sequence": 1, "contents": [content]}
    ]
    java.calls = [dict(python.calls[0])]
    assert compare.check_requests(java, python, "") == []
    java.calls = [dict(python.calls[0], agent="helper", last_sequence=2)]
    assert compare.check_requests(java, python, "") == [
        "[java] turn t1 call 0: agent 'helper', the python run's 'root'",
        "[java] turn t1 call 0: last_sequence 2, the python run's 1",
    ]
    java.calls = [dict(python.calls[0], contents=[content, content])]
    [problem] = compare.check_requests(java, python, "")
    assert problem.startswith(
        "[java] turn t1 call 0: the request differs from the python run's from content 1 on "
        "(2 vs 1 contents)"
    )
    java.calls = [dict(python.calls[0], turn="t9")]
    assert compare.check_requests(java, python, "") == [
        "[java] turn t9 call 0: the python run has no such call"
    ]


def test_the_tolerances_apply_inside_requests() -> None:
    """TypeScript's transfer parameter (also where another agent's transfer is quoted) and the
    null values genai for Java leaves out of payloads; nothing else."""
    quoted = (
        "[root] called tool `transfer_to_agent` with parameters:\n"
        "<<<BEGIN_QUOTED_AGENT_CONTENT>>>\n{'agentName': 'helper'}\n<<<END_QUOTED_AGENT_CONTENT>>>"
    )
    typescript = [
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "transfer_to_agent", "args": {"agentName": "h"}}}],
        },
        {"role": "user", "parts": [{"text": quoted}]},
    ]
    [call, text] = compare.comparable_contents(typescript, "typescript")
    assert call["parts"][0]["function_call"]["args"] == {"agent_name": "h"}
    assert "{'agent_name': 'helper'}" in text["parts"][0]["text"]
    assert compare.comparable_contents(typescript, "java")[0]["parts"][0]["function_call"][
        "args"
    ] == {"agentName": "h"}
    response = [
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"a": None}}}]}
    ]
    assert (
        compare.comparable_contents(response, "java")[0]["parts"][0]["function_response"][
            "response"
        ]
        == {}
    )
    assert compare.comparable_contents(response, "typescript")[0]["parts"][0]["function_response"][
        "response"
    ] == {"a": None}


def test_a_port_that_ran_otherwise_fails_on_its_log(
    runs: Runs, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A run whose model answered t11 differently: its requests are what ADK builds from its own
    log (the contents check passes), but its log differs from the Python run's event by event."""
    conversation = json.loads(CONVERSATION.read_text("utf-8"))
    changed = copy.deepcopy(conversation)
    [t11] = [t for t in changed["turns"] if t["id"] == "t11"]
    t11["answers"][1] = {"text": "both 11, differently"}
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(changed), "utf-8")
    out_path = tmp_path / "typescript.jsonl"
    drive(runs.target, "adk-parity-otherwise", out_path, path)
    lines = runs.lines(out_path)
    relabel(lines, "typescript")
    report = runs.write("typescript.jsonl", lines)
    status, out = run_compare(capsys, runs.target, runs.python, report)
    assert status == 1
    assert "[typescript] session log event" in out
    assert "both 11, differently" in out
    assert out.count("differs from google-adk") == 0


# ---- the driver's own failures ---------------------------------------------------------------


def _scripted(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    conversation = json.loads(CONVERSATION.read_text("utf-8"))
    edit(conversation)
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(conversation), "utf-8")
    return path


def test_the_driver_fails_on_a_call_without_an_answer(runs: Runs, tmp_path: Path) -> None:
    def short(conversation: dict[str, Any]) -> None:
        conversation["turns"][1]["answers"].pop()

    done = _driver(
        runs.target, "adk-parity-short", tmp_path / "r.jsonl", _scripted(tmp_path, short)
    )
    assert done.returncode == 1
    assert "turn t2: model call 1 (root) has no answer left" in done.stderr


def test_the_driver_fails_on_an_answer_left_over(runs: Runs, tmp_path: Path) -> None:
    def long(conversation: dict[str, Any]) -> None:
        conversation["turns"][0]["answers"].append({"text": "never asked"})

    done = _driver(runs.target, "adk-parity-long", tmp_path / "r.jsonl", _scripted(tmp_path, long))
    assert done.returncode == 1
    assert "turn t1: 1 answer(s) left over" in done.stderr
    report = (tmp_path / "r.jsonl").read_text("utf-8")
    assert '"kind": "done"' not in report
    assert json.loads(report.splitlines()[-1]) == {
        "kind": "failed",
        "message": "turn t1: 1 answer(s) left over",
    }
    # the comparator says why
    problems = compare.compare(
        runs.target, [tmp_path / "r.jsonl"], [], json.loads(CONVERSATION.read_text("utf-8"))
    )
    assert f"{tmp_path / 'r.jsonl'}: the driver failed: turn t1: 1 answer(s) left over" in problems


# ---- normalizing -----------------------------------------------------------------------------


def test_normalizing_renames_keys_but_not_payloads() -> None:
    port = {
        "role": "model",
        "parts": [
            {"functionCall": {"id": "x", "name": "f", "args": {"someKey": 2.0, "n": {"aB": 1}}}},
            {"functionResponse": {"name": "f", "response": {"outKey": [1.0, 1.5]}}},
            {"thoughtSignature": "AAEC", "text": "t"},
        ],
    }
    assert compare.normalize(port) == {
        "role": "model",
        "parts": [
            {"function_call": {"id": "x", "name": "f", "args": {"someKey": 2, "n": {"aB": 1}}}},
            {"function_response": {"name": "f", "response": {"outKey": [1, 1.5]}}},
            {"thought_signature": b"\x00\x01\x02", "text": "t"},
        ],
    }
