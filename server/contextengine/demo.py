"""``contextengine demo``: a scripted travel-planning agent session, compacted as it goes.

The demo plays an agent (``travel_agent``) with a fake model against a sidecar: each invocation
is a user message, zero or more tool rounds (``search_flights(...)`` and its result, ...) and a
final answer. Before every model call it asks the sidecar for the context (BuildContext) and the
fake model reports a ``prompt_token_count`` that grows with that context, as a real model's usage
metadata would. After each invocation it calls EndInvocation and waits (deterministically, by
polling GetCompactionStatus) for the background compaction the engine may run.

It prints, per invocation, the context the agent would send (one line per content), every summary
as it appears (its range and text), and at the end what the last summary replaced (ExpandSummary).

Compaction is the app's: a sliding window (``compaction_interval=3``, ``overlap_size=1``) or a
token threshold with a retained tail. Summaries come from the offline extractive summarizer,
or from Gemini when ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` is set (the sidecar needs the key in
its own environment; the in-process server started by the demo shares the demo's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from contextengine.client import ContextEngineClient
from contextengine.compaction.summarizers.gemini import GeminiSettings
from contextengine.core.structs import dict_to_struct, sorted_keys, struct_to_dict
from contextengine.testing import start_local_server
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    content_pb2,
    event_pb2,
)

__all__ = [
    "DEFAULT_GEMINI_MODEL",
    "DEFAULT_TARGET",
    "DemoResult",
    "add_arguments",
    "main",
    "run_demo",
]

DEFAULT_TARGET = "127.0.0.1:50151"
DEFAULT_GEMINI_MODEL = "gemini-2.5-flash"
DEFAULT_INVOCATIONS = 8

APP = "travel-demo"
USER = "traveller"
AGENT = "travel_agent"

#: sliding-window settings (mode "sliding")
COMPACTION_INTERVAL = 3
OVERLAP_SIZE = 1
#: token-threshold settings (mode "token"): compact once a prompt reaches this many tokens,
#: keeping the last events raw
TOKEN_THRESHOLD = 1_100
EVENT_RETENTION_SIZE = 3
#: what the fake model adds to the context for the system instruction and tool declarations
SYSTEM_PROMPT_TOKENS = 250

#: how long to wait for a background compaction (extractive: milliseconds; Gemini: a model call)
WAIT_EXTRACTIVE_SECONDS = 30.0
WAIT_GEMINI_SECONDS = 180.0
POLL_SECONDS = 0.01

LINE_CHARS = 70
SUMMARY_LINES = 12


# The script ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: Mapping[str, Any]
    result: Mapping[str, Any]


@dataclass(frozen=True)
class Turn:
    """One invocation: the user's message, the tools the agent calls (one model call each) and
    its answer."""

    user: str
    tools: tuple[ToolCall, ...]
    answer: str


def _flights(origin: str, destination: str, date: str) -> list[dict[str, Any]]:
    return [
        {"flight": "AF274", "depart": f"{date} 10:20", "arrive": "+1 06:05", "stops": 0,
         "price_eur": 1240, "seats_left": 4},
        {"flight": "LH2231", "depart": f"{date} 07:55", "arrive": "+1 08:40", "stops": 1,
         "via": "FRA", "price_eur": 965, "seats_left": 9},
        {"flight": "NH216", "depart": f"{date} 21:55", "arrive": "+1 17:30", "stops": 0,
         "price_eur": 1385, "seats_left": 2},
    ]  # fmt: skip


SCRIPT: tuple[Turn, ...] = (
    Turn(
        "I want to fly from Paris to Tokyo on May 12 with my partner, economy. What is there?",
        (
            ToolCall(
                "search_flights",
                {
                    "origin": "CDG",
                    "destination": "HND",
                    "date": "2026-05-12",
                    "passengers": 2,
                    "cabin": "economy",
                },
                {"flights": _flights("CDG", "HND", "2026-05-12")},
            ),
        ),
        "I found three options for May 12: Air France AF274 (nonstop, 10:20, 1,240 EUR per "
        "person), Lufthansa LH2231 via Frankfurt (965 EUR, one stop) and ANA NH216 (nonstop "
        "night flight, 1,385 EUR). AF274 is the best balance of price and comfort.",
    ),
    Turn(
        "Book AF274 for both of us, please.",
        (
            ToolCall(
                "book_flight",
                {"flight": "AF274", "date": "2026-05-12", "passengers": 2},
                {
                    "status": "confirmed",
                    "booking_reference": "PNR-7XK2Q",
                    "total_eur": 2480,
                    "seats": ["23A", "23B"],
                },
            ),
        ),
        "Done: AF274 on May 12 is booked for two, seats 23A and 23B, booking reference "
        "PNR-7XK2Q, 2,480 EUR in total.",
    ),
    Turn(
        "Now a hotel in Shinjuku for 5 nights from May 13, under 200 euros a night.",
        (
            ToolCall(
                "search_hotels",
                {
                    "city": "Tokyo",
                    "district": "Shinjuku",
                    "check_in": "2026-05-13",
                    "nights": 5,
                    "max_price_eur": 200,
                },
                {
                    "hotels": [
                        {
                            "name": "Hotel Gracery Shinjuku",
                            "price_eur": 165,
                            "rating": 4.3,
                            "walk_to_station_min": 5,
                        },
                        {
                            "name": "Keio Plaza",
                            "price_eur": 198,
                            "rating": 4.4,
                            "walk_to_station_min": 4,
                        },
                        {
                            "name": "Citadines Shinjuku",
                            "price_eur": 142,
                            "rating": 4.1,
                            "walk_to_station_min": 9,
                        },
                    ]
                },
            ),
        ),
        "Three hotels fit: Hotel Gracery Shinjuku (165 EUR, rated 4.3, 5 minutes from the "
        "station), Keio Plaza (198 EUR, 4.4) and Citadines Shinjuku (142 EUR, 4.1, a longer "
        "walk). Gracery is the best value.",
    ),
    Turn(
        "What will the weather be like that week?",
        (
            ToolCall(
                "get_weather_forecast",
                {"city": "Tokyo", "start": "2026-05-13", "days": 5},
                {
                    "forecast": [
                        {"day": "2026-05-13", "high_c": 23, "low_c": 15, "rain_pct": 10},
                        {"day": "2026-05-14", "high_c": 24, "low_c": 16, "rain_pct": 20},
                        {"day": "2026-05-15", "high_c": 21, "low_c": 15, "rain_pct": 70},
                        {"day": "2026-05-16", "high_c": 22, "low_c": 14, "rain_pct": 30},
                        {"day": "2026-05-17", "high_c": 25, "low_c": 16, "rain_pct": 0},
                    ]
                },
            ),
        ),
        "Mild and mostly dry: 21-25 C by day, around 15 C at night. May 15 looks rainy (70%), "
        "so keep indoor plans, like the museums in Ueno, for that day.",
    ),
    Turn(
        "Could we do a day trip to Kyoto on the 16th?",
        (
            ToolCall(
                "search_trains",
                {
                    "origin": "Tokyo",
                    "destination": "Kyoto",
                    "date": "2026-05-16",
                    "passengers": 2,
                    "return": True,
                },
                {
                    "trains": [
                        {
                            "train": "Nozomi 1",
                            "depart": "06:00",
                            "arrive": "08:15",
                            "price_eur": 92,
                        },
                        {
                            "train": "Nozomi 7",
                            "depart": "07:30",
                            "arrive": "09:42",
                            "price_eur": 92,
                        },
                    ],
                    "last_return": "Nozomi 64 at 21:24",
                },
            ),
        ),
        "Yes: the Nozomi 7 leaves Tokyo at 07:30 and reaches Kyoto at 09:42 (92 EUR each way "
        "per person); the last train back is the Nozomi 64 at 21:24.",
    ),
    Turn(
        "Book the Hotel Gracery for those 5 nights.",
        (
            ToolCall(
                "book_hotel",
                {
                    "hotel": "Hotel Gracery Shinjuku",
                    "check_in": "2026-05-13",
                    "nights": 5,
                    "guests": 2,
                },
                {
                    "status": "confirmed",
                    "confirmation": "GRC-55812",
                    "total_eur": 825,
                    "breakfast": False,
                },
            ),
        ),
        "The Hotel Gracery Shinjuku is booked from May 13 for 5 nights, confirmation "
        "GRC-55812, 825 EUR in total (breakfast not included).",
    ),
    Turn(
        "Do we need a visa? We are both French citizens.",
        (
            ToolCall(
                "lookup_entry_rules",
                {"destination": "JP", "nationality": "FR", "purpose": "tourism"},
                {
                    "visa_required": False,
                    "max_stay_days": 90,
                    "passport_validity": "valid for the whole stay",
                    "notes": "Visit Japan Web registration recommended before arrival",
                },
            ),
        ),
        "No visa needed: French citizens can stay up to 90 days as tourists. Your passports "
        "must be valid for the whole stay, and registering on Visit Japan Web before you fly "
        "speeds up arrival.",
    ),
    Turn(
        "Great. Can you recap the plan and the total cost so far?",
        (),
        "Your plan: AF274 Paris to Tokyo on May 12 (PNR-7XK2Q, 2,480 EUR), Hotel Gracery "
        "Shinjuku May 13-18 (GRC-55812, 825 EUR), an optional Kyoto day trip on May 16 "
        "(about 368 EUR for two, not booked). Booked so far: 3,305 EUR.",
    ),
    Turn(
        "Any sushi restaurants near the hotel for our first evening?",
        (
            ToolCall(
                "search_restaurants",
                {
                    "near": "Hotel Gracery Shinjuku",
                    "cuisine": "sushi",
                    "date": "2026-05-13",
                    "party_size": 2,
                },
                {
                    "restaurants": [
                        {
                            "name": "Sushi Zanmai Shinjuku",
                            "walk_min": 3,
                            "price_level": 2,
                            "free_tables": ["19:00", "20:30"],
                        },
                        {
                            "name": "Uogashi Nihon-ichi",
                            "walk_min": 6,
                            "price_level": 1,
                            "standing_only": True,
                        },
                    ]
                },
            ),
        ),
        "Sushi Zanmai Shinjuku is 3 minutes from the hotel with tables at 19:00 and 20:30; "
        "Uogashi Nihon-ichi is a cheaper standing sushi bar 6 minutes away.",
    ),
    Turn(
        "Please move our return to May 19 and find flights back to Paris.",
        (
            ToolCall(
                "search_flights",
                {
                    "origin": "HND",
                    "destination": "CDG",
                    "date": "2026-05-19",
                    "passengers": 2,
                    "cabin": "economy",
                },
                {"flights": _flights("HND", "CDG", "2026-05-19")},
            ),
            ToolCall(
                "extend_hotel",
                {"confirmation": "GRC-55812", "extra_nights": 1},
                {"status": "confirmed", "new_check_out": "2026-05-19", "total_eur": 990},
            ),
        ),
        "The hotel now runs to May 19 (GRC-55812, 990 EUR in total). For the way back on May "
        "19 the options mirror the outbound ones: AF274-style nonstop at 1,240 EUR, LH2231 via "
        "Frankfurt at 965 EUR, or NH216 at 1,385 EUR.",
    ),
)


def turn_for(index: int) -> Turn:
    """The script's turn ``index`` (0-based); past its end the script starts over."""
    turn = SCRIPT[index % len(SCRIPT)]
    rounds = index // len(SCRIPT)
    if rounds == 0:
        return turn
    return Turn(f"{turn.user} (again, round {rounds + 1})", turn.tools, turn.answer)


