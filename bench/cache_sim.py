"""Prompt caching: how much of each model request a Gemini context cache serves, with google-adk's
behaviour, this engine in parity mode, and this engine with cache-aware compaction.

Workload: a generated (seeded) travel-agent session of 300 invocations (``--quick``: 80). Each
invocation: the user's message (150-1500 characters), then either a direct answer or a tool round
(a function call, a tool result of 1500-7000 characters, then the answer); idle gaps of 20 s to
10 min, and 6% of 40-90 min (longer than the cache TTL). Every request also carries a system
instruction and two tool declarations (``FIXED_CHARS``). The model is ``gemini-2.5-flash`` (ADK's
2048-token floor). ``ContextCacheConfig(cache_intervals=10, ttl_seconds=1800)``; compaction as in
``HEADLINE`` (both of ADK's triggers: the sliding window of ADK's documentation, every 3
invocations with an overlap of 1, and a 16k token threshold keeping 4 events); summaries are
deterministic texts of ``SUMMARY_CHARS`` characters on every side. A simulated clock drives event
timestamps, summary timestamps and cache expiry.

Replays of the same session:

* **ADK**: google-adk 2.13 in this process: before each model call its in-flow token check
  (``_run_compaction_for_token_threshold_config``), ``_get_contents``, its context-cache request
  processor and ``GeminiContextCacheManager.handle_context_caching`` (a fake genai client; the
  manager's clock is the simulation's); after each invocation its post-invocation compaction.
* **engine, parity**: this engine in this process (``open_engine`` on a memory store, a fixed
  summarizer; ``Engine.build_context`` with its prompt-cache fields), same clock; the agent follows the
  returned decision (creates the cache it is told to and records the metadata).
* **engine, cache-aware**: the same with ``ContextCacheConfig.cache_aware_compaction`` (hard
  limit: the token threshold).

Tokens are ``chars // 4`` of each content (ADK's estimate: text, call names, JSON arguments and
results) plus the fixed part, on every side. A request's *cached* tokens are the fixed part and
the cached contents when it uses a cache (the request that creates it included); *sent* tokens are
the rest. Reported per replay: requests, requests served from a cache, cached-token fraction,
tokens sent, cache writes, peak prompt, summaries. Target: the cache-aware replay's cached-token
fraction is at least 1.5x ADK's at a peak prompt no larger than ADK's. Full runs also replay the
``VARIANTS`` (one trigger each; ADK and cache-aware only) and report them without targets.

Data checks: the parity replay makes ADK's decision (fingerprint only / create / reuse, with the
same cached contents count) with ADK's prompt size for every request; every replay created caches
and compacted. The plot (prompt and cached tokens per request) is ``bench/results/cache_sim.png``.
"""

from __future__ import annotations

import json
import random
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.adk.agents.context_cache_config import ContextCacheConfig as AdkCacheConfig
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.compaction import (
    _run_compaction_for_sliding_window,
    _run_compaction_for_token_threshold_config,
)
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context._contents import _get_contents
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.genai import types
from google.protobuf import json_format

from bench import DataCheckError, Options, Report, Target, table
from bench.peers.adk_cache import FakeCaches, adk_cache_step
from bench.peers.adk_compaction import FakeSummaryLlm
from contextengine.compaction.summarizers.summarizer import Summary, SummaryInput
from contextengine.core.events import normalize_for_append
from contextengine.core.prompt_cache import APPENDED_CONTINUE_CHARS, APPENDED_EMPTY_CHARS
from contextengine.core.tokens import content_chars
from contextengine.engine import open_engine
from contextengine.store import SessionKey
from contextengine.store.memory import MemoryStore
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as cpb, event_pb2

