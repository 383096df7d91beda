"""Rich renderables of what the sidecar answers: sessions, events, built contexts, summaries,
compaction status and memories. The CLI prints them, and so does the demo
(``examples/python/demo/demo.py``); both print through :func:`output.make_console`, so piped
output is plain text.

Everything here reads wire messages (``contextengine.v1``) only. Token counts per content are
estimates of this module (characters / 4: the wire carries only the context's total, which the
server counts with its model's tokenizer); the total shown is the server's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from google.protobuf import json_format, struct_pb2
from rich import box
from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from contextengine.client import json_number
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    content_pb2,
    context_service_pb2 as cpb,
    event_pb2,
    memory_service_pb2 as mpb,
    session_pb2,
)

__all__ = [
    "LINE_CHARS",
    "approx_tokens",
    "clip",
    "compaction_status_view",
    "content_line",
    "content_text",
    "context_view",
    "event_kind",
    "event_line",
    "events_table",
    "expansion_view",
    "memory_table",
    "part_text",
    "plain",
    "reframed_author",
    "session_view",
    "sessions_table",
    "summary_text",
    "summary_view",
    "when",
]

#: how much of a text one line shows
LINE_CHARS = 70
#: how many lines of a summary's text a summary block shows
SUMMARY_LINES = 12

#: another agent's turn as the engine reframes it for this agent (``[name] said:`` then quoted)
_REFRAMED = re.compile(
    r"^\[(?P<author>[^\]\n]+)\] (said|thought|called tool|`[^`]*` tool returned)"
)
_QUOTE_MARKERS = re.compile(r"<<<(BEGIN_QUOTED_AGENT_CONTENT|END_QUOTED_AGENT_CONTENT)>>>")

_ROLE_STYLE = {"user": "cyan", "model": "green"}


def when(timestamp: float) -> str:
    """A proto timestamp (seconds since the epoch) as ISO 8601 in UTC, to the millisecond
    (``2026-05-12T10:20:00.000Z``; '-' for none)."""
    if not timestamp:
        return "-"
    moment = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def clip(text: str, width: int = LINE_CHARS) -> str:
    """``text`` on one line, at most ``width`` characters (an ellipsis when cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def plain(value: Any) -> Any:
    """A Struct (or one of its values) as plain data, keys sorted at every depth and integral
    numbers as ints (:func:`json_number`; a Struct holds every number as a float): stable,
    readable lines."""
    if isinstance(value, struct_pb2.Struct):
        return {key: plain(value[key]) for key in sorted(value.keys())}
    if isinstance(value, struct_pb2.ListValue):
        return [plain(item) for item in value]
    if isinstance(value, float):
        return json_number(value)
    return value


def _args(struct: struct_pb2.Struct) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in plain(struct).items())


def _dequoted(text: str) -> str:
    return _QUOTE_MARKERS.sub("", text)


def part_text(part: content_pb2.Part) -> str:
    """A short rendering of one part: its text, ``name(args)`` for a function call,
    ``name → {...}`` for a response, ``<mime, N bytes>`` for inline data, a thought marked."""
    if part.HasField("function_call"):
        call = part.function_call
        return f"{call.name}({_args(call.args)})"
    if part.HasField("function_response"):
        response = part.function_response
        return f"{response.name} → {plain(response.response)}"
    if part.HasField("inline_data"):
        blob = part.inline_data
        return f"<{blob.mime_type or 'application/octet-stream'}, {len(blob.data)} bytes>"
    if part.HasField("file_data"):
        return f"<file {part.file_data.file_uri} {part.file_data.mime_type}>".replace(" >", ">")
    if part.HasField("executable_code"):
        return f"<code {part.executable_code.language}> {part.executable_code.code}"
    if part.HasField("code_execution_result"):
        return f"<code result> {part.code_execution_result.output}"
    if part.HasField("text"):
        text = _dequoted(part.text)
        return f"(thought) {text}" if part.thought else text
    return "<empty part>"


