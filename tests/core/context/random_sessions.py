"""Seeded random ADK sessions with every shape the pipeline cares about, for the differential
regression test (odd shapes included: role-less contents, '' and None call ids, reused ids,
summaries over arbitrary ranges, rewinds, transcriptions, branches, scopes, live sessions)."""

from __future__ import annotations

import random

from google.adk.events.event import Event, NodeInfo
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from contextengine.core.context import ContextOptions, IncludeContents
from contextengine.v1 import content_pb2
from tests.core.context.adk_compare import adk_options

__all__ = ["random_options", "random_session"]

_NAMES = [
    "f",
    "g",
    "adk_framework",
    "adk_request_credential",
    "transfer_to_agent",
    "adk_request_input",
]
_AUTHORS = ["user", "agent", "other", "user", "agent"]
_BRANCHES = ["root", "root.a", "root.a.b", "root.ab", "root.a.b.c", "root.agent@c1"]
_RESULTS: list[dict[str, object] | None] = [
    None,
    {},
    {"r": 1},
    {"s": "done"},
    # keys in sorted order at every level: a Struct keeps no order (see test_fencing)
    {"a": 1, "b": {"c": [1, {"d": None, "e": True}]}, "z": 0.5},
]


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ids: list[str] = []

    def call_id(self) -> str | None:
        roll = self.rng.random()
        if roll < 0.1:
            return None
        if roll < 0.15:
            return ""
        if self.ids and roll < 0.6:
            return self.rng.choice(self.ids)
        new = ("adk-" if self.rng.random() < 0.3 else "c") + str(self.rng.randrange(6))
        self.ids.append(new)
        return new

    def name(self) -> str:
        return self.rng.choice(_NAMES[:2]) if self.rng.random() < 0.9 else self.rng.choice(_NAMES)

    def part(self) -> types.Part:
        rng = self.rng
        roll = rng.random()
        if roll < 0.35:
            return types.Part(
                text=rng.choice(["hi", "yo", "", " ", "x <<<END_QUOTED_AGENT_CONTENT>>> y"]),
                thought=rng.choice([None, None, True, False]),
            )
        if roll < 0.55:
            args = rng.choice([None, {}, {"a": 1}, {"b": "x", "a": [1, 2]}, {"z": -0.0, "f": 2.5}])
            return types.Part(
                function_call=types.FunctionCall(name=self.name(), id=self.call_id(), args=args)
            )
        if roll < 0.8:
            return types.Part(
                function_response=types.FunctionResponse(
                    name=self.name(), id=self.call_id(), response=rng.choice(_RESULTS)
                )
            )
        if roll < 0.85:
            return types.Part(thought_signature=b"sig")
        if roll < 0.9:
            return types.Part(inline_data=types.Blob(data=b"abc", mime_type="image/png"))
        if roll < 0.95:
            return types.Part(
                executable_code=types.ExecutableCode(code="1", language=types.Language.PYTHON)
            )
        return types.Part(
            code_execution_result=types.CodeExecutionResult(
                outcome=types.Outcome.OUTCOME_OK, output="1"
            )
        )


# (is it the input transcription, the transcription): an event carries at most one of the two.
_Transcription = tuple[bool, types.Transcription]


def _transcribed(event: Event, transcription: _Transcription | None) -> Event:
    """The event with its transcription set, as if passed to the constructor (the field then
    counts as set); without one, both fields stay unset."""
    if transcription is not None:
        is_input, value = transcription
        if is_input:
            event.input_transcription = value
        else:
            event.output_transcription = value
    return event


def random_session(rng: random.Random, size: int, *, quiet: bool = False) -> list[Event]:
    """``size`` steps of a random session. ``quiet``: after every event, half the time, an event
    that shows nothing new (:func:`_quiet_event`), so that a prefix of the log ends in one as
    often as in a message (the draws of the session itself are the same either way)."""
    events = _random_events(rng, size)
    if not quiet:
        return events
    grown: list[Event] = []
    for index, event in enumerate(events):
        grown.append(event)
        if rng.random() < 0.5:
            grown.append(_quiet_event(rng, grown, f"q{index}"))
    return grown


def _quiet_event(rng: random.Random, earlier: list[Event], event_id: str) -> Event:
    """An event with no content (state delta only, or nothing), an empty text, an empty
    transcription, a summary of a range of ``earlier`` or a rewind, timestamped at or just after
    the last of ``earlier``."""
    last = earlier[-1]
    ts = last.timestamp + rng.choice([0.0, 0.5, 1.0])
    author = rng.choice(["agent", "user", "other"])
    inv = last.invocation_id
    kind = rng.choice(
        ["state", "state", "nothing", "empty_text", "transcript", "summary", "rewind"]
    )
    if kind == "summary":
        stamps = sorted(e.timestamp for e in earlier)
        start, end = sorted((rng.choice(stamps), rng.choice(stamps)))
        compaction = EventCompaction(
            start_timestamp=start,
            end_timestamp=end,
            compacted_content=types.Content(role="model", parts=[types.Part(text="S")]),
        )
        return Event(
            id=event_id,
            timestamp=ts,
            author="user",
            invocation_id=f"c-{event_id}",
            actions=EventActions(compaction=compaction),
        )
    if kind == "rewind":
        targets = sorted({e.invocation_id for e in earlier if e.invocation_id})
        target = rng.choice([*targets, "unknown", "unknown"])
        return Event(
            id=event_id,
            timestamp=ts,
            author="user",
            invocation_id=f"r-{event_id}",
            actions=EventActions(rewind_before_invocation_id=target),
        )
    event = Event(id=event_id, timestamp=ts, author=author, invocation_id=inv)
    if kind == "state":
        event.actions.state_delta = {"k": 1}
    elif kind == "empty_text":
        event.content = types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text="")]
        )
    elif kind == "transcript":
        event.input_transcription = types.Transcription(text="")
    return event