SEED = 20_261_130
MODEL = "gemini-2.5-flash"
AGENT = "assistant"
CACHE_INTERVALS = 10
TTL_SECONDS = 1800
SUMMARY_CHARS = 1_200
START = 1_800_000_000.0
INSTRUCTION = (
    "You are a travel assistant. Answer precisely, cite the tools you used, keep prices in the"
    " user's currency and never invent availability. "
) * 12
TOOLS: list[dict[str, Any]] = [
    {
        "function_declarations": [
            {
                "name": name,
                "description": f"{name.replace('_', ' ')}: " + "detailed behaviour notes. " * 25,
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"query": {"type": "STRING"}, "limit": {"type": "INTEGER"}},
                    "required": ["query"],
                },
            }
        ]
    }
    for name in ("search_flights", "search_hotels")
]
#: characters of the system instruction and tools (the part every request starts with)
FIXED_CHARS = len(INSTRUCTION) + sum(len(json.dumps(tool)) for tool in TOOLS)

_WORDS = [
    "flight",
    "hotel",
    "paris",
    "rome",
    "lisbon",
    "price",
    "euro",
    "night",
    "booking",
    "window",
    "seat",
    "breakfast",
    "forecast",
    "rain",
    "sunny",
    "transfer",
    "museum",
    "dinner",
    "budget",
    "option",
    "cheaper",
    "later",
    "earlier",
    "return",
    "direct",
    "layover",
]

PLOT_PATH = Path(__file__).resolve().parent / "results" / "cache_sim.png"


@dataclass(frozen=True)
class Setup:
    """The compaction configuration of a replay (the same for ADK and the engine)."""

    label: str
    token_threshold: int | None = None
    event_retention_size: int | None = None
    compaction_interval: int | None = None
    overlap_size: int | None = None
    #: the cache-aware replay's hard_token_limit (None: the default)
    hard_token_limit: int | None = None

    def describe(self) -> str:
        parts = []
        if self.compaction_interval is not None:
            parts.append(f"sliding window {self.compaction_interval}/{self.overlap_size}")
        if self.token_threshold is not None:
            parts.append(
                f"token threshold {self.token_threshold:,} keep {self.event_retention_size}"
            )
        if self.hard_token_limit is not None:
            parts.append(f"hard limit {self.hard_token_limit:,}")
        return ", ".join(parts)


#: The headline configuration: both of ADK's triggers, the sliding window as in ADK's
#: documentation (every 3 invocations, overlap 1) and a token threshold.
HEADLINE = Setup(
    "both triggers",
    token_threshold=16_000,
    event_retention_size=4,
    compaction_interval=3,
    overlap_size=1,
)
#: Other configurations, replayed in full runs (reported, no targets).
VARIANTS = (
    Setup("token threshold only", token_threshold=16_000, event_retention_size=4),
    Setup("sliding window only", compaction_interval=3, overlap_size=1, hard_token_limit=16_000),
)


# -- the session --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    gap: float
    user: str
    tool: tuple[str, str] | None  # (function name, result text)
    answer: str


def _text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def workload(invocations: int, seed: int = SEED) -> list[Turn]:
    rng = random.Random(seed)
    turns = []
    for _ in range(invocations):
        roll = rng.random()
        if roll < 0.06:
            gap = rng.uniform(2400, 5400)  # beyond the TTL
        elif roll < 0.3:
            gap = rng.uniform(120, 600)
        else:
            gap = rng.uniform(20, 120)
        tool = None
        if rng.random() < 0.5:
            name = rng.choice(["search_flights", "search_hotels", "get_forecast"])
            tool = (name, _text(rng, 1500, 7000))
        turns.append(Turn(gap, _text(rng, 150, 1500), tool, _text(rng, 150, 1200)))
    return turns


