"""The read-only tools' answers (status, expand) and the cost of an edit, from a
:class:`SessionView`.

Nothing here changes the context: these answers only add a call and a response at its end, so
the cacheable prefix stays as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextengine.core.compaction import expand_summary
from contextengine.core.context import stub_text
from contextengine.core.context_tools._rules import EditRefusedError
from contextengine.core.context_tools._view import Limits, SessionView
from contextengine.core.structs import struct_to_dict
from contextengine.v1 import event_pb2

__all__ = ["CacheState", "edit_cost", "event_text", "expansion", "in_context", "status", "where"]

#: turns listed in full by the status tool (older ones are counted, not listed)
MAX_TURNS_LISTED = 40
#: the largest events the status tool names
MAX_LARGEST = 8
#: a context this close to its budget should be edited now
NEAR_BUDGET = 0.8
_PREVIEW_CHARS = 80


@dataclass(frozen=True)
class CacheState:
    """What the engine knows of the provider's prompt cache for this context."""

    #: seconds since the caller's latest model response (None: it has none)
    seconds_since_model_call: float | None
    #: how long a provider keeps a prompt cache warm
    ttl_seconds: int

    @property
    def warm(self) -> bool:
        since = self.seconds_since_model_call
        return since is not None and since < self.ttl_seconds


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW_CHARS else flat[: _PREVIEW_CHARS - 1] + "…"


def _json(struct_holder: Any, has: bool, name: str) -> str:
    if not has:
        return "{}"
    return json.dumps(struct_to_dict(struct_holder, name), ensure_ascii=False, sort_keys=True)


def event_text(event: event_pb2.Event) -> str:
    """One event in full, as the expand tool shows it: ``[sequence] author: ...`` lines."""
    head = f"[{event.sequence}] {event.author}"
    lines: list[str] = []
    if event.actions.HasField("compaction") and event.actions.compaction.HasField(
        "compacted_content"
    ):
        parts = event.actions.compaction.compacted_content.parts
        lines.extend(f"{head} (summary): {part.text}" for part in parts if part.text)
        return "\n".join(lines)
    for part in event.content.parts:
        if part.text:
            kind = " (thought)" if part.thought else ""
            lines.append(f"{head}{kind}: {part.text}")
        if part.HasField("function_call"):
            call = part.function_call
            lines.append(
                f"{head} called {call.name}({_json(call.args, call.HasField('args'), 'args')})"
            )
        if part.HasField("function_response"):
            answer = part.function_response
            body = _json(answer.response, answer.HasField("response"), "response")
            lines.append(f"{head} result of {answer.name}: {body}")
        if part.HasField("inline_data"):
            lines.append(f"{head}: [{part.inline_data.mime_type or 'binary'} data]")
        if part.HasField("file_data"):
            lines.append(f"{head}: [file {part.file_data.file_uri}]")
    return "\n".join(lines)


def in_context(view: SessionView, event: event_pb2.Event) -> bool:
    """Whether ``event`` shows in the caller's context as itself (visible, not summarized,
    not hidden, not a summary)."""
    return (
        view.visible(event)
        and not view.is_summary(event)
        and event.sequence not in view.covered_by
        and view.hidden_at(event.sequence) is None
    )


def where(view: SessionView, event: event_pb2.Event) -> str:
    """Where an event of the caller's is now, in words."""
    if view.is_summary(event):
        return "a summary in your context"
    summary = view.covered_by.get(event.sequence)
    if summary is not None:
        return f"summarized by the summary at {summary}"
    hidden = view.hidden_at(event.sequence)
    if hidden is not None:
        return f"hidden ({hidden.first}..{hidden.last})"
    return "in your context"


def _turn_line(view: SessionView, first: int, last: int) -> dict[str, Any] | None:
    events = [event for event in view.in_range(first, last) if view.visible(event)]
    shown = [event for event in events if in_context(view, event)]
    if not shown:
        return None
    tools: dict[str, int] = {}
    opening = ""
    for event in shown:
        for part in event.content.parts:
            if part.HasField("function_call"):
                tools[part.function_call.name] = tools.get(part.function_call.name, 0) + 1
            if part.text and not opening and not part.thought:
                opening = f"{event.author}: {_preview(part.text)}"
    line: dict[str, Any] = {
        "first": first,
        "last": last,
        "tokens": sum(view.tokens(event) for event in shown),
        "starts": opening,
    }
    if tools:
        line["tool_calls"] = tools
    pinned = [event.sequence for event in shown if view.pinned(event)]
    if pinned:
        line["pinned"] = pinned
    if first >= view.turn_start:
        line["current"] = True
    return line


