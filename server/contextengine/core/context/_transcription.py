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

__all__ = ["fold_transcriptions"]


def fold_transcriptions(items: Sequence[Item]) -> list[Item]:
    if not any(not item.has_content and (item.input_text or item.output_text) for item in items):
        return list(items)
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
    return result


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