def content_text(content: content_pb2.Content, width: int | None = LINE_CHARS) -> str:
    """The content's parts, rendered and joined with `` / ``, on one line (of at most ``width``
    characters unless it is None)."""
    text = " / ".join(part_text(part) for part in content.parts)
    return " ".join(text.split()) if width is None else clip(text, width)


def approx_tokens(content: content_pb2.Content) -> int:
    """The client's estimate of a content's tokens: characters / 4 of its texts, call arguments
    and responses (as JSON), inline data not counted."""
    chars = 0
    for part in content.parts:
        chars += len(part.text)
        if part.HasField("function_call"):
            chars += len(part.function_call.name)
            chars += len(json_format.MessageToJson(part.function_call.args, indent=None))
        if part.HasField("function_response"):
            chars += len(part.function_response.name)
            chars += len(json_format.MessageToJson(part.function_response.response, indent=None))
    return (chars + 3) // 4


def reframed_author(content: content_pb2.Content) -> str | None:
    """The agent whose turn this user content quotes (``[name] said: ...``), or None."""
    for part in content.parts:
        match = _REFRAMED.match(part.text)
        if match is not None:
            return match.group("author")
    return None


def summary_text(event: event_pb2.Event) -> str:
    return "\n".join(
        part.text for part in event.actions.compaction.compacted_content.parts if part.text
    )


def event_kind(event: event_pb2.Event) -> str:
    """What an event is, in one word: summary, rewind, call, response, message, transfer, state,
    end, error or event."""
    actions = event.actions
    if actions.HasField("compaction"):
        return "summary"
    if actions.HasField("rewind_before_invocation_id"):
        return "rewind"
    parts = event.content.parts
    if any(part.HasField("function_call") for part in parts):
        return "call"
    if any(part.HasField("function_response") for part in parts):
        return "response"
    if parts:
        return "message"
    if actions.HasField("transfer_to_agent"):
        return "transfer"
    if actions.state_delta.fields:
        return "state"
    if actions.end_of_agent:
        return "end"
    if event.HasField("error_code"):
        return "error"
    return "event"


def _event_body(event: event_pb2.Event, width: int | None = LINE_CHARS) -> str:
    actions = event.actions
    if actions.HasField("compaction"):
        compaction = actions.compaction
        covered = f"events #{compaction.start_sequence}-#{compaction.end_sequence}"
        return clip(f"[{covered}] {summary_text(event)}", width or 10**9)
    if actions.HasField("rewind_before_invocation_id"):
        return f"rewind before invocation {actions.rewind_before_invocation_id}"
    pieces = [content_text(event.content, None)] if event.content.parts else []
    if actions.HasField("transfer_to_agent"):
        pieces.append(f"→ transfer to {actions.transfer_to_agent}")
    if actions.state_delta.fields:
        pieces.append(f"state {json.dumps(plain(actions.state_delta), ensure_ascii=False)}")
    if event.HasField("error_code"):
        pieces.append(f"error {event.error_code}: {event.error_message}")
    text = " ".join(" / ".join(pieces).split())
    return text if width is None else clip(text, width)


def _event_tokens(event: event_pb2.Event) -> str:
    usage = event.usage_metadata
    if usage.HasField("prompt_token_count"):
        return f"{usage.prompt_token_count}"
    return ""


def event_line(event: event_pb2.Event, width: int = LINE_CHARS) -> Text:
    """One line for an event: ``#sequence author | what it says`` (a summary as ``(summary)``
    with the range it covers)."""
    author = "(summary)" if event.actions.HasField("compaction") else event.author
    line = Text()
    line.append(f"#{event.sequence:<3} ", style="bold")
    line.append(f"{author:<12}", style=_author_style(event))
    line.append(f" | {_event_body(event, width)}")
    line.no_wrap = True
    line.overflow = "ellipsis"
    return line