# Rendering ----------------------------------------------------------------------------------


def _clip(text: str, width: int = LINE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _args(struct: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in struct.items())


def describe_content(content: content_pb2.Content) -> str:
    """One line for a content: its role and the first characters of what it says."""
    return f"{content.role or '?':<5} | {_content_text(content)}"


def _content_text(content: content_pb2.Content) -> str:
    pieces: list[str] = []
    for part in content.parts:
        if part.text:
            pieces.append(part.text)
        if part.HasField("function_call"):
            call = part.function_call
            pieces.append(f"{call.name}({_args(sorted_keys(struct_to_dict(call.args, 'args')))})")
        if part.HasField("function_response"):
            response = part.function_response
            pieces.append(
                f"{response.name} -> {sorted_keys(struct_to_dict(response.response, 'response'))}"
            )
    return _clip(" / ".join(pieces))


def _summary_text(event: event_pb2.Event) -> str:
    return "\n".join(
        part.text for part in event.actions.compaction.compacted_content.parts if part.text
    )


def _event_line(event: event_pb2.Event) -> str:
    if event.actions.HasField("compaction"):
        return f"#{event.sequence:<3} {'(summary)':<12} | {_clip(_summary_text(event))}"
    return f"#{event.sequence:<3} {event.author:<12} | {_content_text(event.content)}"


# The session --------------------------------------------------------------------------------


@dataclass
class DemoResult:
    """What the demo saw (for tests and callers)."""

    #: the summary events, in the order they appeared
    summaries: list[event_pb2.Event] = field(default_factory=list)
    #: ExpandSummary of the last summary, if there was one
    expansion: kpb.ExpandSummaryResponse | None = None
    #: token estimate of each context built, in order
    context_tokens: list[int] = field(default_factory=list)
    session_id: str = ""


def _text(role: str, text: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)])


