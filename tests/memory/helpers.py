"""Builders shared by the memory tests."""

from __future__ import annotations

from contextengine.memory.documents import Entry, entry_from_event
from contextengine.v1 import content_pb2, event_pb2


def event(
    text: str = "",
    *,
    sequence: int = 1,
    author: str = "user",
    timestamp: float = 1_000.0,
    event_id: str = "",
    invocation_id: str = "inv-1",
    thought: str = "",
) -> event_pb2.Event:
    """A recorded event with one text part (and a thought part when ``thought`` is set)."""
    parts = []
    if thought:
        parts.append(content_pb2.Part(text=thought, thought=True))
    if text:
        parts.append(content_pb2.Part(text=text))
    return event_pb2.Event(
        id=event_id or f"e{sequence}",
        author=author,
        invocation_id=invocation_id,
        timestamp=timestamp,
        sequence=sequence,
        content=content_pb2.Content(role="user" if author == "user" else "model", parts=parts),
    )


def entry(
    text: str, sequence: int = 1, *, timestamp: float | None = None, author: str = "user"
) -> Entry:
    """The entry of a one-text event (``timestamp`` defaults to 1000 + sequence)."""
    built = entry_from_event(
        event(
            text,
            sequence=sequence,
            timestamp=1_000.0 + sequence if timestamp is None else timestamp,
            author=author,
        )
    )
    assert built is not None, f"{text!r} has no searchable text"
    return built