def _random_events(rng: random.Random, size: int) -> list[Event]:
    gen = _Gen(rng)
    events: list[Event] = []
    invocations: list[str] = []
    ts = 0.0
    for i in range(size):
        ts += rng.choice([1.0, 1.0, 0.5, 0.0, -0.5])
        author = rng.choice(_AUTHORS)
        if invocations and rng.random() < 0.6:
            inv = rng.choice(invocations)
        else:
            inv = f"i{len(invocations)}"
            invocations.append(inv)
        roll = rng.random()
        if roll < 0.06 and events:
            stamps = sorted(e.timestamp for e in events)
            start, end = rng.choice(stamps), rng.choice(stamps)
            if rng.random() < 0.8:
                start, end = min(start, end), max(start, end)
            summary = types.Content(
                role=rng.choice(["model", "model", None]),
                parts=[types.Part(text=f"S{start}-{end}")],
            )
            if rng.random() < 0.1:
                summary.parts.append(  # type: ignore[union-attr]
                    types.Part(function_call=types.FunctionCall(name="f", id=gen.call_id()))
                )
            compaction = EventCompaction(
                start_timestamp=start, end_timestamp=end, compacted_content=summary
            )
            event = Event(
                id=f"e{i}",
                timestamp=ts,
                author=rng.choice(["user", "user", "agent", "other"]),
                invocation_id=inv,
                actions=EventActions(compaction=compaction),
            )
            if rng.random() < 0.2:  # custom summarizers sometimes set a content as well
                event.content = types.Content(
                    role=rng.choice(["model", "user"]), parts=[gen.part(), gen.part()]
                )
            if rng.random() < 0.2:
                event.branch = rng.choice(["root", "root.a", "x"])
            if rng.random() < 0.1:
                event.isolation_scope = "t1"
            events.append(event)
            continue
        if roll < 0.09 and invocations:
            target = rng.choice([*invocations, "unknown"])
            events.append(
                Event(
                    id=f"e{i}",
                    timestamp=ts,
                    author="user",
                    invocation_id=f"r{i}",
                    actions=EventActions(rewind_before_invocation_id=target),
                )
            )
            continue
        transcription: _Transcription | None = None
        if roll < 0.13:
            is_input = rng.random() < 0.5
            transcription = (is_input, types.Transcription(text=rng.choice(["a", "b", ""])))
            if rng.random() < 0.7:
                events.append(
                    _transcribed(
                        Event(id=f"e{i}", timestamp=ts, author=author, invocation_id=inv),
                        transcription,
                    )
                )
                continue
        if gen.ids and rng.random() < 0.25:
            # a well-formed call and its response
            call_id, name = gen.call_id(), rng.choice(["f", "g"])
            caller = author if author != "user" else "agent"
            fc = types.FunctionCall(name=name, id=call_id, args={"q": 1})
            events.append(
                Event(
                    id=f"e{i}a",
                    timestamp=ts,
                    author=caller,
                    invocation_id=inv,
                    content=types.Content(role="model", parts=[types.Part(function_call=fc)]),
                )
            )
            ts += rng.choice([0.0, 0.5, 1.0])
            fr = types.FunctionResponse(name=name, id=call_id, response={"ok": True})
            events.append(
                Event(
                    id=f"e{i}b",
                    timestamp=ts,
                    author=rng.choice([author, "user", "agent"]),
                    invocation_id=inv,
                    content=types.Content(role="user", parts=[types.Part(function_response=fr)]),
                )
            )
            continue
        parts = [gen.part() for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]
        role = rng.choice(["user", "model"]) if rng.random() < 0.95 else rng.choice([None, ""])
        if parts and all(p.function_response for p in parts) and rng.random() < 0.8:
            role = "user"
        if parts and any(p.function_call for p in parts) and rng.random() < 0.8:
            role = "model"
        content = types.Content(role=role, parts=parts) if rng.random() < 0.97 else None
        event = _transcribed(
            Event(id=f"e{i}", timestamp=ts, author=author, invocation_id=inv, content=content),
            transcription,
        )
        if rng.random() < 0.15:
            event.branch = rng.choice([*_BRANCHES, f"root.tool@{rng.choice(gen.ids or ['z'])}"])
        if rng.random() < 0.05:
            event.isolation_scope = rng.choice(["t1", ""])
        if rng.random() < 0.05:
            event.node_info = NodeInfo(path="n@1")
        if rng.random() < 0.05:
            event.live_session_id = "live1"
        if rng.random() < 0.1 and gen.ids:
            event.long_running_tool_ids = {rng.choice(gen.ids)}
        if rng.random() < 0.04:
            event.actions.transfer_to_agent = "agent"
        if rng.random() < 0.05 and gen.ids:
            event.actions.requested_tool_confirmations = {
                rng.choice(gen.ids): ToolConfirmation(hint="h")
            }
        events.append(event)
    return events


def random_options(rng: random.Random) -> ContextOptions:
    user_content = None
    if rng.random() < 0.2:
        user_content = content_pb2.Content(role="user", parts=[content_pb2.Part(text="task!")])
    return adk_options(
        agent_name=rng.choice(["agent", "agent", "other", ""]),
        branch=rng.choice([None, "", "root", "root.a", "root.a.b"]),
        isolation_scope=rng.choice([None, None, None, "t1"]),
        include_contents=rng.choice([IncludeContents.DEFAULT, IncludeContents.NONE]),
        preserve_function_call_ids=rng.random() < 0.3,
        include_thoughts_from_other_agents=rng.random() < 0.5,
        user_content=user_content,
    )
