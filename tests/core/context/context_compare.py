"""The two sides of the context parity check, and how they are compared.

* **Reference**: :func:`adk_contents` calls google-adk 2.13's own functions
  (``google.adk.flows.llm_flows.context._contents._get_contents`` for ``include_contents='default'``,
  ``_get_current_turn_contents`` for ``'none'``) with the parameters ADK's contents request
  processor would pass for the view. As in that processor, other agents' thoughts are never
  included for ``'none'``.
* **Engines**: every entry of :data:`ENGINES` turns the same session (converted to
  ``contextengine.v1.Event`` with ``json_format``, sequences 1, 2, 3, ...) and the view's
  :class:`ContextOptions` into a list of ``contextengine.v1.Content``. The ``pure`` engine calls
  ``contextengine.core.context.build_contents`` directly; the ``grpc`` engine (``grpc_engine``)
  appends the events to a fresh session of a real sidecar and calls ``BuildContext``.

Every engine is also judged *as the log grows* (:data:`GrowFn`): the events are given one at a
time and, after every one, the engine answers for every view, and each answer must equal ADK's
on that prefix. ``pure`` answers twice per step, from its incremental view
(``core.context.incremental.materialize``, extended step by step as the service does) and from a
fresh build; ``grpc`` appends each event to one session (one AppendEvents per event) and calls
BuildContext for every view after each append, so the service's cached views are extended as in
a running agent (and, at the last step, also answers from a fresh session given the whole log in
one AppendEvents). The contexts built before every model call are what a model sees, not only the
final one.

Adding an engine: write one blocking function with the :data:`EngineFn` signature and append
``Engine("<name>", <function>)`` to :data:`ENGINES`; every differential test is parametrized over
that tuple, so nothing else changes. An engine is called once per view with the whole session;
it must not modify the events it is given. Without a ``grow`` function, it is judged as the log
grows by calling it on every prefix. If it needs the ADK JSON instead of protos,
``contextengine.core.adk_json.event_to_adk_json`` turns the events back.

Comparison: ADK's ``content.model_dump(mode='json', exclude_none=True)`` against
``json_format.MessageToDict(ours, preserving_proto_field_name=True)``, normalising only what the
two JSON encoders spell differently for the same value: integral numbers (``1`` vs ``1.0``; Struct
numbers are doubles) and ``bytes`` fields (google-genai writes URL-safe base64, protobuf standard
base64; both are decoded to bytes).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from google.adk.events.event import Event
from google.adk.flows.llm_flows.context._contents import (
    _get_contents,
    _get_current_turn_contents,
)
from google.adk.flows.llm_flows.context._fencing import OTHER_AGENT_CONTEXT_PREAMBLE
from google.genai import types
from google.protobuf import json_format

from contextengine.core.context import ContextOptions, IncludeContents, build_contents
from contextengine.core.context.incremental import View as IncrementalView, materialize
from contextengine.core.tokens import CharsPerFourCounter
from contextengine.v1 import content_pb2, event_pb2

from .context_strategies import T0, View

__all__ = [
    "ENGINES",
    "Engine",
    "EngineFn",
    "GrowFn",
    "Outcome",
    "adk_contents",
    "describe_contents",
    "describe_events",
    "describe_view",
    "grow",
    "normalise",
    "options_for",
    "outcome_of",
    "outcome_of_call",
    "to_proto_events",
]

#: An engine: the session's events (proto, in log order) and the options -> the model contents.
EngineFn = Callable[[Sequence[event_pb2.Event], ContextOptions], Sequence[content_pb2.Content]]


def _accepts_everything(events: Sequence[event_pb2.Event]) -> bool:
    return True


def _has_authors(events: Sequence[event_pb2.Event]) -> bool:
    # The service rejects author-less events (INVALID_ARGUMENT); ADK accepts them.
    return all(event.author for event in events)


#: One answer of an engine for one view at one step: how it was obtained, and what it was.
Answer = tuple[str, "Outcome"]

#: An engine as the log grows: given the session's events and the views' options, it yields,
#: after appending each event (in order, one per step), for every view, one or more answers.
GrowFn = Callable[
    [Sequence[event_pb2.Event], Sequence[ContextOptions]], Iterator[list[list[Answer]]]
]


@dataclass(frozen=True)
class Engine:
    name: str
    build: EngineFn
    #: whether the engine's input contract admits the session (else it is not compared)
    accepts: Callable[[Sequence[event_pb2.Event]], bool] = _accepts_everything
    #: how it answers as the log grows (None: ``build`` on every prefix)
    grow: GrowFn | None = None

    def __str__(self) -> str:
        return self.name


def _pure(events: Sequence[event_pb2.Event], options: ContextOptions) -> list[content_pb2.Content]:
    return list(build_contents(list(events), options))


_COUNTER = CharsPerFourCounter()


def _pure_grow(
    events: Sequence[event_pb2.Event], options: Sequence[ContextOptions]
) -> Iterator[list[list[Answer]]]:
    """Per step and view: the incremental view (extended from the previous step's, as the
    service does) and a fresh build of the prefix."""
    previous: list[IncrementalView | None] = [None] * len(options)
    for step in range(1, len(events) + 1):
        prefix = list(events[:step])
        answers: list[list[Answer]] = []
        for index, view_options in enumerate(options):
            try:
                view = materialize(prefix, view_options, _COUNTER, previous[index])
            except Exception as exc:
                previous[index] = None
                incremental = Outcome(error=f"{type(exc).__name__}: {exc}")
            else:
                previous[index] = view
                incremental = outcome_of(view.contents)
            fresh = outcome_of_call(partial(build_contents, prefix, view_options))
            answers.append([("incremental", incremental), ("fresh", fresh)])
        yield answers


def _grpc(events: Sequence[event_pb2.Event], options: ContextOptions) -> list[content_pb2.Content]:
    from .grpc_engine import build_over_grpc

    return build_over_grpc(events, options)


def _grpc_grow(
    events: Sequence[event_pb2.Event], options: Sequence[ContextOptions]
) -> Iterator[list[list[Answer]]]:
    from .grpc_engine import grow_over_grpc

    for step, answers in enumerate(grow_over_grpc(events, options), start=1):
        if step == len(events):
            # and the whole log in one AppendEvents to a fresh session (the first BuildContext
            # of a session materializes in full)
            for view_answers, view_options in zip(answers, options, strict=True):
                fresh = outcome_of_call(partial(_grpc, events, view_options))
                view_answers.append(("one append, fresh", fresh))
        yield answers


#: Every engine the differential tests check against ADK.
ENGINES: tuple[Engine, ...] = (
    Engine("pure", _pure, grow=_pure_grow),
    Engine("grpc", _grpc, _has_authors, grow=_grpc_grow),
)


def grow(
    engine: Engine, events: Sequence[event_pb2.Event], options: Sequence[ContextOptions]
) -> Iterator[list[list[Answer]]]:
    """``engine``'s answers after each appended event (see :data:`GrowFn`)."""
    if engine.grow is not None:
        yield from engine.grow(events, options)
        return
    for step in range(1, len(events) + 1):
        prefix = list(events[:step])
        yield [[("fresh", outcome_of_call(partial(engine.build, prefix, o)))] for o in options]