def _usage(prompt_tokens: int, answer: str) -> event_pb2.UsageMetadata:
    answer_tokens = max(1, len(answer) // 4)
    return event_pb2.UsageMetadata(
        prompt_token_count=prompt_tokens,
        candidates_token_count=answer_tokens,
        total_token_count=prompt_tokens + answer_tokens,
    )


class _Demo:
    def __init__(
        self, client: ContextEngineClient, out: TextIO, session_id: str, wait_seconds: float
    ) -> None:
        self.client = client
        self.out = out
        self.session_id = session_id
        self.wait_seconds = wait_seconds
        self.result = DemoResult(session_id=session_id)
        self.seen = 0
        self.failures = 0

    def say(self, line: str = "") -> None:
        print(line, file=self.out)

    async def append(self, event: event_pb2.Event) -> None:
        await self.client.append_event(APP, USER, self.session_id, event)

    async def model_call(self, call: int, show: bool) -> int:
        """BuildContext for the agent's next model call; returns the prompt token count the
        fake model reports for it."""
        context = await self.client.build_context(APP, USER, self.session_id, agent_name=AGENT)
        tokens = context.token_estimate.tokens
        self.result.context_tokens.append(tokens)
        if context.compaction_sequence:
            self.say(
                f"  (the token threshold was reached: BuildContext appended summary "
                f"#{context.compaction_sequence} before building)"
            )
            await self.collect_summaries(f"in-flow, before model call {call}")
        if show:
            self.say(
                f"  context for model call {call}: {len(context.contents)} contents, "
                f"~{tokens} tokens ({context.token_estimate.counter})"
            )
            for content in context.contents:
                self.say(f"    {describe_content(content)}")
        elif call > 1:
            self.say(f"  model call {call}: {len(context.contents)} contents, ~{tokens} tokens")
        return tokens + SYSTEM_PROMPT_TOKENS

    async def invocation(self, index: int) -> None:
        turn = turn_for(index)
        invocation_id = f"inv-{index + 1}"
        self.say(f"── invocation {index + 1}: user: {_clip(turn.user, 80)}")
        await self.append(
            event_pb2.Event(
                author="user", invocation_id=invocation_id, content=_text("user", turn.user)
            )
        )
        for call, tool in enumerate(turn.tools, start=1):
            prompt = await self.model_call(call, show=call == 1)
            call_id = f"call-{index + 1}-{call}"
            part = content_pb2.Part(
                function_call=content_pb2.FunctionCall(
                    id=call_id, name=tool.name, args=dict_to_struct(tool.args)
                )
            )
            await self.append(
                event_pb2.Event(
                    author=AGENT,
                    invocation_id=invocation_id,
                    content=content_pb2.Content(role="model", parts=[part]),
                    usage_metadata=_usage(prompt, _args(tool.args)),
                )
            )
            response = content_pb2.Part(
                function_response=content_pb2.FunctionResponse(
                    id=call_id, name=tool.name, response=dict_to_struct(tool.result)
                )
            )
            await self.append(
                event_pb2.Event(
                    author=AGENT,
                    invocation_id=invocation_id,
                    content=content_pb2.Content(role="user", parts=[response]),
                )
            )
            self.say(f"  tool: {_clip(f'{tool.name}({_args(tool.args)})', 90)}")
        call = len(turn.tools) + 1
        prompt = await self.model_call(call, show=call == 1)
        await self.append(
            event_pb2.Event(
                author=AGENT,
                invocation_id=invocation_id,
                content=_text("model", turn.answer),
                usage_metadata=_usage(prompt, turn.answer),
            )
        )
        self.say(f"  {AGENT}: {_clip(turn.answer, 90)}  (prompt {prompt} tokens)")
        scheduled = await self.client.end_invocation(APP, USER, self.session_id, invocation_id)
        waited = await self.wait_for_compaction() if scheduled else 0.0
        self.say(
            "  EndInvocation: "
            + (
                f"compaction checked in the background ({waited * 1000:.0f} ms)"
                if scheduled
                else "nothing scheduled"
            )
        )
        await self.collect_summaries("after the invocation")

    async def wait_for_compaction(self) -> float:
        """Polls GetCompactionStatus until no compaction runs; returns the time waited."""
        started = time.monotonic()
        deadline = started + self.wait_seconds
        while True:
            status = await self.client.compaction_status(APP, USER, self.session_id)
            if not status.running:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the background compaction still runs after {self.wait_seconds:.0f} s"
                )
            await asyncio.sleep(POLL_SECONDS)
        if status.failures > self.failures:
            self.failures = status.failures
            self.say(f"  ! the summarizer failed: {status.last_error}")
        return time.monotonic() - started

    async def collect_summaries(self, when: str) -> None:
        async for event in self.client.list_events(
            APP, USER, self.session_id, after_sequence=self.seen
        ):
            self.seen = max(self.seen, event.sequence)
            if not event.actions.HasField("compaction"):
                continue
            self.result.summaries.append(event)
            compaction = event.actions.compaction
            self.say(
                f"  ★ summary #{event.sequence} appended ({when}): replaces events "
                f"#{compaction.start_sequence}-#{compaction.end_sequence}"
            )
            lines = _summary_text(event).splitlines()
            for line in lines[:SUMMARY_LINES]:
                self.say(f"    │ {_clip(line, 96)}")
            if len(lines) > SUMMARY_LINES:
                self.say(f"    │ … ({len(lines) - SUMMARY_LINES} more lines)")

    async def expand_last(self) -> None:
        if not self.result.summaries:
            self.say("no summary was appended: nothing to expand")
            return
        last = self.result.summaries[-1]
        expansion = await self.client.expand_summary(APP, USER, self.session_id, last.sequence)
        self.result.expansion = expansion
        self.say(
            f"ExpandSummary(#{last.sequence}): {len(expansion.events)} raw events and "
            f"{len(expansion.subsumed_summaries)} earlier summaries it replaces"
        )
        for event in expansion.events:
            self.say(f"    {_event_line(event)}")
        for event in expansion.subsumed_summaries:
            self.say(f"    subsumes {_event_line(event)}")


