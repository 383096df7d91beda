"""The inspector's JSON views over the engine: apps, users, sessions, a session's annotated event
log, the context an agent would get, and the token size of that context over the session's life.

Everything here reads: the context is built by the same ``Engine.build_context`` the gRPC
``BuildContext`` answers with, with ``skip_compaction`` (no token-threshold summary is appended)
and without memory preload; for an app whose prompt cache manages Gemini caches itself the
model's provider is given as ``MODEL_PROVIDER_OTHER`` (the same contents: "adk-" ids stripped, as
for Gemini) so that looking never creates or deletes a cache. Authorization is the caller's
business (``routes``): these functions trust their arguments' addresses.
"""

from __future__ import annotations

import json as json_module
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format, struct_pb2

from contextengine.core.context import (
    compaction_ranges,
    live_indices,
)
from contextengine.core.errors import ContextEngineError, invalid
from contextengine.core.prompt_cache import cacheable_count
from contextengine.core.structs import struct_to_dict
from contextengine.core.validate import check_agent_name, check_branch, check_id
from contextengine.engine import Engine
from contextengine.store import SessionKey
from contextengine.v1 import (
    content_pb2,
    context_service_pb2 as cpb,
    event_pb2,
    session_service_pb2 as spb,
)

__all__ = [
    "PROVIDERS",
    "ContextQuery",
    "InspectorApi",
    "event_kind",
    "render_parts",
]

#: the ``provider`` query parameter -> ModelProvider
PROVIDERS: dict[str, int] = {
    "": cpb.MODEL_PROVIDER_UNSPECIFIED,
    "gemini": cpb.MODEL_PROVIDER_GEMINI,
    "anthropic": cpb.MODEL_PROVIDER_ANTHROPIC,
    "litellm": cpb.MODEL_PROVIDER_LITELLM,
    "openai_responses": cpb.MODEL_PROVIDER_OPENAI_RESPONSES,
    "other": cpb.MODEL_PROVIDER_OTHER,
}
_GEMINI = (cpb.MODEL_PROVIDER_UNSPECIFIED, cpb.MODEL_PROVIDER_GEMINI)
#: longest text a part's rendering keeps (the raw JSON has all of it)
_PREVIEW_CHARS = 600
#: most events a session view returns (the newest; the annotations are over the whole log)
MAX_EVENTS = 5000
#: default and largest number of points of the token plot
DEFAULT_POINTS = 120
MAX_POINTS = 1000


@dataclass(frozen=True)
class ContextQuery:
    """Whose context: the agent, its branch, the model."""

    agent: str = ""
    branch: str | None = None
    provider: int = cpb.MODEL_PROVIDER_UNSPECIFIED
    model: str = ""

    @staticmethod
    def parse(query: dict[str, str]) -> ContextQuery:
        """From the query parameters ``agent``, ``branch``, ``provider``, ``model``
        (INVALID_ARGUMENT naming the parameter when one is unusable)."""
        agent = query.get("agent", "")
        check_agent_name(agent, "agent")
        branch = query.get("branch") or None
        if branch is not None:
            check_branch(branch, "branch")
        provider = query.get("provider", "").lower()
        if provider not in PROVIDERS:
            raise invalid(
                "INVALID_ARGUMENT",
                "provider",
                f"provider {provider!r} is not one of {', '.join(p for p in PROVIDERS if p)}",
            )
        model = query.get("model", "")
        check_id(model, "model", required=False)
        return ContextQuery(agent, branch, PROVIDERS[provider], model)


def event_kind(event: event_pb2.Event) -> str:
    """summary, rewind, function_call, function_response, message, state_delta or other."""
    actions = event.actions
    if actions.HasField("compaction"):
        return "summary"
    if actions.HasField("rewind_before_invocation_id"):
        return "rewind"
    parts = event.content.parts
    if any(part.HasField("function_call") for part in parts):
        return "function_call"
    if any(part.HasField("function_response") for part in parts):
        return "function_response"
    if any(part.HasField("text") or part.HasField("inline_data") for part in parts):
        return "message"
    if actions.HasField("state_delta") and actions.state_delta.fields:
        return "state_delta"
    return "other"


def _short(text: str) -> str:
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