# --------------------------------------------------------------------------------- the two sides


def to_proto_events(events: Sequence[Event]) -> list[event_pb2.Event]:
    """ADK events -> ``contextengine.v1.Event`` (the documented conversion), sequence 1, 2, ..."""
    converted = []
    for sequence, event in enumerate(events, start=1):
        message = json_format.Parse(event.model_dump_json(exclude_none=True), event_pb2.Event())
        message.sequence = sequence
        converted.append(message)
    return converted


def options_for(view: View) -> ContextOptions:
    """The engine options for ``view``, with ADK's own other-agent preamble."""
    user_content = None
    if view.user_content is not None:
        user_content = json_format.Parse(
            view.user_content.model_dump_json(exclude_none=True), content_pb2.Content()
        )
    return ContextOptions(
        agent_name=view.agent_name,
        branch=view.branch,
        isolation_scope=view.isolation_scope,
        include_contents=IncludeContents(view.include_contents),
        preserve_function_call_ids=view.preserve_function_call_ids,
        include_thoughts_from_other_agents=view.include_thoughts_from_other_agents,
        other_agent_preamble=OTHER_AGENT_CONTEXT_PREAMBLE,
        user_content=user_content,
    )


def adk_contents(events: Sequence[Event], view: View) -> list[types.Content]:
    """What google-adk 2.13 sends the model for ``view`` (its contents request processor)."""
    if view.include_contents == "default":
        return _get_contents(
            view.branch,
            list(events),
            view.agent_name,
            preserve_function_call_ids=view.preserve_function_call_ids,
            isolation_scope=view.isolation_scope,
            user_content=view.user_content,
            include_thoughts_from_other_agents=view.include_thoughts_from_other_agents,
        )
    return _get_current_turn_contents(
        view.branch,
        list(events),
        view.agent_name,
        preserve_function_call_ids=view.preserve_function_call_ids,
        isolation_scope=view.isolation_scope,
        user_content=view.user_content,
        include_thoughts_from_other_agents=False,
    )


