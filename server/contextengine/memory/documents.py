"""What of a session is remembered, and the text a preload searches with. Pure.

An event is remembered when it survives every rewind of its session (spec 6.1: a rewound turn
never happened, so it is not recalled either) and its content has searchable text: the text of
its non-thought parts (a model's thoughts are its scratchpad, not the conversation). Function
calls, responses and media are not searchable, but an event that also has text keeps its whole
content in the entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextengine.core.context import live_indices
from contextengine.memory.text import Document, document
from contextengine.store import SessionKey
from contextengine.v1 import content_pb2, event_pb2

__all__ = [
    "Entry",
    "content_text",
    "current_user_text",
    "entry_from_event",
    "joined_terms",
    "joined_text",
    "live_entries",
    "stored_columns",
]


@dataclass(frozen=True)
class Entry:
    """One remembered event: where it comes from, what it said, and how it is found.
    ``content`` may be the recorded event's own message: never mutate it (backends copy or
    serialize what they keep)."""

    sequence: int
    event_id: str
    invocation_id: str
    author: str
    timestamp: float
    content: content_pb2.Content
    doc: Document


def joined_terms(terms: Sequence[str]) -> str:
    """Terms as one stored column: space-separated with a space at each end (so that a LIKE of
    ``% term %`` matches whole terms), or one space for none."""
    return f" {' '.join(terms)} " if terms else " "


def stored_columns(key: SessionKey, entry: Entry) -> tuple[Any, ...]:
    """The columns every memory index stores for an entry, in its tables' order: the session, the
    event's identity, its serialized content, its words and tokens (:func:`joined_terms`)."""
    return (
        key.app_name,
        key.user_id,
        key.session_id,
        entry.sequence,
        entry.event_id,
        entry.invocation_id,
        entry.author,
        entry.timestamp,
        entry.content.SerializeToString(deterministic=True),
        joined_terms(entry.doc.words),
        joined_terms(entry.doc.tokens),
    )


def content_text(content: content_pb2.Content) -> str:
    """The non-thought text parts, each stripped, with newlines as spaces, joined by a space
    (ADK's SqliteMemoryService search text before normalization)."""
    texts = (
        part.text.replace("\n", " ").strip()
        for part in content.parts
        if part.text and not part.thought
    )
    return " ".join(text for text in texts if text)


def content_document(content: content_pb2.Content) -> Document:
    """What an entry with ``content`` is found by."""
    return document(content_text(content))


def entry_from_event(event: event_pb2.Event) -> Entry | None:
    """The entry for ``event`` (a recorded event, with its sequence), or None when it has no
    searchable text. The entry shares the event's content (events never change)."""
    if not event.HasField("content"):
        return None
    doc = content_document(event.content)
    if doc.empty:
        return None
    return Entry(
        sequence=event.sequence,
        event_id=event.id,
        invocation_id=event.invocation_id,
        author=event.author,
        timestamp=event.timestamp,
        content=event.content,
        doc=doc,
    )


def live_entries(
    events: Sequence[event_pb2.Event], skip: frozenset[tuple[int, str]] = frozenset()
) -> tuple[list[int], list[Entry]]:
    """The sequences of the remembered events of a whole log, and the entries of those not in
    ``skip`` (``(sequence, event_id)`` pairs already remembered: events never change, so they
    need no new entry)."""
    sequences: list[int] = []
    entries: list[Entry] = []
    for index in live_indices(events):
        event = events[index]
        if (event.sequence, event.id) in skip:
            sequences.append(event.sequence)
            continue
        entry = entry_from_event(event)
        if entry is not None:
            sequences.append(event.sequence)
            entries.append(entry)
    return sequences, entries


def current_user_text(events: Sequence[event_pb2.Event]) -> str:
    """The text of the latest live event authored by ``user`` that has non-thought text: the
    current user message a preload searches with (ADK: the invocation's user content, non-thought
    text parts joined by a space)."""
    for index in reversed(live_indices(events)):
        event = events[index]
        if event.author != "user" or not event.HasField("content"):
            continue
        text = joined_text(event.content)
        if text:
            return text
    return ""


def joined_text(content: content_pb2.Content) -> str:
    """The non-thought text parts joined by a space, as they are: ADK's preload query from a
    user content, and the text of a memory's preload line."""
    return " ".join(part.text for part in content.parts if part.text and not part.thought)
