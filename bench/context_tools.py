"""Context tools: a model that steers its own context, against ADK's rules alone.

Workload: a scripted research session (seeded) of ``TURNS`` user turns (``--quick``: 12). Each
turn: the user's question (150-600 characters), then ``ROUNDS`` tool rounds (the model calls
``fetch``, whose result is 2,000-6,000 characters of table), then the model's answer: 6 model
calls a turn, 240 in all. Facts (``FACT-k: ... .``) arrive in about one turn in six, stated by
the user or at the start of a tool result; the task needs every one of them in every context
after it arrived (fact retention).

Three replays of the same session, model calls one for one:

* **ADK rules alone**: google-adk 2.13 in this process, its in-flow token-threshold compaction
  (``_run_compaction_for_token_threshold_config``) before each model call, then ``_get_contents``.
* **engine, tools unused**: this engine in this process (``open_engine``, memory store), the
  same token threshold, the context tools enabled but not given to the model. Its contexts must
  equal ADK's at every call (a data check).
* **engine, tools used**: the same engine and threshold; the scripted model follows a simple
  policy with the context tools, called in parallel with its ``fetch`` calls (no extra model
  call): at the first call of each turn it pins a fact the user states in the question, replaces
  each round of the previous turn that brought a fact by its own summary (the fact in it), hides
  the other rounds (one stub a run of rounds), and every ``SUMMARIZE_EVERY`` turns rolls what came
  since its last roll-up, up to three turns back, into one summary a stretch between pinned facts.
  Calls and answers go through CallContextTool and are appended as an agent loop appends them, so
  the engine records the edits.

Summaries of the rules (both sides alike): a fixed sentence plus every fact line of the history
being summarized (a perfect summarizer of facts, so retention measures what the rules keep, not
a summarizer's luck). Tokens: ``chars // 4`` of each content, plus a fixed part (instruction and
tool declarations; the tools-used replay also declares the seven context tools). Cached tokens: a
provider's prefix cache, always warm: the fixed part and the contents this request shares, from
the start, with the previous one. Reported per replay: model calls, input tokens (mean per call,
total), cached-token fraction, uncached tokens per call, fact retention, peak prompt, summaries,
edits. Targets: at least 30% fewer input tokens than ADK at 100% fact retention, a cached fraction
no lower than ADK's, no more uncached tokens per call than ADK.
"""

from __future__ import annotations

import json
import random
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.compaction import _run_compaction_for_token_threshold_config
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context._contents import _get_contents
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.genai import types
from google.protobuf import json_format

from bench import Ceiling, DataCheckError, Options, Report, Target, table
from bench.peers.adk_compaction import FakeSummaryLlm
from contextengine.compaction.summarizers.summarizer import Summary, SummaryInput
from contextengine.core.context_tools import genai_declarations
from contextengine.core.structs import dict_to_struct
from contextengine.core.tokens import content_chars
from contextengine.engine import Engine, open_engine
from contextengine.store.memory import MemoryStore
from contextengine.v1 import (
    config_pb2,
    content_pb2,
    context_service_pb2 as cpb,
    context_tools_service_pb2 as tpb,
    event_pb2,
    session_service_pb2 as spb,
)

SEED = 20_261_206
DEBUG = False
AGENT = "researcher"
APP = "context_tools_bench"
TURNS = 40
ROUNDS = 5
SUMMARIZE_EVERY = 6
#: ADK's rules: the token threshold and the events it keeps raw
TOKEN_THRESHOLD = 20_000
EVENT_RETENTION = 8
START = 1_800_000_000.0
INSTRUCTION = "You research questions with the fetch tool and answer from its tables. " * 8
TOOLS: list[dict[str, Any]] = [
    {
        "function_declarations": [
            {
                "name": "fetch",
                "description": "Fetches a table of measurements on a topic.",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"topic": {"type": "STRING"}},
                    "required": ["topic"],
                },
            }
        ]
    }
]
FIXED_TOKENS = (len(INSTRUCTION) + sum(len(json.dumps(tool)) for tool in TOOLS)) // 4
#: what declaring the seven context tools adds to every request of the engine replays
TOOL_TOKENS = len(json.dumps(genai_declarations())) // 4
_FACT = re.compile(r"FACT-\d+: [^.]*\.")
_WORDS = [
    "tide",
    "level",
    "station",
    "sensor",
    "reading",
    "north",
    "south",
    "delta",
    "basin",
    "flow",
    "rate",
    "sample",
    "depth",
    "salinity",
    "window",
    "hourly",
    "average",
    "peak",
    "trough",
    "drift",
    "calibration",
    "buoy",
    "harbour",
]