@dataclass(frozen=True)
class Outcome:
    """One side's answer: normalised contents, or the exception it raised."""

    contents: list[Any] | None = None
    error: str | None = None

    def __str__(self) -> str:
        if self.error is not None:
            return f"raised {self.error}"
        return describe_contents(self.contents or [])


def adk_outcome(events: Sequence[Event], view: View) -> Outcome:
    try:
        contents = adk_contents(events, view)
    except Exception as exc:
        return Outcome(error=f"{type(exc).__name__}: {exc}")
    return Outcome(
        contents=[normalise(c.model_dump(mode="json", exclude_none=True)) for c in contents]
    )


def outcome_of(contents: Sequence[content_pb2.Content]) -> Outcome:
    return Outcome(
        contents=[
            normalise(json_format.MessageToDict(c, preserving_proto_field_name=True))
            for c in contents
        ]
    )


def outcome_of_call(build: Callable[[], Sequence[content_pb2.Content]]) -> Outcome:
    try:
        contents = build()
    except Exception as exc:
        return Outcome(error=f"{type(exc).__name__}: {exc}")
    return outcome_of(contents)


def engine_outcome(
    engine: Engine, events: Sequence[event_pb2.Event], options: ContextOptions
) -> Outcome:
    return outcome_of_call(lambda: engine.build(events, options))


# ---------------------------------------------------------------------------------- normalising

#: Fields holding ``bytes`` (base64 in JSON), by the key of the object that holds them.
_BYTES_FIELDS = {"thought_signature": None, "data": "inline_data"}


def _decode_base64(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)