def summary_text(number: int) -> str:
    head = f"Summary {number}: the user planned trips; tools were used; options were compared. "
    return (head * (SUMMARY_CHARS // len(head) + 1))[:SUMMARY_CHARS]


# -- measuring a request ------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    prompt: int
    cached: int
    action: str
    contents_count: int
    #: tokens written into a cache created for this request
    written: int


@dataclass
class Run:
    name: str
    requests: list[Request] = field(default_factory=list)
    summaries: int = 0
    deletes: int = 0
    seconds: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt for r in self.requests)

    @property
    def cached_tokens(self) -> int:
        return sum(r.cached for r in self.requests)

    @property
    def cached_fraction(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def cached_requests(self) -> int:
        return sum(1 for r in self.requests if r.cached)

    @property
    def peak(self) -> int:
        return max((r.prompt for r in self.requests), default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "requests": len(self.requests),
            "cached_requests": self.cached_requests,
            "cached_request_fraction": self.cached_requests / max(1, len(self.requests)),
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "cached_token_fraction": self.cached_fraction,
            "sent_tokens": self.prompt_tokens - self.cached_tokens,
            "cache_writes_tokens": sum(r.written for r in self.requests),
            "caches_created": sum(1 for r in self.requests if r.action == "create"),
            "caches_deleted": self.deletes,
            "peak_prompt_tokens": self.peak,
            "summaries": self.summaries,
            "seconds": self.seconds,
        }


def _tokens(contents: Sequence[content_pb2.Content]) -> list[int]:
    return [content_chars(content) // 4 for content in contents]


def _appended(contents: Sequence[content_pb2.Content]) -> int:
    if not contents:
        return APPENDED_EMPTY_CHARS // 4
    return APPENDED_CONTINUE_CHARS // 4 if contents[-1].role != "user" else 0


def measure(
    contents: Sequence[content_pb2.Content], action: str, cached_count: int, uses_cache: bool
) -> Request:
    per_content = _tokens(contents)
    fixed = FIXED_CHARS // 4
    prompt = fixed + sum(per_content) + _appended(contents)
    cached = fixed + sum(per_content[:cached_count]) if uses_cache else 0
    written = cached if action == "create" and uses_cache else 0
    return Request(prompt, cached, action, cached_count, written)


def _proto(content: types.Content) -> content_pb2.Content:
    return json_format.ParseDict(
        content.model_dump(mode="json", exclude_none=True), content_pb2.Content()
    )


# -- ADK ----------------------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


class _StampingService(InMemorySessionService):
    """Appends to the session object as the base class does, timestamping summaries with the
    simulated clock."""

    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self._clock = clock

    async def append_event(self, session: Session, event: Event) -> Event:
        event.timestamp = self._clock()
        self._clock.now += 0.001
        return await super(InMemorySessionService, self).append_event(session, event)


def _adk_config(
    setup: Setup, summaries: list[int]
) -> tuple[EventsCompactionConfig, FakeSummaryLlm]:
    def reply(prompt: str) -> str:
        summaries[0] += 1
        return summary_text(summaries[0])

    llm = FakeSummaryLlm(reply=reply)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
        summarizer = LlmEventSummarizer(llm=llm, prompt_template=None)
        config = EventsCompactionConfig(
            token_threshold=setup.token_threshold,
            event_retention_size=setup.event_retention_size,
            compaction_interval=setup.compaction_interval,
            overlap_size=setup.overlap_size,
            summarizer=summarizer,
        )
    return config, llm


async def run_adk(turns: Sequence[Turn], setup: Setup = HEADLINE) -> Run:
    started = time.perf_counter()
    run = Run("ADK 2.13")
    clock = _Clock()
    counter = [0]
    config, llm = _adk_config(setup, counter)
    agent = LlmAgent(name=AGENT, model=llm)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
        app = App(name="cache_sim", root_agent=agent, events_compaction_config=config)
    service = _StampingService(clock)
    session = Session(id="s", app_name="cache_sim", user_id="u", events=[])
    caches = FakeCaches()
    cache_config = AdkCacheConfig(cache_intervals=CACHE_INTERVALS, ttl_seconds=TTL_SECONDS)
    tools = [types.Tool.model_validate(tool) for tool in TOOLS]

    def add(event: Event) -> None:
        event.timestamp = clock()
        clock.now += 0.5
        session.events.append(event)

    for number, turn in enumerate(turns):
        clock.now += turn.gap
        invocation = f"inv-{number}"
        add(_adk_event("user", invocation, "user", types.Part(text=turn.user)))
        calls = 2 if turn.tool is not None else 1
        for call in range(calls):
            await _run_compaction_for_token_threshold_config(
                config=config,
                session=session,
                session_service=service,
                agent=agent,
                agent_name=AGENT,
                current_branch=None,
                isolation_scope=None,
            )
            contents = _get_contents(None, list(session.events), AGENT)
            step = await adk_cache_step(
                session.events,
                contents,
                agent_name=AGENT,
                invocation_id=invocation,
                model=MODEL,
                system_instruction=INSTRUCTION,
                tools=tools,
                tool_config=None,
                config=cache_config,
                caches=caches,
                now=clock(),
            )
            metadata = step.metadata
            assert metadata is not None
            if step.created_contents is not None:
                action = "create"
            elif metadata.cache_name is not None:
                action = "reuse"
            else:
                action = "fingerprint_only"
            uses_cache = metadata.cache_name is not None
            request = measure(
                [_proto(c) for c in contents], action, metadata.contents_count, uses_cache
            )
            run.requests.append(request)
            if call == 0 and turn.tool is not None:
                name, result = turn.tool
                part = types.Part(
                    function_call=types.FunctionCall(
                        id=f"call-{number}", name=name, args={"query": turn.user[:40]}
                    )
                )
                model_event = _adk_event(AGENT, invocation, "model", part)
            else:
                model_event = _adk_event(AGENT, invocation, "model", types.Part(text=turn.answer))
            model_event.usage_metadata = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=request.prompt
            )
            model_event.cache_metadata = metadata
            add(model_event)
            if call == 0 and turn.tool is not None:
                name, result = turn.tool
                response = types.Part(
                    function_response=types.FunctionResponse(
                        id=f"call-{number}", name=name, response={"result": result}
                    )
                )
                add(_adk_event(AGENT, invocation, "user", response))
        async for event in _run_compaction_for_sliding_window(app, session, service):
            await service.append_event(session=session, event=event)
    run.summaries = counter[0]
    run.deletes = len(caches.deleted)
    run.seconds = time.perf_counter() - started
    return run


def _adk_event(author: str, invocation: str, role: str, part: types.Part) -> Event:
    return Event(
        author=author, invocation_id=invocation, content=types.Content(role=role, parts=[part])
    )


# -- the engine ---------------------------------------------------------------------------------


class _FixedSummarizer:
    name = "fixed"

    def __init__(self) -> None:
        self.count = 0

    async def summarize(self, request: SummaryInput) -> Summary | None:
        self.count += 1
        text = summary_text(self.count)
        return Summary(content_pb2.Content(role="model", parts=[content_pb2.Part(text=text)]))


async def run_engine(turns: Sequence[Turn], *, aware: bool, setup: Setup = HEADLINE) -> Run:
    started = time.perf_counter()
    run = Run("engine, cache-aware" if aware else "engine, parity")
    clock = _Clock()
    summarizer = _FixedSummarizer()
    engine = await open_engine(
        store=MemoryStore(), summarizers=lambda _config: summarizer, clock=clock
    )
    store, compactor = engine.store, engine.compactor
    cache_config = config_pb2.ContextCacheConfig(
        cache_intervals=CACHE_INTERVALS, ttl_seconds=TTL_SECONDS
    )
    if aware:
        cache_config.cache_aware_compaction.SetInParent()
        if setup.hard_token_limit is not None:
            cache_config.cache_aware_compaction.hard_token_limit = setup.hard_token_limit
    compaction = config_pb2.EventsCompactionConfig()
    if setup.token_threshold is not None and setup.event_retention_size is not None:
        compaction.token_threshold = setup.token_threshold
        compaction.event_retention_size = setup.event_retention_size
    if setup.compaction_interval is not None and setup.overlap_size is not None:
        compaction.compaction_interval = setup.compaction_interval
        compaction.overlap_size = setup.overlap_size
    await engine.app_configs.put(
        config_pb2.AppConfig(
            app_name="cache_sim",
            events_compaction_config=compaction,
            context_cache_config=cache_config,
        )
    )
    key = SessionKey("cache_sim", "u", "s")
    await store.create_session(key, {}, clock())
    caches_created = 0
    deleted: set[str] = set()

    async def add(event: event_pb2.Event) -> None:
        event.timestamp = clock()
        clock.now += 0.5
        await store.append_events(key, [normalize_for_append(event, f"e{clock.now}")], None)

    request = cpb.BuildContextRequest(
        app_name=key.app_name,
        user_id=key.user_id,
        session_id=key.session_id,
        agent_name=AGENT,
        model=cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_GEMINI, model=MODEL),
        system_instruction=content_pb2.Content(parts=[content_pb2.Part(text=INSTRUCTION)]),
    )
    for tool in TOOLS:
        request.tools.add().update(tool)
    for number, turn in enumerate(turns):
        clock.now += turn.gap
        invocation = f"inv-{number}"
        await add(_event("user", invocation, "user", content_pb2.Part(text=turn.user)))
        calls = 2 if turn.tool is not None else 1
        for call in range(calls):
            request.invocation_id = invocation
            response = (await engine.build_context(request)).response()
            decision = response.cache_decision
            metadata = event_pb2.CacheMetadata()
            metadata.CopyFrom(decision.cache_metadata)
            action = {
                cpb.CACHE_ACTION_CREATE: "create",
                cpb.CACHE_ACTION_REUSE: "reuse",
            }.get(decision.action, "fingerprint_only")
            if decision.invalidated_cache_name and decision.invalidated_cache_name not in deleted:
                deleted.add(decision.invalidated_cache_name)
            if decision.action == cpb.CACHE_ACTION_CREATE:
                # the agent creates the cache it is told to and completes the metadata
                caches_created += 1
                metadata.cache_name = f"cachedContents/c{caches_created}"
                metadata.created_at = clock()
                metadata.expire_time = clock() + decision.ttl_seconds
                metadata.invocations_used = 1
            uses_cache = decision.action != cpb.CACHE_ACTION_FINGERPRINT_ONLY
            measured = measure(list(response.contents), action, metadata.contents_count, uses_cache)
            run.requests.append(measured)
            if call == 0 and turn.tool is not None:
                name, _ = turn.tool
                part = content_pb2.Part()
                part.function_call.id = f"call-{number}"
                part.function_call.name = name
                part.function_call.args.update({"query": turn.user[:40]})
                model_event = _event(AGENT, invocation, "model", part)
            else:
                model_event = _event(AGENT, invocation, "model", content_pb2.Part(text=turn.answer))
            model_event.usage_metadata.prompt_token_count = measured.prompt
            model_event.cache_metadata.CopyFrom(metadata)
            await add(model_event)
            if call == 0 and turn.tool is not None:
                name, result = turn.tool
                part = content_pb2.Part()
                part.function_response.id = f"call-{number}"
                part.function_response.name = name
                part.function_response.response.update({"result": result})
                await add(_event(AGENT, invocation, "user", part))
        await compactor.end_invocation(key)
        await compactor.idle(key)
    await engine.close()
    run.summaries = summarizer.count
    run.deletes = len(deleted)
    run.seconds = time.perf_counter() - started
    return run


def _event(author: str, invocation: str, role: str, part: content_pb2.Part) -> event_pb2.Event:
    event = event_pb2.Event(author=author, invocation_id=invocation)
    event.content.role = role
    event.content.parts.append(part)
    return event


# -- report -------------------------------------------------------------------------------------


@dataclass
class CacheReport(Report):
    runs: list[Run] = field(default_factory=list)
    variants: list[VariantResult] = field(default_factory=list)
    plot_path: str = ""

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data["runs"] = [run.to_json() for run in self.runs]
        data["variants"] = [variant.to_json() for variant in self.variants]
        data["plot"] = self.plot_path
        return data

    def render(self) -> str:
        header = (
            "replay",
            "requests",
            "from cache",
            "cached tokens",
            "tokens sent",
            "cache writes",
            "peak prompt",
            "summaries",
            "seconds",
        )
        rows: list[tuple[str, ...]] = []
        for run in self.runs:
            data = run.to_json()
            rows.append(
                (
                    run.name,
                    f"{data['requests']}",
                    f"{data['cached_requests']} ({data['cached_request_fraction']:.1%})",
                    f"{data['cached_tokens']:,} ({data['cached_token_fraction']:.1%})",
                    f"{data['sent_tokens']:,}",
                    f"{data['cache_writes_tokens']:,}",
                    f"{data['peak_prompt_tokens']:,}",
                    f"{data['summaries']}",
                    f"{run.seconds:.1f}",
                )
            )
        lines = [f"== {self.benchmark} ==", *table(header, rows)]
        if self.variants:
            lines.append("")
            lines.append(
                "other compaction configurations (same session; cached-token fraction, peak):"
            )
            for variant in self.variants:
                data = variant.to_json()
                lines.append(
                    f"  {variant.setup.label} ({variant.setup.describe()}): ADK "
                    f"{variant.adk.cached_fraction:.1%} peak {variant.adk.peak:,}; cache-aware "
                    f"{variant.aware.cached_fraction:.1%} peak {variant.aware.peak:,} "
                    f"({data['cached_fraction_ratio']:.2f}x)"
                )
        lines.extend(self.footer())
        return "\n".join(lines)


def plot(path: Path, runs: Sequence[Run]) -> Path:
    """Prompt and cached tokens per request: a PNG with matplotlib when it is installed, else a
    hand-written SVG (same name, .svg)."""
    colours = ["#d62728", "#7f7f7f", "#1f77b4"]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _plot_svg(path.with_suffix(".svg"), runs, colours)
    figure, axes = plt.subplots(len(runs), 1, figsize=(11, 3.2 * len(runs)), sharex=True)
    for ax, run, colour in zip(figure.axes, runs, colours, strict=True):
        prompts = [r.prompt for r in run.requests]
        cached = [r.cached for r in run.requests]
        xs = range(1, len(prompts) + 1)
        ax.fill_between(xs, cached, color=colour, alpha=0.35, step="mid", label="cached tokens")
        ax.plot(xs, prompts, color=colour, linewidth=0.9, label="prompt tokens")
        ax.set_title(
            f"{run.name}: {run.cached_fraction:.1%} of prompt tokens from cache, peak {run.peak:,}"
        )
        ax.set_ylabel("tokens")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
    figure.axes[-1].set_xlabel("model request")
    del axes
    figure.tight_layout()
    path = path.with_suffix(".png")
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _plot_svg(path: Path, runs: Sequence[Run], colours: Sequence[str]) -> Path:
    width, height, margin = 900, 220, 50
    peak = max((run.peak for run in runs), default=1) or 1
    inner_w = width - 2 * margin
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height * len(runs)}" font-family="sans-serif" font-size="11">'
    ]
    for n, (run, colour) in enumerate(zip(runs, colours, strict=False)):
        top = n * height
        count = max(1, len(run.requests))
        inner_h = height - 60

        def point(
            i: int, value: int, top: int = top, count: int = count, inner_h: int = inner_h
        ) -> str:
            x = margin + inner_w * i / max(1, count - 1)
            y = top + 30 + inner_h * (1 - value / peak)
            return f"{x:.1f},{y:.1f}"

        title = f"{run.name}: {run.cached_fraction:.1%} cached tokens, peak {run.peak:,}"
        out.append(f'<text x="{margin}" y="{top + 20}" font-size="13">{title}</text>')
        cached = " ".join(point(i, r.cached) for i, r in enumerate(run.requests))
        prompts = " ".join(point(i, r.prompt) for i, r in enumerate(run.requests))
        out.append(
            f'<polyline points="{cached}" fill="none" stroke="{colour}" stroke-opacity="0.5"/>'
        )
        out.append(f'<polyline points="{prompts}" fill="none" stroke="{colour}"/>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")
    return path


def _check_parity(adk: Run, parity: Run) -> list[str]:
    if len(adk.requests) != len(parity.requests):
        raise DataCheckError(
            f"ADK made {len(adk.requests)} requests, the parity replay {len(parity.requests)}"
        )
    for number, (theirs, ours) in enumerate(zip(adk.requests, parity.requests, strict=True)):
        if (theirs.action, theirs.contents_count, theirs.prompt) != (
            ours.action,
            ours.contents_count,
            ours.prompt,
        ):
            raise DataCheckError(
                f"request {number + 1}: ADK {theirs.action} of {theirs.contents_count} contents "
                f"({theirs.prompt} tokens), parity replay {ours.action} of {ours.contents_count} "
                f"({ours.prompt} tokens)"
            )
    checks = [
        f"the parity replay made ADK's decision and had ADK's prompt size for all "
        f"{len(adk.requests)} requests"
    ]
    for run in (adk, parity):
        if not any(r.action == "create" for r in run.requests) or not run.summaries:
            raise DataCheckError(f"{run.name} never created a cache or never compacted")
    return checks


@dataclass(frozen=True)
class VariantResult:
    setup: Setup
    adk: Run
    aware: Run

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.setup.label,
            "compaction": self.setup.describe(),
            "adk": self.adk.to_json(),
            "cache_aware": self.aware.to_json(),
            "cached_fraction_ratio": (
                self.aware.cached_fraction / self.adk.cached_fraction
                if self.adk.cached_fraction
                else None
            ),
        }