def _author_style(event: event_pb2.Event) -> str:
    if event.actions.HasField("compaction"):
        return "magenta"
    return "cyan" if event.author == "user" else "green"


def _table(*columns: str, flex: str, title: str | None = None) -> Table:
    """A table whose columns keep their width on one line, but ``flex``, which takes the rest of
    the console's width and ends with an ellipsis where it is cut."""
    table = Table(
        *columns,
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        expand=True,
    )
    for column in table.columns:
        column.no_wrap = True
        if column.header == flex:
            column.overflow = "ellipsis"
            column.ratio = 1
            column.min_width = 10
    return table


def sessions_table(sessions: Sequence[session_pb2.Session], title: str | None = None) -> Table:
    """One row per session: id, user, created, updated, last sequence, state keys."""
    table = _table(
        "session",
        "user",
        "created",
        "updated",
        "last seq",
        "state keys",
        flex="state keys",
        title=title,
    )
    table.columns[4].justify = "right"
    for session in sessions:
        table.add_row(
            session.id,
            session.user_id,
            when(session.create_time),
            when(session.last_update_time),
            str(session.last_sequence),
            ", ".join(sorted(session.state.keys())) or "-",
        )
    return table


def session_view(session: session_pb2.Session) -> Group:
    """A session's header (ids, times, state) and its events."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("session", session.id)
    facts.add_row("app / user", f"{session.app_name} / {session.user_id}")
    facts.add_row("created", when(session.create_time))
    facts.add_row("updated", when(session.last_update_time))
    facts.add_row("last sequence", str(session.last_sequence))
    state = plain(session.state)
    facts.add_row("state", json.dumps(state, ensure_ascii=False, sort_keys=True) if state else "{}")
    parts: list[RenderableType] = [facts]
    if session.events:
        parts.append(events_table(session.events, title=f"{len(session.events)} events"))
    return Group(*parts)


def edits_note(event: event_pb2.Event) -> str:
    """The edits of the model's context an answer records (context tools), as ``; hides #2-#3,
    pins #4``; "" for none."""
    said: list[str] = []
    for edit in event.context_edits:
        kind = edit.WhichOneof("edit")
        if kind == "summary_sequence":
            said.append(f"wrote summary #{edit.summary_sequence}")
            continue
        span = edit.hide.range if kind == "hide" else edit.pin if kind == "pin" else edit.unpin
        where = f"#{span.first}" if span.first == span.last else f"#{span.first}-#{span.last}"
        said.append(f"{kind}s {where}")
    return "; " + ", ".join(said) if said else ""


def events_table(events: Iterable[event_pb2.Event], title: str | None = None) -> Table:
    """One row per event: sequence, time, author, invocation, kind (with the context edits an
    answer records), prompt tokens (the usage the model reported), what it says (a summary: the
    range it covers)."""
    listed = list(events)
    days = {when(event.timestamp)[:10] for event in listed}
    one_day = len(days) == 1
    if one_day:  # the day once, in the title; the time column shows the time of day
        day = days.pop()
        title = f"{title}, {day}" if title else day
    table = _table(
        "seq",
        "time (UTC)",
        "author",
        "invocation",
        "kind",
        "tokens",
        "content",
        flex="content",
        title=title,
    )
    table.columns[0].justify = "right"
    table.columns[5].justify = "right"
    for event in listed:
        branch = f" [{event.branch}]" if event.HasField("branch") else ""
        stamp = when(event.timestamp)
        table.add_row(
            str(event.sequence),
            stamp[11:] if one_day else stamp,
            Text(event.author + branch, style=_author_style(event)),
            clip(event.invocation_id, 12) or "-",
            event_kind(event) + (" (pinned)" if event.pinned else "") + edits_note(event),
            _event_tokens(event),
            _event_body(event, None),
        )
    return table