def _compaction_config(mode: str) -> config_pb2.EventsCompactionConfig:
    if mode == "sliding":
        return config_pb2.EventsCompactionConfig(
            compaction_interval=COMPACTION_INTERVAL, overlap_size=OVERLAP_SIZE
        )
    if mode == "token":
        return config_pb2.EventsCompactionConfig(
            token_threshold=TOKEN_THRESHOLD, event_retention_size=EVENT_RETENTION_SIZE
        )
    raise ValueError(f"unknown mode {mode!r}: sliding or token")


def _describe_mode(mode: str) -> str:
    if mode == "sliding":
        return (
            f"sliding window (compaction_interval={COMPACTION_INTERVAL}, "
            f"overlap_size={OVERLAP_SIZE})"
        )
    return (
        f"token threshold (token_threshold={TOKEN_THRESHOLD}, "
        f"event_retention_size={EVENT_RETENTION_SIZE})"
    )


@contextlib.asynccontextmanager
async def _server(target: str | None, out: TextIO) -> AsyncIterator[str]:
    if target is not None:
        print(f"server: {target}", file=out)
        yield target
        return
    with tempfile.TemporaryDirectory(prefix="contextengine-demo-") as tmp:
        db = str(Path(tmp) / "demo.db")
        async with start_local_server(db) as server:
            print(f"server: in-process on {server.target} (SQLite {db})", file=out)
            yield server.target