# -- the session --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    topic: str
    result: str
    fact: str | None


@dataclass(frozen=True)
class Turn:
    question: str
    rounds: tuple[Round, ...]
    answer: str
    #: a fact the user states in the question
    fact: str | None = None


def _text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(_WORDS))
    return " ".join(words)


def workload(turns: int, seed: int = SEED) -> list[Turn]:
    """The session. Facts arrive in about one turn in six: stated by the user in its question
    or at the start of one of its tool results, in turn."""
    rng = random.Random(seed)
    fact_turns = list(range(2, turns, max(2, turns // 6)))
    out = []
    for number in range(turns):
        fact = None
        if number in fact_turns:
            fact = f"FACT-{number}: the answer key of turn {number} is {rng.randint(1000, 9999)}."
        in_question = fact is not None and fact_turns.index(number) % 2 == 0
        fact_round = rng.randrange(ROUNDS) if fact is not None and not in_question else -1
        rounds = []
        for index in range(ROUNDS):
            table_text = _text(rng, 2000, 6000)
            held = fact if index == fact_round else None
            result = f"{held} {table_text}" if held else table_text
            rounds.append(Round(f"topic {number}.{index}", result, held))
        question = _text(rng, 150, 600)
        if in_question:
            question = f"{question} Keep this: {fact}"
        out.append(
            Turn(
                question,
                tuple(rounds),
                _text(rng, 200, 600),
                fact if in_question else None,
            )
        )
    return out


def rule_summary(history: str, number: int) -> str:
    """What a summary of the rules says: a fixed sentence and every fact of ``history``."""
    facts = list(dict.fromkeys(_FACT.findall(history)))
    return f"Summary {number}: the user asked research questions; fetch returned tables. " + (
        " ".join(facts)
    )


# -- measuring a request ------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    prompt: int
    cached: int
    #: the facts arrived so far, and those the contents hold
    facts_due: int
    facts_held: int


@dataclass
class Run:
    name: str
    requests: list[Request] = field(default_factory=list)
    contents: list[list[bytes]] = field(default_factory=list)
    summaries: int = 0
    edits: dict[str, int] = field(default_factory=dict)
    refusals: int = 0
    #: refusals by rule
    refused: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt for r in self.requests)

    @property
    def cached_fraction(self) -> float:
        total = self.prompt_tokens
        return sum(r.cached for r in self.requests) / total if total else 0.0

    @property
    def retention(self) -> float:
        due = sum(r.facts_due for r in self.requests)
        return sum(r.facts_held for r in self.requests) / due if due else 1.0

    @property
    def uncached_per_call(self) -> float:
        """Tokens a call sends that the prefix cache does not hold (what costs full price)."""
        uncached = sum(r.prompt - r.cached for r in self.requests)
        return uncached / len(self.requests) if self.requests else 0.0

    @property
    def mean(self) -> float:
        return self.prompt_tokens / len(self.requests) if self.requests else 0.0

    @property
    def peak(self) -> int:
        return max((r.prompt for r in self.requests), default=0)

    def record(
        self, contents: Sequence[content_pb2.Content], fixed: int, facts: Sequence[str]
    ) -> int:
        """Measures one request (against the previous one, for the prefix cache); returns its
        prompt tokens."""
        encoded = [content.SerializeToString(deterministic=True) for content in contents]
        tokens = [content_chars(content) // 4 for content in contents]
        previous = self.contents[-1] if self.contents else []
        shared = 0
        while shared < min(len(previous), len(encoded)) and previous[shared] == encoded[shared]:
            shared += 1
        text = "\n".join(json_format.MessageToJson(c) for c in contents)
        held = sum(1 for fact in facts if fact in text)
        prompt = fixed + sum(tokens)
        cached = fixed + sum(tokens[:shared]) if self.contents else 0
        self.requests.append(Request(prompt, cached, len(facts), held))
        self.contents.append(encoded)
        return prompt

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model_calls": len(self.requests),
            "input_tokens": self.prompt_tokens,
            "input_tokens_per_call": self.mean,
            "cached_token_fraction": self.cached_fraction,
            "uncached_tokens_per_call": self.uncached_per_call,
            "fact_retention": self.retention,
            "peak_prompt_tokens": self.peak,
            "summaries": self.summaries,
            "edits": self.edits,
            "refusals": self.refusals,
            "seconds": self.seconds,
        }


# -- ADK ----------------------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now

    def tick(self) -> float:
        self.now += 1.0
        return self.now


class _StampingService(InMemorySessionService):
    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self._clock = clock

    async def append_event(self, session: Session, event: Event) -> Event:
        event.timestamp = self._clock.tick()
        return await super(InMemorySessionService, self).append_event(session, event)


def _adk_event(author: str, invocation: str, role: str, part: types.Part) -> Event:
    return Event(
        author=author, invocation_id=invocation, content=types.Content(role=role, parts=[part])
    )


def _proto(content: types.Content) -> content_pb2.Content:
    return json_format.ParseDict(
        content.model_dump(mode="json", exclude_none=True), content_pb2.Content()
    )


async def run_adk(turns: Sequence[Turn]) -> Run:
    started = time.perf_counter()
    run = Run("ADK rules alone")
    clock = _Clock()
    count = [0]

    def reply(prompt: str) -> str:
        count[0] += 1
        return rule_summary(prompt, count[0])

    llm = FakeSummaryLlm(reply=reply)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
        config = EventsCompactionConfig(
            token_threshold=TOKEN_THRESHOLD,
            event_retention_size=EVENT_RETENTION,
            summarizer=LlmEventSummarizer(llm=llm, prompt_template=None),
        )
    agent = LlmAgent(name=AGENT, model=llm)
    service = _StampingService(clock)
    session = Session(id="s", app_name=APP, user_id="u", events=[])
    facts: list[str] = []

    def add(event: Event) -> None:
        event.timestamp = clock.tick()
        session.events.append(event)

    async def model_call(invocation: str, part: types.Part) -> None:
        await _run_compaction_for_token_threshold_config(
            config=config,
            session=session,
            session_service=service,
            agent=agent,
            agent_name=AGENT,
            current_branch=None,
            isolation_scope=None,
        )
        contents = [_proto(c) for c in _get_contents(None, list(session.events), AGENT)]
        prompt = run.record(contents, FIXED_TOKENS, facts)
        event = _adk_event(AGENT, invocation, "model", part)
        event.usage_metadata = types.GenerateContentResponseUsageMetadata(prompt_token_count=prompt)
        add(event)

    for number, turn in enumerate(turns):
        invocation = f"inv-{number}"
        add(_adk_event("user", invocation, "user", types.Part(text=turn.question)))
        if turn.fact:
            facts.append(turn.fact)
        for index, round_ in enumerate(turn.rounds):
            call_id = f"call-{number}-{index}"
            call = types.FunctionCall(id=call_id, name="fetch", args={"topic": round_.topic})
            await model_call(invocation, types.Part(function_call=call))
            response = types.FunctionResponse(
                id=call_id, name="fetch", response={"result": round_.result}
            )
            add(_adk_event(AGENT, invocation, "user", types.Part(function_response=response)))
            if round_.fact:
                facts.append(round_.fact)
        await model_call(invocation, types.Part(text=turn.answer))
    run.summaries = count[0]
    run.seconds = time.perf_counter() - started
    return run


# -- the engine ---------------------------------------------------------------------------------


class _RuleSummarizer:
    name = "rules"

    def __init__(self) -> None:
        self.count = 0

    async def summarize(self, request: SummaryInput) -> Summary | None:
        self.count += 1
        text = rule_summary(request.conversation_history, self.count)
        return Summary(content_pb2.Content(role="model", parts=[content_pb2.Part(text=text)]))


def _part_call(call_id: str, name: str, args: dict[str, Any]) -> content_pb2.Part:
    return content_pb2.Part(
        function_call=content_pb2.FunctionCall(id=call_id, name=name, args=dict_to_struct(args))
    )


@dataclass
class _Policy:
    """The scripted model's use of the tools, from what it knows of the log it wrote: at the
    first model call of a turn it pins a fact the user just stated, replaces each round of the
    previous turn that brought a fact by a summary of its own (the fact in it) and hides the
    other rounds (one stub a run of rounds); every ``SUMMARIZE_EVERY`` turns it rolls what came
    since its last roll-up, up to three turns back, into one summary (one a stretch between
    pinned facts), which takes the fact summaries in it whole."""

    #: per turn: the sequences of each round's call and result, and the fact it brought
    rounds: dict[int, list[tuple[int, int, str | None]]] = field(default_factory=dict)
    #: per turn: its first and last sequence
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: the user's pinned messages
    pinned: set[int] = field(default_factory=set)
    #: the facts the tool results brought, by the sequence of the result
    facts: dict[int, str] = field(default_factory=dict)
    #: the last sequence a roll-up took
    rolled_to: int = 0

    def edits(
        self, turn: int, question: int, stated: str | None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The context tool calls of the first model call of ``turn`` (``question``: the
        sequence of its question, ``stated``: the fact the user stated in it)."""
        calls: list[tuple[str, dict[str, Any]]] = []
        if stated is not None:
            calls.append(("context_pin", {"first": question}))
            self.pinned.add(question)
        run: list[tuple[int, int]] = []

        def hide_run() -> None:
            if run:
                stub = f"fetch tables of turn {turn - 1}, read and answered from; no fact."
                calls.append(
                    ("context_hide", {"first": run[0][0], "last": run[-1][1], "stub": stub})
                )
                run.clear()

        for call, result, fact in self.rounds.get(turn - 1, []):
            if fact is None:
                run.append((call, result))
                continue
            hide_run()
            self.facts[result] = fact
            summary = f"fetch in turn {turn - 1} returned a table that said: {fact}"
            calls.append(("context_summarize", {"first": call, "last": result, "summary": summary}))
        hide_run()
        if turn % SUMMARIZE_EVERY == 0 and turn - 3 in self.spans:
            calls.extend(self._roll_up(self.spans[turn - 3][1]))
        return calls

    def _roll_up(self, end: int) -> list[tuple[str, dict[str, Any]]]:
        """Summaries of what came since the last roll-up, up to ``end`` (one a stretch between
        pinned facts): earlier roll-ups stay as they are, so the cached prefix before them
        does too; the fact summaries inside are taken whole."""
        stretches: list[tuple[int, int]] = []
        first = self.rolled_to + 1
        for pin in sorted(p for p in self.pinned if first <= p <= end):
            if pin > first:
                stretches.append((first, pin - 1))
            first = pin + 1
        if first <= end:
            stretches.append((first, end))
        self.rolled_to = max(self.rolled_to, end)
        calls: list[tuple[str, dict[str, Any]]] = []
        for low, high in stretches:
            facts = [
                fact for sequence, fact in sorted(self.facts.items()) if low <= sequence <= high
            ]
            summary = (
                f"Events {low}-{high}: the user asked research questions; fetch tables were read "
                "and answered from. " + " ".join(facts)
            )
            calls.append(("context_summarize", {"first": low, "last": high, "summary": summary}))
        return calls


class _EngineSession:
    """One session of the engine, written as an agent loop writes it."""

    def __init__(self, engine: Engine, clock: _Clock, run: Run, *, declares: bool) -> None:
        self.engine = engine
        #: whether the agent declares the context tools to its model
        self.declares = declares
        self.clock = clock
        self.run = run
        self.sequence = 0
        self.facts: list[str] = []

    async def add(self, event: event_pb2.Event) -> event_pb2.Event:
        event.timestamp = self.clock.tick()
        self.clock.now += 0.5  # a summary made now comes after this event, as ADK's does
        response = await self.engine.append_event(
            spb.AppendEventRequest(app_name=APP, user_id="u", session_id="s", event=event)
        )
        self.sequence = response.event.sequence
        return response.event

    async def model_call(self, invocation: str, parts: Sequence[content_pb2.Part]) -> None:
        request = cpb.BuildContextRequest(
            app_name=APP, user_id="u", session_id="s", agent_name=AGENT, invocation_id=invocation
        )
        contents = list((await self.engine.build_context(request)).response().contents)
        fixed = FIXED_TOKENS + (TOOL_TOKENS if self.declares else 0)
        prompt = self.run.record(contents, fixed, self.facts)
        event = event_pb2.Event(author=AGENT, invocation_id=invocation)
        event.content.role = "model"
        event.content.parts.extend(parts)
        event.usage_metadata.prompt_token_count = prompt
        await self.add(event)

    async def answer(
        self,
        invocation: str,
        fetched: content_pb2.Part | None,
        tool_calls: Sequence[content_pb2.Part],
    ) -> None:
        """The answers of one model response: the fetch result, then each context tool's."""
        event = event_pb2.Event(author=AGENT, invocation_id=invocation)
        event.content.role = "user"
        if fetched is not None:
            event.content.parts.append(fetched)
        for part in tool_calls:
            answer = await self.engine.call_context_tool(
                tpb.CallContextToolRequest(
                    app_name=APP,
                    user_id="u",
                    session_id="s",
                    agent_name=AGENT,
                    invocation_id=invocation,
                    call=part.function_call,
                )
            )
            if answer.HasField("refusal"):
                self.run.refusals += 1
                rule = answer.refusal.rule or answer.refusal.reason
                self.run.refused[rule] = self.run.refused.get(rule, 0) + 1
                if DEBUG:
                    print(invocation, part.function_call.name, answer.refusal.message)
            event.content.parts.append(content_pb2.Part(function_response=answer.response))
        recorded = await self.add(event)
        for edit in recorded.context_edits:
            kind = edit.WhichOneof("edit") or ""
            self.run.edits[kind] = self.run.edits.get(kind, 0) + 1


async def run_engine(turns: Sequence[Turn], *, tools: bool) -> Run:
    started = time.perf_counter()
    run = Run("engine, tools used" if tools else "engine, tools unused")
    clock = _Clock()
    summarizer = _RuleSummarizer()
    engine = await open_engine(
        store=MemoryStore(), summarizers=lambda _config: summarizer, clock=clock
    )
    await engine.app_configs.put(
        config_pb2.AppConfig(
            app_name=APP,
            events_compaction_config=config_pb2.EventsCompactionConfig(
                token_threshold=TOKEN_THRESHOLD, event_retention_size=EVENT_RETENTION
            ),
            context_tools=config_pb2.ContextToolsConfig(enabled=True, max_hidden_fraction=0.98),
        )
    )
    await engine.create_session(spb.CreateSessionRequest(app_name=APP, user_id="u", session_id="s"))
    policy = _Policy()
    session = _EngineSession(engine, clock, run, declares=tools)
    for number, turn in enumerate(turns):
        invocation = f"inv-{number}"
        user = event_pb2.Event(author="user", invocation_id=invocation)
        user.content.role = "user"
        user.content.parts.add(text=turn.question)
        first = (await session.add(user)).sequence
        if turn.fact:
            session.facts.append(turn.fact)
        rounds: list[tuple[int, int, str | None]] = []
        for index, round_ in enumerate(turn.rounds):
            call_id = f"call-{number}-{index}"
            parts = [_part_call(call_id, "fetch", {"topic": round_.topic})]
            if tools and index == 0:
                for n, (name, args) in enumerate(policy.edits(number, first, turn.fact)):
                    parts.append(_part_call(f"ctx-{number}-{n}", name, args))
            await session.model_call(invocation, parts)
            call_sequence = session.sequence
            fetched = content_pb2.Part(
                function_response=content_pb2.FunctionResponse(
                    id=call_id, name="fetch", response=dict_to_struct({"result": round_.result})
                )
            )
            await session.answer(invocation, fetched, parts[1:])
            rounds.append((call_sequence, session.sequence, round_.fact))
            if round_.fact:
                session.facts.append(round_.fact)
        answer = content_pb2.Part(text=turn.answer)
        await session.model_call(invocation, [answer])
        policy.rounds[number] = rounds
        policy.spans[number] = (first, session.sequence)
    run.summaries = summarizer.count + run.edits.get("summary_sequence", 0)
    await engine.close()
    run.seconds = time.perf_counter() - started
    return run


# -- report -------------------------------------------------------------------------------------


@dataclass
class ContextToolsReport(Report):
    runs: list[Run] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data["runs"] = [run.to_json() for run in self.runs]
        return data

    def render(self) -> str:
        header = (
            "replay",
            "model calls",
            "input tokens/call",
            "vs ADK",
            "cached tokens",
            "uncached/call",
            "fact retention",
            "peak prompt",
            "summaries",
            "edits",
            "seconds",
        )
        adk = self.runs[0]
        rows = [
            (
                run.name,
                str(len(run.requests)),
                f"{run.mean:,.0f}",
                f"{run.prompt_tokens / adk.prompt_tokens:.2f}x" if adk.prompt_tokens else "",
                f"{run.cached_fraction:.1%}",
                f"{run.uncached_per_call:,.0f}",
                f"{run.retention:.1%}",
                f"{run.peak:,}",
                str(run.summaries),
                ", ".join(f"{kind} {count}" for kind, count in sorted(run.edits.items())) or "-",
                f"{run.seconds:.1f}",
            )
            for run in self.runs
        ]
        return "\n".join([f"== {self.benchmark} ==", *table(header, rows), *self.footer()])


def _check(adk: Run, unused: Run, used: Run) -> list[str]:
    if len({len(adk.requests), len(unused.requests), len(used.requests)}) != 1:
        raise DataCheckError("the replays made different numbers of model calls")
    for number, (theirs, ours) in enumerate(zip(adk.contents, unused.contents, strict=True)):
        if theirs != ours:
            raise DataCheckError(f"model call {number + 1}: the unused replay's contents differ")
    if not adk.summaries:
        raise DataCheckError("ADK's rules never compacted: the session is too short")
    if not used.edits.get("hide") or not used.edits.get("pin"):
        raise DataCheckError("the policy made no hide or no pin")
    return [
        f"the tools-unused replay's contents equal ADK's at all {len(adk.requests)} model calls",
        f"ADK compacted {adk.summaries} times; the policy's edits: {used.edits}",
    ]


async def run(options: Options) -> Report:
    turns = workload(12 if options.quick else TURNS)
    adk = await run_adk(turns)
    unused = await run_engine(turns, tools=False)
    used = await run_engine(turns, tools=True)
    checks = _check(adk, unused, used)
    saving = 1 - used.prompt_tokens / adk.prompt_tokens if adk.prompt_tokens else 0.0
    return ContextToolsReport(
        benchmark="context-tools",
        parameters={
            "turns": len(turns),
            "rounds_per_turn": ROUNDS,
            "token_threshold": TOKEN_THRESHOLD,
            "event_retention_size": EVENT_RETENTION,
            "summarize_every": SUMMARIZE_EVERY,
            "fixed_tokens": FIXED_TOKENS,
            "context_tool_tokens": TOOL_TOKENS,
            "seed": SEED,
        },
        targets=[
            Target("input tokens saved vs ADK's rules alone", saving * 100, 30.0, "%"),
            Target("fact retention with the tools", used.retention * 100, 100.0, "%"),
            Target(
                "cached-token fraction, tools / ADK",
                used.cached_fraction / adk.cached_fraction if adk.cached_fraction else 0.0,
                1.0,
                "x",
            ),
            Ceiling(
                "uncached tokens per call, tools / ADK",
                used.uncached_per_call / adk.uncached_per_call if adk.uncached_per_call else 0.0,
                1.0,
                "x",
            ),
        ],
        checks=checks,
        notes=[
            f"ADK's rules: token threshold {TOKEN_THRESHOLD:,}, {EVENT_RETENTION} events kept "
            "raw; the engine replays use the same rules underneath the tools",
            f"fixed part {FIXED_TOKENS} tokens; the tools-used replay declares the context tools "
            f"too (+{TOOL_TOKENS} tokens a call)",
            "cached tokens: a prefix cache that is always warm (the fixed part and the contents "
            "shared from the start with the previous request); every call's new tool result is "
            "uncached on every side, so a smaller context has a smaller cached fraction at the "
            "same uncached tokens: uncached tokens per call is what costs full price",
            f"refusals answered to the policy: {used.refusals} {used.refused}",
        ],
        runs=[adk, unused, used],
    )