def _span(start: float, end: float) -> str:
    """``start → end`` in ISO 8601 (UTC), the end's date left out when it is the start's."""
    first, last = when(start), when(end)
    if first[:10] == last[:10]:
        last = last[11:]
    return f"{first} → {last}"


def _summary_range(event: event_pb2.Event) -> str:
    compaction = event.actions.compaction
    times = ""
    if compaction.HasField("start_timestamp") or compaction.HasField("end_timestamp"):
        times = f", {_span(compaction.start_timestamp, compaction.end_timestamp)}"
    return f"events #{compaction.start_sequence}-#{compaction.end_sequence}{times}"


def summary_view(event: event_pb2.Event, note: str = "", max_lines: int = SUMMARY_LINES) -> Group:
    """A summary event: ``★ summary #N (note): replaces events #a-#b``, the time span it covers
    (the compaction's start and end timestamps) and the first lines of its text."""
    compaction = event.actions.compaction
    head = Text()
    head.append("★ ", style="magenta")
    head.append(f"summary #{event.sequence}", style="bold magenta")
    head.append(f" ({note})" if note else "")
    head.append(f": replaces events #{compaction.start_sequence}-#{compaction.end_sequence}")
    body: list[Text] = []
    if compaction.HasField("start_timestamp") or compaction.HasField("end_timestamp"):
        span = _span(compaction.start_timestamp, compaction.end_timestamp)
        body.append(Text(f"  ↳ {span}", style="dim"))
    lines = summary_text(event).splitlines()
    body.extend(Text(f"  │ {clip(line, 96)}", no_wrap=True) for line in lines[:max_lines])
    if len(lines) > max_lines:
        body.append(Text(f"  │ … ({len(lines) - max_lines} more lines)", style="dim"))
    return Group(head, *body)


def _summary_of(
    content: content_pb2.Content, summaries: Sequence[event_pb2.Event]
) -> event_pb2.Event | None:
    for event in summaries:
        if list(event.actions.compaction.compacted_content.parts) == list(content.parts):
            return event
    return None


def _author_of(
    content: content_pb2.Content, by_parts: Mapping[bytes, event_pb2.Event]
) -> tuple[str, str]:
    """(author, note) of a content: the quoted agent of a reframed turn, else the author of the
    event with the same parts."""
    other = reframed_author(content) if content.role == "user" else None
    if other is not None:
        return other, "reframed"
    event = by_parts.get(_parts_key(content))
    return (event.author if event is not None else "?"), ""


def _parts_key(content: content_pb2.Content) -> bytes:
    return b"".join(part.SerializeToString(deterministic=True) for part in content.parts)


def _reframed_text(content: content_pb2.Content) -> str:
    """Another agent's reframed turn without the preamble and the quote markers:
    ``said: ...``, ``called tool `name` with parameters: ...``."""
    pieces = []
    for part in content.parts:
        match = _REFRAMED.match(part.text)
        if match is not None:
            pieces.append(_dequoted(part.text[len(match.group("author")) + 3 :]))
        elif not part.HasField("text"):
            pieces.append(part_text(part))
    return " ".join(" / ".join(pieces).split())


def content_line(
    index: int,
    content: content_pb2.Content,
    *,
    author: str = "",
    note: str = "",
) -> Text:
    """One line of a context: index, role, author (and a note: reframed), the content's
    estimated tokens, a short rendering of its parts (a reframed turn's without the
    preamble)."""
    role = content.role or "?"
    line = Text()
    line.append(f"{index:>3}  ", style="bold")
    line.append(f"{role:<5}", style=_ROLE_STYLE.get(role, ""))
    who = f"{author} ({note})" if note else author
    line.append(f"  {who:<24}", style="magenta" if author.startswith("summary") else "")
    line.append(f" {approx_tokens(content):>5}  ", style="dim")
    reframed = note == "reframed"
    line.append(_reframed_text(content) if reframed else content_text(content, None))
    line.no_wrap = True
    line.overflow = "ellipsis"
    return line