async def run_demo(
    target: str | None = None,
    *,
    invocations: int = DEFAULT_INVOCATIONS,
    mode: str = "sliding",
    gemini_model: str = DEFAULT_GEMINI_MODEL,
    out: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> DemoResult:
    """Plays ``invocations`` invocations against the sidecar at ``target`` (None: an in-process
    server on a temporary SQLite file) and prints what happens to ``out`` (default stdout)."""
    stream = sys.stdout if out is None else out
    compaction = _compaction_config(mode)
    use_gemini = GeminiSettings.from_env(environ).api_key is not None
    summarizer = (
        config_pb2.SummarizerConfig(gemini=config_pb2.GeminiSummarizerConfig(model=gemini_model))
        if use_gemini
        else config_pb2.SummarizerConfig(extractive=config_pb2.ExtractiveSummarizerConfig())
    )
    async with _server(target, stream) as address, ContextEngineClient(address) as client:
        await client.wait_ready(10.0)
        await client.update_app_config(
            config_pb2.AppConfig(
                app_name=APP, events_compaction_config=compaction, summarizer=summarizer
            )
        )
        session = await client.create_session(APP, USER)
        print(
            f"app {APP!r}, agent {AGENT!r}, session {session.id}: {_describe_mode(mode)}, "
            f"summarizer: {f'gemini ({gemini_model})' if use_gemini else 'extractive (offline)'}",
            file=stream,
        )
        demo = _Demo(
            client,
            stream,
            session.id,
            WAIT_GEMINI_SECONDS if use_gemini else WAIT_EXTRACTIVE_SECONDS,
        )
        for index in range(invocations):
            await demo.invocation(index)
        print(file=stream)
        await demo.expand_last()
        tokens = demo.result.context_tokens
        if tokens:
            print(
                f"{invocations} invocations, {len(tokens)} model calls, "
                f"{len(demo.result.summaries)} summaries; context tokens: "
                f"max {max(tokens)}, last {tokens[-1]}",
                file=stream,
            )
        return demo.result


# The command --------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        help=(
            f"the sidecar, host:port (default {DEFAULT_TARGET} if something listens there, "
            "else an in-process server on a temporary SQLite file)"
        ),
    )
    parser.add_argument(
        "--invocations",
        type=int,
        default=DEFAULT_INVOCATIONS,
        help=f"how many invocations to play (default {DEFAULT_INVOCATIONS})",
    )
    parser.add_argument(
        "--mode",
        choices=["sliding", "token"],
        default="sliding",
        help="sliding window (interval 3, overlap 1) or token threshold compaction",
    )
    parser.add_argument(
        "--gemini-model",
        default=DEFAULT_GEMINI_MODEL,
        help=(
            "summarizer model when GEMINI_API_KEY or GOOGLE_API_KEY is set "
            f"(default {DEFAULT_GEMINI_MODEL}; without a key: the extractive summarizer)"
        ),
    )


def _listening(target: str, timeout: float = 0.3) -> bool:
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def main(args: argparse.Namespace) -> int:
    """``contextengine demo`` with parsed ``args`` (see :func:`add_arguments`)."""
    if args.invocations < 1:
        print("--invocations must be at least 1", file=sys.stderr)
        return 2
    target: str | None = args.target
    if target is None and _listening(DEFAULT_TARGET):
        target = DEFAULT_TARGET
    asyncio.run(
        run_demo(
            target, invocations=args.invocations, mode=args.mode, gemini_model=args.gemini_model
        )
    )
    return 0


def _standalone(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="contextengine demo")
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(_standalone())