def _struct(message: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as JSON values, whole numbers as integers (``2``, not ``2.0``)."""
    return struct_to_dict(message, "struct")


def _tool_part(kind: str, part: Any, payload: str) -> dict[str, Any]:
    """A function call or response: its name, id and its ``payload`` Struct as short JSON."""
    json = (
        _short(json_module.dumps(_struct(getattr(part, payload)), ensure_ascii=False))
        if part.HasField(payload)
        else "{}"
    )
    return {"kind": kind, "name": part.name, "id": part.id, payload: json}


def render_parts(content: content_pb2.Content) -> list[dict[str, Any]]:
    """A short rendering of each part: its kind and what a reader needs of it."""
    out: list[dict[str, Any]] = []
    for part in content.parts:
        if part.HasField("function_call"):
            out.append(_tool_part("function_call", part.function_call, "args"))
        elif part.HasField("function_response"):
            out.append(_tool_part("function_response", part.function_response, "response"))
        elif part.HasField("text"):
            out.append({"kind": "thought" if part.thought else "text", "text": _short(part.text)})
        elif part.HasField("inline_data"):
            blob = part.inline_data
            out.append({"kind": "blob", "mime_type": blob.mime_type, "bytes": len(blob.data)})
        elif part.HasField("file_data"):
            out.append({"kind": "file", "uri": part.file_data.file_uri})
        else:
            out.append({"kind": "other"})
    return out


def _number(value: float) -> float | None:
    """JSON has no NaN or infinities."""
    return value if math.isfinite(value) else None


class InspectorApi:
    """The JSON views; each raises ContextEngineError (SESSION_NOT_FOUND, INVALID_ARGUMENT ...)
    as the equivalent RPC would."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        #: BuildContext's own counter, so that the inspector's tokens are the RPC's
        self._counter = engine.token_counter

    # -- listings --------------------------------------------------------------------------------

    async def apps(self, limit: int, after: str | None) -> list[str]:
        return await self._engine.store.list_app_names(limit, after)

    async def users(self, app: str, limit: int, after: str | None) -> list[str]:
        check_id(app, "app_name")
        return await self._engine.store.list_user_ids(app, limit, after)

    async def sessions(self, app: str, user: str, limit: int, page_token: str) -> dict[str, Any]:
        listed = await self._engine.list_sessions(
            spb.ListSessionsRequest(
                app_name=app,
                user_id=user,
                page_size=limit,
                page_token=page_token,
            )
        )
        return {
            "sessions": [
                {
                    "id": s.id,
                    "user_id": s.user_id,
                    "last_update_time": s.last_update_time,
                    "create_time": s.create_time,
                    "last_sequence": s.last_sequence,
                }
                for s in listed.sessions
            ],
            "next_page_token": listed.next_page_token,
        }

    # -- one session -----------------------------------------------------------------------------

    async def exists(self, key: SessionKey) -> None:
        """SESSION_NOT_FOUND unless the session exists."""
        await self._engine.get_session(
            spb.GetSessionRequest(
                app_name=key.app_name,
                user_id=key.user_id,
                session_id=key.session_id,
                num_recent_events=0,
            )
        )

    async def session(self, key: SessionKey) -> dict[str, Any]:
        """The session (state, times) and its whole log annotated: kind, tokens, rewound,
        which summary covers an event, what each summary covers, pinned; the agents and
        branches found in it."""
        head = await self._engine.get_session(
            spb.GetSessionRequest(
                app_name=key.app_name,
                user_id=key.user_id,
                session_id=key.session_id,
                num_recent_events=0,
            )
        )
        log = await self._engine.events.log(key)
        events = list(log.events)
        live = set(live_indices(events))
        live_events = [events[i] for i in sorted(live)]
        live_positions = sorted(live)
        ranges = compaction_ranges(live_events)
        surviving = {live_positions[r.position] for r in ranges}
        covered_by: dict[int, int] = {}
        covers: dict[int, list[int]] = {}
        for index, event in enumerate(events):
            if not event.actions.HasField("compaction"):
                continue
            compaction = event.actions.compaction
            start, end = compaction.start_timestamp, compaction.end_timestamp
            covered = [
                other.sequence
                for position, other in zip(live_positions, live_events, strict=True)
                if position != index
                and not other.actions.HasField("compaction")
                and start <= other.timestamp <= end
            ]
            covers[index] = covered
            if index in surviving:
                for sequence in covered:
                    covered_by.setdefault(sequence, event.sequence)
        hidden_by, pinned_by = _edited_by(events, live)
        contents = [
            event.actions.compaction.compacted_content
            if event.actions.HasField("compaction")
            else event.content
            for event in events
        ]
        tokens = self._counter.count_contents(contents)
        shown = events[-MAX_EVENTS:]
        offset = len(events) - len(shown)
        rows = [
            self._event_row(
                event,
                tokens[offset + i],
                # a rewind event hides others; it is not shown as hidden itself
                rewound=(offset + i) not in live
                and not event.actions.HasField("rewind_before_invocation_id"),
                covered_by=covered_by.get(event.sequence),
                covers=covers.get(offset + i),
                surviving=(offset + i) in surviving,
                hidden_by=hidden_by.get(event.sequence),
                pinned_by=pinned_by.get(event.sequence),
            )
            for i, event in enumerate(shown)
        ]
        agents = sorted({e.author for e in events if e.author and e.author != "user"})
        branches = sorted({e.branch for e in events if e.HasField("branch") and e.branch})
        session = head.session
        return {
            "app_name": key.app_name,
            "user_id": key.user_id,
            "session_id": key.session_id,
            "create_time": session.create_time,
            "last_update_time": session.last_update_time,
            "last_sequence": session.last_sequence,
            "state": _struct(session.state),
            "events": rows,
            "events_total": len(events),
            "events_truncated": offset > 0,
            "agents": agents,
            "branches": branches,
            "token_counter": self._counter.name,
        }

    def _event_row(
        self,
        event: event_pb2.Event,
        tokens: int,
        *,
        rewound: bool,
        covered_by: int | None,
        covers: list[int] | None,
        surviving: bool,
        hidden_by: int | None = None,
        pinned_by: int | None = None,
    ) -> dict[str, Any]:
        actions = event.actions
        row: dict[str, Any] = {
            "sequence": event.sequence,
            "id": event.id,
            "author": event.author,
            "invocation_id": event.invocation_id,
            "branch": event.branch if event.HasField("branch") else None,
            "timestamp": _number(event.timestamp),
            "kind": event_kind(event),
            "parts": render_parts(event.content),
            "tokens": tokens,
            "pinned": event.pinned,
            "rewound": rewound,
            "covered_by": covered_by,
            # the model's edits (context tools): the ones this event records, and the answer
            # events whose edits hide or pin it now
            "context_edits": [_edit_row(edit) for edit in event.context_edits],
            "hidden_by": hidden_by,
            "pinned_by": pinned_by,
            "state_delta": _struct(actions.state_delta) if actions.HasField("state_delta") else {},
            "raw": json_format.MessageToDict(event),
        }
        if actions.HasField("rewind_before_invocation_id"):
            row["rewind_before_invocation_id"] = actions.rewind_before_invocation_id
        if actions.HasField("compaction"):
            compaction = actions.compaction
            row["summary"] = {
                "start_timestamp": _number(compaction.start_timestamp),
                "end_timestamp": _number(compaction.end_timestamp),
                "covers": covers or [],
                "surviving": surviving,
                "parts": render_parts(compaction.compacted_content),
            }
        return row

    # -- the context -----------------------------------------------------------------------------

    async def _request(self, key: SessionKey, query: ContextQuery) -> cpb.BuildContextRequest:
        provider = query.provider
        app = await self._engine.resolver.app(key.app_name)
        managed = (
            app is not None
            and app.HasField("context_cache_config")
            and app.context_cache_config.managed_gemini_caches
        )
        if managed and provider in _GEMINI:
            provider = cpb.MODEL_PROVIDER_OTHER  # same contents, and no cache is touched
        request = cpb.BuildContextRequest(
            app_name=key.app_name,
            user_id=key.user_id,
            session_id=key.session_id,
            agent_name=query.agent,
            model=cpb.ModelIdentity(provider=provider, model=query.model),  # type: ignore[arg-type]
            skip_compaction=True,
        )
        if query.branch is not None:
            request.branch = query.branch
        return request

    async def context(self, key: SessionKey, query: ContextQuery) -> dict[str, Any]:
        """The contents ``query``'s agent would get now, each with its role, parts and tokens;
        the summaries among them; the cacheable prefix boundary."""
        request = await self._request(key, query)
        result = await self._engine.build_context(request)
        response = result.response()
        contents = list(response.contents)
        tokens = self._counter.count_contents(contents) if contents else []
        summaries = await self._summary_contents(key)
        if response.cacheable_contents_count or response.HasField("cache_decision"):
            cacheable, rule = response.cacheable_contents_count, "prompt cache"
        else:
            cacheable, rule = cacheable_count([c.role for c in contents]), "ADK rule"
        return {
            "agent": query.agent,
            "branch": query.branch,
            "last_sequence": response.last_sequence,
            "token_estimate": response.token_estimate.tokens,
            "token_counter": response.token_estimate.counter,
            "cacheable_contents_count": cacheable,
            "cacheable_rule": rule,
            "fingerprint": response.fingerprint,
            "contents": [
                {
                    "index": index,
                    "role": content.role,
                    "parts": render_parts(content),
                    "tokens": tokens[index],
                    "summary_of": summaries.get(
                        content_pb2.Content(parts=content.parts).SerializeToString(
                            deterministic=True
                        )
                    ),
                    "raw": json_format.MessageToDict(content),
                }
                for index, content in enumerate(contents)
            ],
        }

    async def _summary_contents(self, key: SessionKey) -> dict[bytes, int]:
        """Each summary's content (its parts, encoded) -> the summary event's sequence: how a
        summary is recognised among the contents (they do not name their events)."""
        log = await self._engine.events.log(key)
        found: dict[bytes, int] = {}
        for event in log.events:
            if event.actions.HasField("compaction"):
                parts = event.actions.compaction.compacted_content.parts
                found[content_pb2.Content(parts=parts).SerializeToString(deterministic=True)] = (
                    event.sequence
                )
        return found

    async def tokens(self, key: SessionKey, query: ContextQuery, points: int) -> dict[str, Any]:
        """The tokens of ``query``'s context after chosen events of the log: every invocation's
        last event, every summary and rewind, thinned evenly to at most ``points`` (summaries,
        rewinds and the last event always kept). One incremental view over the growing log
        (``materialize`` extends it while that is provably the same as rebuilding), so a long
        session costs about one build plus the rebuilds at summaries and rewinds."""
        if not 2 <= points <= MAX_POINTS:
            raise invalid(
                "INVALID_ARGUMENT", "points", f"points must be in [2, {MAX_POINTS}], not {points}"
            )
        request = await self._request(key, query)
        await self.exists(key)
        events, built = await self._engine.context_token_series(
            request, lambda events: _sample(events, points)
        )
        series = [
            {
                "sequence": events[index].sequence,
                "tokens": tokens,
                "kind": event_kind(events[index]),
                "author": events[index].author,
            }
            for index, tokens in built
        ]
        return {
            "agent": query.agent,
            "branch": query.branch,
            "token_counter": self._counter.name,
            "points": series,
            "compactions": [e.sequence for e in events if e.actions.HasField("compaction")],
            "rewinds": [
                e.sequence for e in events if e.actions.HasField("rewind_before_invocation_id")
            ],
        }


def _sample(events: Sequence[event_pb2.Event], points: int) -> list[int]:
    """Indexes of ``events`` to plot (ascending): invocation ends, summaries and rewinds, at most
    ``points`` (keeping the summaries, rewinds and the last event first)."""
    if not events:
        return []
    marks: set[int] = set()
    ends: list[int] = []
    for index, event in enumerate(events):
        actions = event.actions
        if actions.HasField("compaction") or actions.HasField("rewind_before_invocation_id"):
            marks.add(index)
        following = events[index + 1] if index + 1 < len(events) else None
        if following is None or following.invocation_id != event.invocation_id:
            ends.append(index)
    marks.add(len(events) - 1)
    if len(marks) >= points:
        kept = sorted(marks)
        step = len(kept) / points
        return sorted({kept[int(i * step)] for i in range(points)} | {len(events) - 1})
    others = [index for index in ends if index not in marks]
    room = points - len(marks)
    if len(others) > room:
        step = len(others) / room
        others = [others[int(i * step)] for i in range(room)]
    return sorted(marks.union(others))


def bad_parameter(name: str, message: str) -> ContextEngineError:
    return invalid("INVALID_ARGUMENT", name, message)


def _edited_by(
    events: Sequence[event_pb2.Event], live: set[int]
) -> tuple[dict[int, int], dict[int, int]]:
    """By sequence: the answer event whose live edit hides the event, and the one whose live
    ``pin`` pins it (an ``unpin`` after it removes it), in log order."""
    hidden_by: dict[int, int] = {}
    pinned_by: dict[int, int] = {}
    for index, event in enumerate(events):
        if index not in live:
            continue
        for edit in event.context_edits:
            kind = edit.WhichOneof("edit")
            if kind == "hide":
                for sequence in range(edit.hide.range.first, edit.hide.range.last + 1):
                    hidden_by.setdefault(sequence, event.sequence)
            elif kind == "pin":
                for sequence in range(edit.pin.first, edit.pin.last + 1):
                    pinned_by[sequence] = event.sequence
            elif kind == "unpin":
                for sequence in range(edit.unpin.first, edit.unpin.last + 1):
                    pinned_by.pop(sequence, None)
    for sequence in [
        s for s in hidden_by if s > len(events) or events[s - 1].actions.HasField("compaction")
    ]:
        del hidden_by[sequence]  # a summary in a hidden range stays shown
    return hidden_by, pinned_by


def _edit_row(edit: event_pb2.ContextEdit) -> dict[str, Any]:
    """One edit the model made, as the inspector shows it."""
    kind = edit.WhichOneof("edit")
    if kind == "hide":
        return {
            "kind": "hide",
            "first": edit.hide.range.first,
            "last": edit.hide.range.last,
            "stub": edit.hide.stub,
        }
    if kind == "summary_sequence":
        return {"kind": "summary", "summary_sequence": edit.summary_sequence}
    span = edit.pin if kind == "pin" else edit.unpin
    return {"kind": kind or "", "first": span.first, "last": span.last}