def context_view(
    response: cpb.BuildContextResponse,
    events: Sequence[event_pb2.Event] = (),
    *,
    title: str = "",
) -> Group:
    """A built context: a header (contents, the server's token estimate, last sequence), one
    line per content (:func:`content_line`), each summary with the range it covers under it, and
    the cacheable prefix boundary as a rule. ``events`` (the session's, from ListEvents) give the
    authors and summary ranges; without them authors show as '?'."""
    summaries = [e for e in events if e.actions.HasField("compaction")]
    by_parts = {_parts_key(e.content): e for e in events if e.content.parts}
    estimate = response.token_estimate
    head = Text()
    head.append(title or "context", style="bold")
    head.append(
        f": {len(response.contents)} contents, {estimate.tokens} tokens ({estimate.counter}), "
        f"up to event #{response.last_sequence}"
    )
    lines: list[RenderableType] = [head]
    if response.compaction_sequence:
        lines.append(
            Text(f"  (summary #{response.compaction_sequence} was appended before building)")
        )
    lines.append(Text(f"{'#':>3}  role   {'author':<24} {'~tok':>5}  parts", style="dim"))
    boundary = response.cacheable_contents_count
    for index, content in enumerate(response.contents):
        if boundary and index == boundary:
            lines.append(_prefix_rule(response))
        summary = _summary_of(content, summaries)
        if summary is not None:
            lines.append(
                content_line(index, content, author=f"summary #{summary.sequence}", note="")
            )
            lines.append(Text(f"{'':>10}↳ covers {_summary_range(summary)}", style="magenta"))
            continue
        author, note = _author_of(content, by_parts)
        lines.append(content_line(index, content, author=author, note=note))
    if boundary and boundary == len(response.contents):
        lines.append(_prefix_rule(response))
    lines.append(
        Text("  ~tok: the client's estimate (characters / 4); the total above is the server's.")
    )
    return Group(*lines)


def _prefix_rule(response: cpb.BuildContextResponse) -> Rule:
    fingerprint = response.fingerprint[:12] or "-"
    return Rule(
        f"cacheable prefix: {response.cacheable_contents_count} contents · "
        f"fingerprint {fingerprint}",
        style="yellow",
        characters="─",
    )


def expansion_view(response: kpb.ExpandSummaryResponse) -> Group:
    """ExpandSummary: the summary, the raw events it replaced and the summaries it subsumes."""
    head = Text(
        f"ExpandSummary(#{response.summary.sequence}): {len(response.events)} raw events and "
        f"{len(response.subsumed_summaries)} earlier summaries it replaces"
    )
    lines: list[RenderableType] = [head]
    lines.extend(_indented(event_line(event)) for event in response.events)
    for event in response.subsumed_summaries:
        line = Text("    subsumes ")
        line.append_text(event_line(event))
        lines.append(line)
    return Group(*lines)


def _indented(line: Text) -> Text:
    out = Text("    ")
    out.append_text(line)
    out.no_wrap = True
    out.overflow = "ellipsis"
    return out


def compaction_status_view(status: kpb.GetCompactionStatusResponse) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("running", "yes" if status.running else "no")
    grid.add_row("attempts", str(status.attempts))
    grid.add_row("summaries", str(status.summaries))
    grid.add_row("failures", str(status.failures))
    grid.add_row("last error", status.last_error or "-")
    grid.add_row("retry after", when(status.retry_after))
    return grid


def memory_table(response: mpb.SearchMemoryResponse, title: str | None = None) -> Table:
    table = _table(
        "score", "session", "seq", "author", "time", "content", flex="content", title=title
    )
    table.columns[0].justify = "right"
    table.columns[2].justify = "right"
    for entry in response.memories:
        table.add_row(
            f"{entry.score:.3f}",
            entry.session_id,
            str(entry.sequence),
            entry.author,
            when(entry.timestamp),
            content_text(entry.content, None),
        )
    return table
