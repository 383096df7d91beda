"""Transcription folding (section 6.5): audio transcripts become text turns.

Among events without content, consecutive ``input_transcription`` texts are concatenated and
emitted as one user text turn at the last piece of the run (the piece whose next event carries no
input transcription text); likewise ``output_transcription`` as a model turn. The earlier pieces
of a run disappear. Events with content pass through untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from contextengine.core.context._model import Item, text_part

__all__ = ["fold_transcriptions", "fold_transcriptions_open"]


def _is_fragment(item: Item) -> bool:
    return not item.has_content and bool(item.input_text or item.output_text)


def fold_transcriptions(items: Sequence[Item]) -> list[Item]:
    return fold_transcriptions_open(items)[0]


def fold_transcriptions_open(items: Sequence[Item]) -> tuple[list[Item], bool]:
    """The folded items, and whether an item appended after ``items`` could still change them:
    the last item is a fragment (a next piece would join its run), or a fragment was held back
    and not emitted yet (its next event had an input, resp. output, transcription text but
    content too; ADK keeps its text for the next fragment that ends a run)."""
    if not any(_is_fragment(item) for item in items):
        return list(items), False
    pending_input = ""
    pending_output = ""
    result: list[Item] = []
    last = len(items) - 1
    for index, item in enumerate(items):
        if not item.has_content:
            if item.input_text:
                pending_input += item.input_text
                if index != last and items[index + 1].input_text:
                    continue
                item = _as_text_turn(item, "user", pending_input)
                pending_input = ""
            elif item.output_text:
                pending_output += item.output_text
                if index != last and items[index + 1].output_text:
                    continue
                item = _as_text_turn(item, "model", pending_output)
                pending_output = ""
        result.append(item)
    return result, bool(pending_input or pending_output or _is_fragment(items[-1]))


def _as_text_turn(item: Item, role: str, text: str) -> Item:
    """The event with the accumulated text as its content (ADK: a deep copy with ``content``
    set and the folded transcription removed; nothing reads transcriptions after this step)."""
    return dataclasses.replace(
        item,
        has_content=True,
        role=role,
        parts=(text_part(text),),
        content=None,
        calls=(),
        responses=(),
    )
