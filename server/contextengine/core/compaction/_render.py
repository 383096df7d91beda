"""How a range of events is shown to a summarizer (google-adk 2.13 ``LlmEventSummarizer``).

One line per piece, joined with newlines:

* events without content parts and credential-request events (a call or response named
  ``adk_request_credential``) are skipped: their payload is the user's credential;
* a thought part with text -> ``"{author} (thought): {text}"``, except in a summary event (a
  previous summary's reasoning must not leak into the next one);
* any other part with text -> ``"{author}: {text}"``;
* a function call -> ``"{author} called tool: {name}({args})"`` and a function response ->
  ``"Tool response from {name}: {response}"``, where the payload is written the way Python prints
  a dict (``str(dict)``) and cut after 2000 characters with ``"... [truncated N chars]"``. Text is
  never cut.

The author is the event's author, never the content's role (a rolled-up summary given back to
the summarizer reads ``model: ...``).
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import struct_pb2

from contextengine.core.structs import struct_to_dict
from contextengine.v1 import event_pb2

__all__ = [
    "MAX_TOOL_CONTENT_CHARS",
    "is_credential_request",
    "render_events",
    "truncate_tool_content",
]

#: Tool call arguments and results are cut after this many characters.
MAX_TOOL_CONTENT_CHARS = 2000
_CREDENTIAL_REQUEST = "adk_request_credential"


def truncate_tool_content(text: str) -> str:
    if len(text) <= MAX_TOOL_CONTENT_CHARS:
        return text
    removed = len(text) - MAX_TOOL_CONTENT_CHARS
    return f"{text[:MAX_TOOL_CONTENT_CHARS]}... [truncated {removed} chars]"


def _payload(message: struct_pb2.Struct, present: bool, field: str) -> str:
    # ADK prints the pydantic field: None when absent, else the dict.
    return str(struct_to_dict(message, field)) if present else "None"


def is_credential_request(event: event_pb2.Event) -> bool:
    """Whether the event calls or answers ``adk_request_credential`` (its payload is a
    credential: summarizers never see it)."""
    for part in event.content.parts:
        if part.HasField("function_call") and part.function_call.name == _CREDENTIAL_REQUEST:
            return True
        if (
            part.HasField("function_response")
            and part.function_response.name == _CREDENTIAL_REQUEST
        ):
            return True
    return False


def render_events(events: Sequence[event_pb2.Event]) -> str:
    """The conversation history text a summarizer is given for ``events``."""
    lines: list[str] = []
    for event in events:
        if not event.HasField("content") or not event.content.parts:
            continue
        if is_credential_request(event):
            continue
        is_summary = event.actions.HasField("compaction")
        author = event.author
        for part in event.content.parts:
            if part.thought and part.text:
                if not is_summary:
                    lines.append(f"{author} (thought): {part.text}")
            elif part.text:
                lines.append(f"{author}: {part.text}")
            if part.HasField("function_call"):
                call = part.function_call
                args = _payload(call.args, call.HasField("args"), "args")
                lines.append(f"{author} called tool: {call.name}({truncate_tool_content(args)})")
            if part.HasField("function_response"):
                response = part.function_response
                body = _payload(response.response, response.HasField("response"), "response")
                lines.append(f"Tool response from {response.name}: {truncate_tool_content(body)}")
    return "\n".join(lines)
