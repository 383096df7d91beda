"""Other agents' turns, reframed as quoted user context (section 6.6).

An event is another agent's reply when :func:`is_other_agent_reply` says so by author, or when
it holds a function response to a call made by another agent (whoever posted the response).
Such an event becomes a user turn: the configured preamble, then one text part per text,
function call and function response part of the original, each fenced between quote markers
(markers inside the quoted text are elided). Media and code parts are passed through as they
are; thoughts only when asked for; everything else is dropped. An event left with nothing but
the preamble disappears.

Function-call arguments and responses are rendered as Python would print the equivalent
``dict`` (ADK prints ``str(dict)``). The protobuf ``Struct`` keeps no key order, so keys are
printed sorted at every level (ADK sorts only the top level of call arguments and otherwise keeps
the order the keys were written in).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf import struct_pb2

from contextengine.core.context._model import Item, PartView, synthetic_item, text_part
from contextengine.core.structs import struct_to_dict

__all__ = [
    "QUOTE_BEGIN",
    "QUOTE_ELIDED",
    "QUOTE_END",
    "fence_other_agents",
    "present_other_agent_turn",
    "python_repr",
    "quote",
]

QUOTE_BEGIN = "<<<BEGIN_QUOTED_AGENT_CONTENT>>>"
QUOTE_END = "<<<END_QUOTED_AGENT_CONTENT>>>"
QUOTE_ELIDED = "<<<ELIDED_MARKER>>>"


def elide(text: str) -> str:
    return text.replace(QUOTE_BEGIN, QUOTE_ELIDED).replace(QUOTE_END, QUOTE_ELIDED)


def quote(text: str) -> str:
    return f"{QUOTE_BEGIN}\n{elide(text)}\n{QUOTE_END}"


def sorted_keys(value: Any) -> Any:
    """``value`` with the keys of every dict inside it in sorted order."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def python_repr(struct: struct_pb2.Struct | None, field_name: str) -> str:
    """``str()`` of the Python dict equal to ``struct`` (a ``google.protobuf.Struct``), keys
    sorted at every level; ``'None'`` when the field is unset (``struct`` is None)."""
    if struct is None:
        return "None"
    return str(sorted_keys(struct_to_dict(struct, field_name)))


def _rendered(view: PartView, author: str, include_thoughts: bool) -> PartView | None:
    part = view.part
    if view.thought:
        if include_thoughts and view.text.strip():
            return text_part(f"[{author}] thought:\n{quote(view.text)}")
        return None
    if view.text.strip():
        return text_part(f"[{author}] said:\n{quote(view.text)}")
    if view.call is not None:
        call = part.function_call
        args = python_repr(call.args if call.HasField("args") else None, "function_call.args")
        return text_part(
            f"[{author}] called tool `{elide(str(view.call.name))}` with parameters:\n"
            + quote(args)
        )
    if view.response is not None:
        response = part.function_response
        result = python_repr(
            response.response if response.HasField("response") else None,
            "function_response.response",
        )
        return text_part(
            f"[{author}] `{elide(str(view.response.name))}` tool returned result:\n" + quote(result)
        )
    if (
        part.HasField("inline_data")
        or part.HasField("file_data")
        or part.HasField("executable_code")
        or part.HasField("code_execution_result")
    ):
        return view
    return None


def present_other_agent_turn(item: Item, *, include_thoughts: bool, preamble: str) -> Item | None:
    """The framed user turn for another agent's event; the event itself when it has no parts,
    None when nothing but the preamble would remain."""
    if not item.has_content or not item.parts:
        return item
    parts = [text_part(preamble)]
    for view in item.parts:
        rendered = _rendered(view, item.author, include_thoughts)
        if rendered is not None:
            parts.append(rendered)
    if len(parts) == 1:
        return None
    return synthetic_item(author="user", timestamp=item.timestamp, role="user", parts=parts)


def fence_other_agents(
    items: Sequence[Item], *, agent_name: str, include_thoughts: bool, preamble: str
) -> list[Item]:
    """Every other-agent event of ``items`` replaced by its framed form (or removed)."""
    call_author: dict[str, str] = {}
    for item in items:
        for call in item.calls:
            if call.id:
                call_author[call.id] = item.author
    result: list[Item] = []
    for item in items:
        # is_other_agent_reply, inlined: this loop runs once per event
        source = item.source
        author = item.author
        if source is not None and source.live_session_id:
            other = author != "user"
        else:
            other = bool(agent_name) and author != agent_name and author != "user"
        if not other and item.responses and item.has_content:
            for response in item.responses:
                caller = call_author.get(response.id) if response.id else None
                if caller and caller != agent_name and caller != "user":
                    other = True
                    break
        if not other:
            result.append(item)
            continue
        framed = present_other_agent_turn(
            item, include_thoughts=include_thoughts, preamble=preamble
        )
        if framed is not None:
            result.append(framed)
    return result