async def run(options: Options) -> Report:
    invocations = 80 if options.quick else 300
    turns = workload(invocations)
    adk = await run_adk(turns)
    parity = await run_engine(turns, aware=False)
    aware = await run_engine(turns, aware=True)
    runs = [adk, parity, aware]
    checks = _check_parity(adk, parity)
    if not any(r.action == "create" for r in aware.requests) or not aware.summaries:
        raise DataCheckError("the cache-aware replay never created a cache or never compacted")
    checks.append("every replay created caches and compacted")
    # the committed plot is the full run's; a smoke run draws none
    path = None if options.quick else plot(options.results_dir / PLOT_PATH.name, runs)
    variants = [
        VariantResult(
            setup,
            await run_adk(turns, setup),
            await run_engine(turns, aware=True, setup=setup),
        )
        for setup in ([] if options.quick else VARIANTS)
    ]
    ratio = aware.cached_fraction / adk.cached_fraction if adk.cached_fraction else 0.0
    return CacheReport(
        benchmark="cache",
        parameters={
            "invocations": invocations,
            "model": MODEL,
            "cache_intervals": CACHE_INTERVALS,
            "ttl_seconds": TTL_SECONDS,
            "compaction": HEADLINE.describe(),
            "summary_chars": SUMMARY_CHARS,
            "fixed_tokens": FIXED_CHARS // 4,
            "seed": SEED,
        },
        targets=[
            Target("cache-aware cached-token fraction / ADK's", ratio, 1.5, "x"),
            Target(
                "ADK peak prompt / cache-aware peak prompt",
                adk.peak / aware.peak if aware.peak else 0.0,
                1.0,
                "x",
            ),
        ],
        checks=checks,
        notes=[
            f"compaction: {HEADLINE.describe()}; cache_intervals {CACHE_INTERVALS}, "
            f"ttl {TTL_SECONDS} s; {FIXED_CHARS // 4} fixed tokens (instruction and tools)",
            "cached tokens: the system instruction, tools and cached contents of requests that "
            "use a cache (the one that creates it included); tokens sent: everything else",
            f"plot: {path}" if path is not None else "no plot in --quick runs",
            *(
                [
                    "--quick: 80 invocations, too few for the targets, which are for the full "
                    "300-invocation session (ADK's sliding summaries reach the token threshold "
                    "after about 150)"
                ]
                if options.quick
                else []
            ),
        ],
        runs=runs,
        variants=variants,
        plot_path=str(path or ""),
    )