def normalise(value: Any, *, parent: str | None = None) -> Any:
    """JSON ``value`` with integral numbers as ``int`` and base64 ``bytes`` fields decoded."""
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if (
                key in _BYTES_FIELDS
                and _BYTES_FIELDS[key] in (None, parent)
                and isinstance(item, str)
            ):
                result[key] = _decode_base64(item)
            else:
                result[key] = normalise(item, parent=key)
        return result
    if isinstance(value, list):
        return [normalise(item, parent=parent) for item in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


# ------------------------------------------------------------------------------ readable output


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    text = repr(text) if isinstance(value, str) else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_part(part: types.Part) -> str:
    bits = []
    if part.thought:
        bits.append("thought")
    if part.thought_signature:
        bits.append(f"sig={part.thought_signature!r}")
    if part.text is not None:
        bits.append(f"text {_short(part.text)}")
    if part.function_call:
        fc = part.function_call
        bits.append(f"FC({fc.id} {fc.name} {_short(fc.args)})")
    if part.function_response:
        fr = part.function_response
        bits.append(f"FR({fr.id} {fr.name} {_short(fr.response)})")
    if part.inline_data:
        bits.append(f"blob({part.inline_data.mime_type})")
    if part.file_data:
        bits.append(f"file({part.file_data.file_uri})")
    if part.executable_code:
        bits.append("code")
    if part.code_execution_result:
        bits.append("code_result")
    if part.tool_call:
        bits.append("server_tool_call")
    if part.tool_response:
        bits.append("server_tool_response")
    return " ".join(bits) or "<empty part>"


def _describe_content(content: types.Content | None) -> str:
    if content is None:
        return "-"
    parts = " | ".join(_describe_part(p) for p in content.parts or [])
    return f"{content.role or '<no role>'}: {parts or '<no parts>'}"


def describe_events(events: Sequence[Event]) -> str:
    """One compact line per event (timestamps as offsets from ``T0``)."""
    lines = []
    for index, event in enumerate(events):
        head = (
            f"[{index}] t=+{event.timestamp - T0:g} inv={event.invocation_id or '-'}"
            f" by={event.author} br={event.branch}"
        )
        if event.isolation_scope is not None:
            head += f" iso={event.isolation_scope!r}"
        if event.live_session_id:
            head += f" live={event.live_session_id}"
        if event.node_info.path:
            head += f" node={event.node_info.path}"
        tail = []
        if event.content is not None:
            tail.append(_describe_content(event.content))
        if event.long_running_tool_ids:
            tail.append(f"lr={sorted(event.long_running_tool_ids)}")
        actions = event.actions
        if actions.rewind_before_invocation_id:
            tail.append(f"REWIND->{actions.rewind_before_invocation_id}")
        if actions.compaction:
            c = actions.compaction
            tail.append(
                f"COMPACTION[+{c.start_timestamp - T0:g}..+{c.end_timestamp - T0:g}]"
                f" {_describe_content(c.compacted_content)}"
            )
        if actions.requested_tool_confirmations:
            tail.append(f"confirm={sorted(actions.requested_tool_confirmations)}")
        if actions.requested_auth_configs:
            tail.append(f"auth={sorted(actions.requested_auth_configs)}")
        if actions.transfer_to_agent:
            tail.append(f"transfer->{actions.transfer_to_agent}")
        if actions.state_delta:
            tail.append(f"state={_short(actions.state_delta)}")
        if event.input_transcription:
            tail.append(f"in_transcript={event.input_transcription.text!r}")
        if event.output_transcription:
            tail.append(f"out_transcript={event.output_transcription.text!r}")
        if event.error_code:
            tail.append(f"error={event.error_code}")
        lines.append(head + " :: " + ("  ".join(tail) or "<nothing>"))
    return "\n".join(lines)


def describe_view(view: View) -> str:
    return (
        f"agent={view.agent_name!r} branch={view.branch!r} scope={view.isolation_scope!r}"
        f" include_contents={view.include_contents}"
        f" preserve_ids={view.preserve_function_call_ids}"
        f" other_thoughts={view.include_thoughts_from_other_agents}"
        f" user_content={_describe_content(view.user_content) if view.user_content else None}"
    )


def describe_contents(contents: Sequence[Any]) -> str:
    """Normalised contents, one JSON line each (the preamble abbreviated)."""
    if not contents:
        return "  (no contents)"
    lines = []
    for index, content in enumerate(contents):
        text = json.dumps(content, ensure_ascii=False, default=repr)
        text = text.replace(json.dumps(OTHER_AGENT_CONTEXT_PREAMBLE)[1:-1], "<PREAMBLE>")
        lines.append(f"  {index}: {text}")
    return "\n".join(lines)
