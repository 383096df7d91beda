"""Checks the ADK ports' parity reports against google-adk 2.13 and against each other.

    python clients/conformance/adk/compare.py --target HOST:PORT \\
        [--require python,java,typescript] [--conversation conversation.json] REPORT.jsonl...

For every report (one driver run, README.md here):

1. **The report is whole**: it ends with its ``done`` line (port, app, user, session), every turn
   of the conversation has its ``turn`` line, and each turn has exactly as many ``model_call``
   lines as the conversation scripts answers for it, numbered 0, 1, ... (``model_calls`` of the
   ``done`` line agrees).
2. **Every model request is ADK's**: the session's stored events are read from the sidecar
   (``ListEvents``, every page) and converted to google-adk ``Event`` objects with the engine's
   ADK JSON conversion (``contextengine.core.adk_json``). For each model call, the events with
   ``sequence <= last_sequence`` go through google-adk 2.13's own contents builder
   (``_get_contents``, the function ADK's contents request processor calls for an agent with
   ``include_contents='default'``: rewinds, compaction summaries and other agents' turns recast),
   with the preamble the engine frames other agents' turns with (the app's
   ``other_agent_preamble``, else the engine's own wording: ADK's text is ADK's, not copied
   here; the parity suite configures ADK's and gets ADK's bytes), for the calling agent on its
   branch (the branch of the model event the call produced, the first event by that agent after
   ``last_sequence``). Both sides are
   normalized alike (camelCase keys to snake_case outside function-call ``args`` and
   function-response ``response`` payloads; integral numbers as integers; base64 bytes decoded)
   and must be equal call by call.
3. **Every port's log is the Python run's**: event by event (author, branch, content with its
   function-call ids, actions, the rest of the event), with event ids and invocation ids mapped
   to ordinals in order of appearance, event timestamps dropped (the log order is the order) and
   a compaction's start/end timestamps mapped to the positions of the events they bound. The
   port differences tolerated are listed in :data:`TOLERATED`, each with the ports it applies
   to and its reason (``--tolerances`` prints them); nothing else may differ.

Exit status 1 on any difference, on a port of ``--require`` without a report, or on a report
without its ``done`` line; every difference is printed, naming port, turn, call and agent.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.adk.events.event import Event
from google.adk.flows.llm_flows.context import _fencing
from google.adk.flows.llm_flows.context._contents import _get_contents

from contextengine.client import ContextEngineClient
from contextengine.core.adk_json import event_to_adk_json
from contextengine.core.context import DEFAULT_OTHER_AGENT_PREAMBLE
from contextengine.core.structs import sorted_keys
from contextengine.v1 import event_pb2

HERE = Path(__file__).resolve().parent
REFERENCE_PORT = "python"

ALL_PORTS = frozenset({"python", "java", "typescript"})


@dataclass(frozen=True)
class Tolerance:
    """A difference between the ports' logs the comparison allows, for the ports named, and
    why. Nothing else is allowed to differ."""

    name: str
    ports: frozenset[str]
    reason: str


#: Every port difference the comparison tolerates (each applied in :func:`comparable_log` and
#: :func:`comparable_contents` only when comparing one of its ports with the Python run).
TOLERATED: tuple[Tolerance, ...] = (
    Tolerance(
        "usage_metadata.prompt_token_count",
        ALL_PORTS,
        "the scripted model counts the request's JSON as the port serializes it (README.md); "
        "each port spells the same contents with other spacing and key order (and "
        "total_token_count with it)",
    ),
    Tolerance(
        "node_info.path",
        frozenset({"java", "typescript"}),
        "google-adk 2.13 records an agent's workflow node path on its events ('root@1'); the "
        "Java and TypeScript ports have no workflow nodes and record none (the contents builder "
        "reads it only for single-turn workflow nodes, which the conversation has none of)",
    ),
    Tolerance(
        "request.payload_nulls",
        frozenset({"java"}),
        "google-genai for Java writes a function call's arguments and a function response's "
        "payload without their null values ({'result': None} is written {}): the contents the "
        "port's model received are compared with null values left out of those payloads (the "
        "port's session log keeps them, and is compared as it is)",
    ),
    Tolerance(
        "transfer_to_agent.args",
        frozenset({"typescript"}),
        "ADK TypeScript's transfer_to_agent tool takes {agentName} where google-adk's takes "
        "{agent_name}: its driver sends the scripted call with the port's parameter name (in "
        "the requests too, where another agent's transfer is quoted). One character shorter, "
        "so a sliding-window compaction whose size gate (ADK's 'worth compacting') falls within "
        "one character of its threshold can go the other way: seen in none of 500 generated "
        "conversations",
    ),
)

#: Keys of an event's ADK JSON that are mapped, not compared as they are (the reason each).
MAPPED = {
    "id": "each run's own event ids: compared as ordinals in order of appearance",
    "invocation_id": "each run's own invocation ids: compared as ordinals in order of appearance",
    "timestamp": "each run's own clock: dropped, the log order is what counts",
}


def tolerated(name: str, port: str) -> bool:
    """Whether the comparison of ``port``'s log with the Python run's allows ``name``."""
    return any(t.name == name and port in t.ports for t in TOLERATED)


#: Payload keys whose values are JSON the model or tool produced: never renamed.
_PAYLOADS = frozenset({"args", "response"})
#: Fields holding bytes (base64 in JSON), by name.
_BYTES = frozenset({"thought_signature", "data"})
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


# ---- normalizing -----------------------------------------------------------------------------


def snake(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


def _bytes_of(text: str) -> bytes | str:
    try:
        padded = text + "=" * (-len(text) % 4)
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except ValueError:
        return text


def normalize(value: Any, *, rename: bool = True) -> Any:
    """One JSON spelling of genai values: snake_case keys (not inside payloads), integral
    numbers as ``int``, bytes decoded from either base64 alphabet."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = snake(key) if rename else key
            if name in _BYTES and isinstance(item, str) and rename:
                out[name] = _bytes_of(item)
            else:
                out[name] = normalize(item, rename=rename and name not in _PAYLOADS)
        return out
    if isinstance(value, list):
        return [normalize(item, rename=rename) for item in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


# ---- reports ---------------------------------------------------------------------------------


@dataclass
class Report:
    path: Path
    port: str = ""
    app: str = ""
    user: str = ""
    session: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    #: turn id -> invocation id, in turn order
    turns: dict[str, str] = field(default_factory=dict)
    done: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.port or str(self.path)


def read_report(path: Path) -> tuple[Report, list[str]]:
    report = Report(path)
    problems: list[str] = []
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for number, line in enumerate(lines, start=1):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(f"{path}:{number}: not JSON ({err})")
            continue
        kind = item.get("kind")
        if report.done is not None:
            problems.append(f"{path}:{number}: a {kind!r} line after the done line")
        if kind == "model_call":
            report.calls.append(item)
        elif kind == "turn":
            report.turns[str(item.get("turn"))] = str(item.get("invocation_id", ""))
        elif kind == "failed":
            problems.append(f"{path}: the driver failed: {item.get('message')}")
        elif kind == "done":
            report.done = item
            report.port = str(item.get("port", ""))
            report.app, report.user = str(item.get("app", "")), str(item.get("user", ""))
            report.session = str(item.get("session", ""))
        else:
            problems.append(f"{path}:{number}: unknown line kind {kind!r}")
    if report.done is None:
        problems.append(f"{path}: no done line (the driver did not finish)")
    _number_within_turns(report)
    return report, problems


def _number_within_turns(report: Report) -> None:
    """A report that numbers its calls across the run (0, 1, 2, ... over every turn) gets them
    numbered within their turns, the contract's numbering (README.md); either reads the same."""
    indices = [call.get("index") for call in report.calls]
    if indices != list(range(len(indices))):
        return
    seen: dict[str, int] = {}
    for call in report.calls:
        turn = str(call.get("turn"))
        call["index"] = seen.get(turn, 0)
        seen[turn] = call["index"] + 1


def check_whole(report: Report, conversation: dict[str, Any]) -> list[str]:
    """Every turn reported, with exactly the scripted number of model calls."""
    problems = []
    by_turn: dict[str, list[int]] = {}
    for call in report.calls:
        by_turn.setdefault(str(call.get("turn")), []).append(int(call.get("index", -1)))
    for turn in conversation["turns"]:
        tid = turn["id"]
        expected = list(range(len(turn["answers"])))
        got = by_turn.pop(tid, [])
        if got != expected:
            problems.append(
                f"[{report.name}] turn {tid}: model calls {got}, the conversation scripts "
                f"{expected}"
            )
        if tid not in report.turns:
            problems.append(f"[{report.name}] turn {tid}: no turn line")
    problems.extend(
        f"[{report.name}] model calls of a turn {tid!r} not in the conversation" for tid in by_turn
    )
    if report.done is not None and report.done.get("model_calls") != len(report.calls):
        problems.append(
            f"[{report.name}] the done line says {report.done.get('model_calls')} model calls, "
            f"the report has {len(report.calls)}"
        )
    return problems


# ---- the sidecar -----------------------------------------------------------------------------


@dataclass
class Stored:
    """A report's session as the sidecar holds it, and the preamble its app frames other
    agents' turns with."""

    events: list[event_pb2.Event]
    preamble: str


async def stored(target: str, reports: Sequence[Report]) -> dict[str, Stored]:
    """Each report's session log (every page of ``ListEvents``) and its app's preamble, by
    report name."""
    out: dict[str, Stored] = {}
    async with ContextEngineClient(target) as client:
        for report in reports:
            config = await client.get_app_config(report.app)
            preamble = (
                config.other_agent_preamble
                if config.HasField("other_agent_preamble")
                else DEFAULT_OTHER_AGENT_PREAMBLE
            )
            events = [e async for e in client.list_events(report.app, report.user, report.session)]
            out[report.name] = Stored(events, preamble)
    return out


@contextlib.contextmanager
def framing(preamble: str) -> Iterator[None]:
    """ADK's contents builder frames other agents' turns with ``preamble`` meanwhile (it reads
    its module constant when it frames one)."""
    saved = _fencing.OTHER_AGENT_CONTEXT_PREAMBLE
    _fencing.OTHER_AGENT_CONTEXT_PREAMBLE = preamble
    try:
        yield
    finally:
        _fencing.OTHER_AGENT_CONTEXT_PREAMBLE = saved


def to_adk(events: Iterable[event_pb2.Event]) -> list[tuple[int, Event]]:
    """The stored events as google-adk ``Event`` objects. A protobuf ``Struct`` keeps no key
    order (the order it reads back in varies), so every dict is given to google-adk with its keys
    sorted: the order the engine prints function-call arguments and responses in when it quotes
    another agent's turn (google-adk prints a response in the order its tool wrote the keys, which
    no stored form keeps; docs/design/context.md)."""
    return [
        (e.sequence, Event.model_validate(sorted_keys(json.loads(event_to_adk_json(e)))))
        for e in events
    ]


# ---- 2: model requests -----------------------------------------------------------------------


def _describe(contents: Sequence[Any], start: int, preamble: str) -> str:
    text = "\n".join(
        f"      {i}: {json.dumps(c, ensure_ascii=False, default=repr)}"
        for i, c in enumerate(contents[start:], start=start)
    )
    if preamble:
        text = text.replace(json.dumps(preamble, ensure_ascii=False)[1:-1], "<PREAMBLE>")
    return text or "      -"


def _difference(
    got: tuple[str, Sequence[Any]], expected: tuple[str, Sequence[Any]], preamble: str
) -> str:
    """Where two requests' contents part (named), and both from there on."""
    (got_name, a), (expected_name, b) = got, expected
    first = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return (
        f"from content {first} on ({len(a)} vs {len(b)} contents)\n"
        f"    {got_name}:\n{_describe(a, first, preamble)}\n"
        f"    {expected_name}:\n{_describe(b, first, preamble)}"
    )


def check_calls(report: Report, log: Sequence[tuple[int, Event]], preamble: str) -> list[str]:
    problems = []
    last = log[-1][0] if log else 0
    for call in report.calls:
        where = (
            f"[{report.name}] turn {call.get('turn')} call {call.get('index')} "
            f"agent {call.get('agent')!r} last_sequence {call.get('last_sequence')}"
        )
        agent = str(call.get("agent", ""))
        sequence = call.get("last_sequence")
        if not isinstance(sequence, int) or not 0 < sequence <= last:
            problems.append(f"{where}: last_sequence is not in the session (1..{last})")
            continue
        prefix = [event for seq, event in log if seq <= sequence]
        answer = next((e for seq, e in log if seq > sequence and e.author == agent), None)
        if answer is None:
            problems.append(f"{where}: no event of the agent after the call in the session")
            continue
        with framing(preamble):
            built = _get_contents(answer.branch, prefix, agent)
        expected = comparable_contents(
            [c.model_dump(mode="json", exclude_none=True) for c in built], report.port
        )
        got = comparable_contents(call.get("contents", []), report.port)
        if got != expected:
            problems.append(
                f"{where}: the port's request differs from google-adk 2.13's "
                + _difference(("port", got), ("google-adk", expected), preamble)
            )
    return problems


def check_turns(report: Report, log: Sequence[tuple[int, Event]]) -> list[str]:
    """Every turn's invocation id is one the session's events carry."""
    recorded = {event.invocation_id for _, event in log}
    return [
        f"[{report.name}] turn {turn}: its invocation {invocation!r} has no event in the session"
        for turn, invocation in report.turns.items()
        if invocation not in recorded
    ]


# ---- 3: session logs -------------------------------------------------------------------------


def _drop(data: dict[str, Any], path: str) -> None:
    *parents, leaf = path.split(".")
    node: Any = data
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(leaf, None)
        if not node and parents:
            _drop(data, ".".join(parents))


class _Ordinals:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._seen: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        if value not in self._seen:
            self._seen[value] = f"{self._prefix}{len(self._seen) + 1}"
        return self._seen[value]


def _transfer_parts(parts: list[dict[str, Any]], port: str) -> None:
    """``port``'s transfer calls and answers (structured parts) spelled as google-adk's."""
    for part in parts:
        call = part.get("function_call")
        if call and call.get("name") == "transfer_to_agent":
            args = call.get("args", {})
            if tolerated("transfer_to_agent.args", port) and "agentName" in args:
                args["agent_name"] = args.pop("agentName")


#: Another agent's transfer call as the contents quote it (in a text part).
_QUOTED_TRANSFER_CALL = re.compile(
    r"(called tool `transfer_to_agent` with parameters:\n<<<BEGIN_QUOTED_AGENT_CONTENT>>>\n)"
    r"\{'agentName': "
)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def comparable_contents(contents: Any, port: str) -> list[dict[str, Any]]:
    """A request's contents as the comparison of ``port``'s with the Python run's sees them:
    normalized, with ``port``'s transfer tolerances applied to both (also where another agent's
    transfer is quoted as text)."""
    out: list[dict[str, Any]] = normalize(contents)
    for content in out:
        parts = content.get("parts", [])
        _transfer_parts(parts, port)
        if tolerated("request.payload_nulls", port):
            for part in parts:
                for kind, key in (("function_call", "args"), ("function_response", "response")):
                    payload = (part.get(kind) or {}).get(key)
                    if isinstance(payload, dict):
                        part[kind][key] = _without_nulls(payload)
        for part in parts:
            text = part.get("text")
            if not isinstance(text, str) or "`transfer_to_agent`" not in text:
                continue
            if tolerated("transfer_to_agent.args", port):
                part["text"] = _QUOTED_TRANSFER_CALL.sub(r"\1{'agent_name': ", text)
    return out


def comparable_log(log: Sequence[tuple[int, Event]], port: str) -> list[dict[str, Any]]:
    """The log as the comparison of ``port``'s log with the Python run's sees it (see the
    module documentation; ``port``'s tolerances apply to both logs)."""
    events = [event for _, event in log]
    ids, invocations = _Ordinals("event-"), _Ordinals("invocation-")
    plain = [e.timestamp for e in events if e.actions.compaction is None]
    out = []
    for event in events:
        data = normalize(event.model_dump(mode="json", exclude_none=True))
        data["id"] = ids(event.id)
        data["invocation_id"] = invocations(event.invocation_id)
        data.pop("timestamp", None)
        if data.get("long_running_tool_ids") == []:
            del data["long_running_tool_ids"]
        actions = data.get("actions", {})
        if actions.get("rewind_before_invocation_id"):
            actions["rewind_before_invocation_id"] = invocations(
                actions["rewind_before_invocation_id"]
            )
        compaction = actions.get("compaction")
        if compaction is not None:
            start, end = compaction.pop("start_timestamp", None), compaction.pop("end_timestamp")
            if start is not None:
                compaction["starts_at_event"] = sum(1 for t in plain if t < start)
            compaction["ends_after_event"] = sum(1 for t in plain if t <= end)
            # the engine's own invocation id of a summary: a fresh one each time, never shared
            data["invocation_id"] = "summary"
        if tolerated("usage_metadata.prompt_token_count", port):
            _drop(data, "usage_metadata.prompt_token_count")
            _drop(data, "usage_metadata.total_token_count")
        if tolerated("node_info.path", port):
            _drop(data, "node_info.path")
        _transfer_parts((data.get("content") or {}).get("parts", []), port)
        out.append(data)
    return out


def check_log(
    port: Report, reference: Report, logs: dict[str, Sequence[tuple[int, Event]]]
) -> list[str]:
    got = comparable_log(logs[port.name], port.port)
    expected = comparable_log(logs[reference.name], port.port)
    problems = []
    for index, (a, b) in enumerate(zip(got, expected, strict=False)):
        if a != b:
            problems.append(
                f"[{port.name}] session log event {index} differs from the {reference.name} "
                f"run's:\n    {port.name}: {json.dumps(a, sort_keys=True, default=repr)}\n"
                f"    {reference.name}: {json.dumps(b, sort_keys=True, default=repr)}"
            )
            break  # everything after the first difference differs in the same way
    if len(got) != len(expected):
        problems.append(
            f"[{port.name}] session log has {len(got)} events, the {reference.name} run's "
            f"{len(expected)}"
        )
    turns = _turn_ordinals(port), _turn_ordinals(reference)
    if turns[0] != turns[1]:
        problems.append(
            f"[{port.name}] the turns' invocations (as ordinals) are {turns[0]}, the "
            f"{reference.name} run's {turns[1]}"
        )
    return problems


def _turn_ordinals(report: Report) -> list[tuple[str, str]]:
    ordinals = _Ordinals("invocation-")
    return [(turn, ordinals(invocation)) for turn, invocation in report.turns.items()]


# ---- 4: the ports' requests, call by call ----------------------------------------------------


def check_requests(port: Report, reference: Report, preamble: str) -> list[str]:
    """Every model call of ``port`` made by the same agent, at the same point of the session
    log (``last_sequence``), with the same contents as the reference run's same call (the
    port's tolerances applied to both)."""
    problems: list[str] = []
    theirs = {(c.get("turn"), c.get("index")): c for c in reference.calls}
    for call in port.calls:
        other = theirs.get((call.get("turn"), call.get("index")))
        where = f"[{port.name}] turn {call.get('turn')} call {call.get('index')}"
        if other is None:
            problems.append(f"{where}: the {reference.name} run has no such call")
            continue
        problems.extend(
            f"{where}: {name} {call.get(name)!r}, the {reference.name} run's {other.get(name)!r}"
            for name in ("agent", "last_sequence")
            if call.get(name) != other.get(name)
        )
        got = comparable_contents(call.get("contents", []), port.port)
        expected = comparable_contents(other.get("contents", []), port.port)
        if got != expected:
            problems.append(
                f"{where}: the request differs from the {reference.name} run's "
                + _difference((port.name, got), (reference.name, expected), preamble)
            )
    return problems


# ---- main ------------------------------------------------------------------------------------


def compare(
    target: str, paths: Sequence[Path], require: Sequence[str], conversation: dict[str, Any]
) -> list[str]:
    """Every difference found (empty: the ports agree with google-adk and with each other)."""
    problems: list[str] = []
    reports: list[Report] = []
    for path in paths:
        report, found = read_report(path)
        problems += found
        if report.done is not None:
            reports.append(report)
            problems += check_whole(report, conversation)
    ports = [r.port for r in reports]
    for port in sorted({p for p in ports if ports.count(p) > 1}):
        problems.append(f"two reports of port {port!r}")
    for port in require:
        if port not in ports:
            problems.append(f"no report of the required port {port!r}")
    if not reports:
        return problems
    sessions = asyncio.run(stored(target, reports))
    logs: dict[str, Sequence[tuple[int, Event]]] = {}
    for report in reports:
        session = sessions[report.name]
        log = to_adk(session.events)
        problems += check_calls(report, log, session.preamble)
        problems += check_turns(report, log)
        logs[report.name] = log
    reference = next((r for r in reports if r.port == REFERENCE_PORT), None)
    if reference is None:
        if len(reports) > 1 or reports[0].port != REFERENCE_PORT:
            problems.append("no python report: the ports' logs have no run to be compared with")
        return problems
    for report in reports:
        if report is not reference:
            problems += check_log(report, reference, logs)
            problems += check_requests(report, reference, sessions[reference.name].preamble)
    return problems


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the sidecar the drivers ran against")
    parser.add_argument(
        "--require", default="", help="ports that must have a report: python,java,typescript"
    )
    parser.add_argument("--conversation", default=str(HERE / "conversation.json"))
    parser.add_argument(
        "--tolerances", action="store_true", help="print the tolerated port differences and exit"
    )
    parser.add_argument("reports", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if args.tolerances:
        for tolerance in TOLERATED:
            print(f"{tolerance.name} ({', '.join(sorted(tolerance.ports))}): {tolerance.reason}")
        return 0
    if not args.reports:
        parser.error("no report given")
    conversation = json.loads(Path(args.conversation).read_text(encoding="utf-8"))
    require = [p for p in args.require.split(",") if p]
    problems = compare(args.target, args.reports, require, conversation)
    for problem in problems:
        print(problem)
    if problems:
        print(f"adk parity: FAILED ({len(problems)} difference(s))")
        return 1
    calls = sum(
        1
        for path in args.reports
        for line in path.read_text("utf-8").splitlines()
        if '"model_call"' in line
    )
    print(
        f"adk parity: {len(args.reports)} report(s), {calls} model calls equal to google-adk "
        "2.13's and to the python run's, session logs equal to the python run's"
    )
    for port in sorted({read_report(path)[0].port for path in args.reports} - {REFERENCE_PORT}):
        names = [t.name for t in TOLERATED if port in t.ports]
        print(f"  {port}: tolerated (compare.py --tolerances): {', '.join(names) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
