"""A BuildContext rendering as the provider's own request part (plain dicts and lists).

The engine sends each item as one JSON text (``RenderedContext.items``) and the system part as
JSON (``system``); :func:`request_part` parses them into what the provider's SDK takes as
keyword arguments:

* OpenAI Chat Completions: ``{"messages": [...]}`` (the system message is the first one):
  ``client.chat.completions.create(model=..., **part)``;
* OpenAI Responses: ``{"input": [...]}`` and ``"instructions"`` when there is a system
  instruction: ``client.responses.create(model=..., **part)``;
* Anthropic Messages: ``{"messages": [...]}`` and ``"system"`` when there is one:
  ``client.messages.create(model=..., max_tokens=..., **part)``.

A rendering received with ``render.since`` (``base_items_count`` > 0) holds only the items after
the held ones: give :func:`request_part` the held items too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from contextengine.v1 import context_service_pb2 as cpb

__all__ = ["request_part"]

_ITEMS_KEY = {
    cpb.RENDER_FORMAT_OPENAI_CHAT: "messages",
    cpb.RENDER_FORMAT_OPENAI_RESPONSES: "input",
    cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES: "messages",
}
_SYSTEM_KEY = {
    cpb.RENDER_FORMAT_OPENAI_RESPONSES: "instructions",
    cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES: "system",
}


def request_part(
    rendered: cpb.RenderedContext, held: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The provider request part of ``rendered`` (``held``: the items held from an earlier
    answer, when ``rendered.base_items_count`` says some come first). ValueError for a
    rendering of no known format, or held items that do not match ``base_items_count``."""
    if rendered.format not in _ITEMS_KEY:
        raise ValueError(f"no rendering in the answer (format {rendered.format})")
    if len(held) < rendered.base_items_count:
        raise ValueError(
            f"the answer builds on {rendered.base_items_count} held items, {len(held)} given"
        )
    items = [*held[: rendered.base_items_count], *(json.loads(item) for item in rendered.items)]
    part: dict[str, Any] = {_ITEMS_KEY[rendered.format]: items}
    system_key = _SYSTEM_KEY.get(rendered.format)
    if system_key is not None and rendered.system:
        part[system_key] = json.loads(rendered.system)
    return part