def status(
    view: SessionView, limits: Limits, context_tokens: int, cache: CacheState
) -> dict[str, Any]:
    """The status tool's answer."""
    scoped = view.scoped()
    turns = [
        line for first, last in view.turns() if (line := _turn_line(view, first, last)) is not None
    ]
    shown = [event for event in scoped if in_context(view, event)]
    largest = sorted(shown, key=lambda event: (-view.tokens(event), event.sequence))[:MAX_LARGEST]
    summaries: list[dict[str, Any]] = []
    covering: dict[int, list[int]] = {}
    for sequence, summary in view.covered_by.items():
        covering.setdefault(summary, []).append(sequence)
    for summary, covered in sorted(covering.items()):
        event = view.event(summary)
        summaries.append(
            {
                "sequence": summary,
                "covers": [min(covered), max(covered)],
                "events": len(covered),
                "tokens": view.tokens(event) if event is not None else 0,
                "written_by_model": summary in _model_summaries(view),
            }
        )
    hidden = [
        {
            "first": entry.first,
            "last": entry.last,
            "stub": entry.stub,
            "tokens_hidden": sum(view.tokens(e) for e in view.in_range(entry.first, entry.last)),
            "hidden_at": entry.recorded_at,
        }
        for entry in view.edits.hidden
        if any(view.visible(event) for event in view.in_range(entry.first, entry.last))
    ]
    answer: dict[str, Any] = {
        "ok": True,
        "context_tokens": context_tokens,
    }
    if limits.token_budget:
        answer["token_budget"] = limits.token_budget
        answer["budget_used"] = round(context_tokens / limits.token_budget, 3)
    answer["current_turn_starts_at"] = view.turn_start
    protected = view.protected_from(limits.protected_turns)
    if protected != view.turn_start:
        answer["protected_from"] = protected
    answer["edits_left_this_turn"] = max(
        0, limits.max_edits_per_invocation - view.edits_in_invocation()
    )
    omitted = len(turns) - MAX_TURNS_LISTED
    if omitted > 0:
        answer["earlier_turns_not_listed"] = omitted
        turns = turns[omitted:]
    answer["turns"] = turns
    answer["largest_events"] = [
        {
            "sequence": event.sequence,
            "author": event.author,
            "tokens": view.tokens(event),
            "holds": _holds(event),
        }
        for event in largest
    ]
    answer["pinned"] = [event.sequence for event in scoped if view.pinned(event)]
    answer["summaries"] = summaries
    answer["hidden"] = hidden
    answer["prompt_cache"] = _cache_report(cache)
    answer["advice"] = _advice(limits, context_tokens, cache)
    return answer


def _model_summaries(view: SessionView) -> set[int]:
    out: set[int] = set()
    for event in view.live:
        out.update(
            edit.summary_sequence
            for edit in event.context_edits
            if edit.WhichOneof("edit") == "summary_sequence"
        )
    return out


def _holds(event: event_pb2.Event) -> str:
    for part in event.content.parts:
        if part.HasField("function_response"):
            return f"result of {part.function_response.name}"
        if part.HasField("function_call"):
            return f"call of {part.function_call.name}"
    for part in event.content.parts:
        if part.text:
            return _preview(part.text)
    return "no text"


def _cache_report(cache: CacheState) -> dict[str, Any]:
    report: dict[str, Any] = {"warm": cache.warm, "ttl_seconds": cache.ttl_seconds}
    if cache.seconds_since_model_call is not None:
        report["seconds_since_last_model_call"] = round(cache.seconds_since_model_call, 1)
    return report


def _advice(limits: Limits, tokens: int, cache: CacheState) -> str:
    near = bool(limits.token_budget) and tokens >= NEAR_BUDGET * limits.token_budget
    if near:
        return (
            "The context is near its budget: hide tool results you have finished with, or "
            "summarize old turns, now."
        )
    if cache.warm:
        return (
            "The prompt cache is warm: an edit now re-sends everything after the edited range "
            "uncached. Unless you must, edit later, when the context nears its budget or the "
            "cache has gone cold."
        )
    return "Nothing is urgent; pin what you will need later, and edit when it pays."


def edit_cost(view: SessionView, first: int) -> int:
    """Tokens of the caller's context from the first event an edit at ``first`` changes to the
    end: what a warm prompt cache loses (the provider re-reads them uncached)."""
    total = 0
    stubs: set[int] = set()
    for event in view.scoped():
        if event.sequence < first or view.is_summary(event) or event.sequence in view.covered_by:
            continue
        hidden = view.hidden_at(event.sequence)
        if hidden is None:
            total += view.tokens(event)
        elif hidden.first not in stubs:
            stubs.add(hidden.first)
            total += len(stub_text(hidden)) // 4
    return total


def expansion(view: SessionView, sequence: int, max_chars: int) -> dict[str, Any]:
    """The expand tool's answer for ``sequence``."""
    event = view.event(sequence)
    hidden = view.hidden_at(sequence)
    events: Sequence[event_pb2.Event]
    if event is not None and view.is_summary(event):
        if not view.visible(event):
            raise _not_yours(sequence)
        found = expand_summary(view.log, sequence)
        events, kind = [*found.subsumed, *found.events], "summary"
        events = sorted(events, key=lambda e: e.sequence)
    elif hidden is not None:
        events = [e for e in view.in_range(hidden.first, hidden.last) if view.visible(e)]
        if not events:
            raise _not_yours(sequence)
        kind = "hidden_range"
    elif event is not None:
        if not view.visible(event):
            raise _not_yours(sequence)
        events, kind = [event], "event"
    else:
        end = view.log[-1].sequence if view.log else 0
        raise EditRefusedError(
            "no_events",
            f"no live event of this session has sequence {sequence} (its events are 1..{end}; "
            "a rewind may have removed it)",
            sequence=sequence,
        )
    text = "\n".join(filter(None, (event_text(e) for e in events)))
    answer: dict[str, Any] = {"ok": True, "sequence": sequence, "kind": kind}
    if events:
        answer["first"] = events[0].sequence
        answer["last"] = events[-1].sequence
        answer["events"] = len(events)
    answer["truncated"] = len(text) > max_chars
    answer["text"] = text[:max_chars]
    return answer


def _not_yours(sequence: int) -> EditRefusedError:
    return EditRefusedError(
        "not_in_context",
        f"event {sequence} belongs to another agent's part of the session",
        sequence=sequence,
    )
