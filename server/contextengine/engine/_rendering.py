"""BuildContext's renderings for other providers (``render``; docs/design/renderings.md).

:func:`rendered` turns the contents a BuildContext answer covers into the ``RenderedContext``
the request asked for: the items as JSON (one compact text each, the same bytes on every call),
the items since the caller's held ones (a chain digest over the items, as for contents), the
fingerprint of the items that render the cacheable prefix, and the rendering's size. The app's
``RenderingConfig`` words the turns a rendering adds; Anthropic breakpoints go in when the app
caches (``context_cache_config``), with the hour-long cache for a configured lifetime of an hour
or more.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from contextengine.core.errors import invalid
from contextengine.core.prompt_cache import cacheable_count
from contextengine.core.render import (
    DEFAULT_TEXTS,
    AnthropicCache,
    RenderFormat,
    RenderTexts,
    render,
    rendering_tokens,
    system_text,
)
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as pb

__all__ = ["FORMATS", "check_render", "rendered", "texts_of"]

#: the wire's formats, as the core names them
FORMATS: dict[int, RenderFormat] = {
    pb.RENDER_FORMAT_OPENAI_CHAT: RenderFormat.OPENAI_CHAT,
    pb.RENDER_FORMAT_OPENAI_RESPONSES: RenderFormat.OPENAI_RESPONSES,
    pb.RENDER_FORMAT_ANTHROPIC_MESSAGES: RenderFormat.ANTHROPIC_MESSAGES,
}
#: longest ``since.items_digest`` accepted (ours are 64 hex digits)
_MAX_DIGEST_CHARS = 128
_ONE_HOUR = 3600


def check_render(request: pb.RenderRequest) -> None:
    """INVALID_ARGUMENT for an unknown format or a malformed ``since``."""
    if request.format != pb.RENDER_FORMAT_UNSPECIFIED and request.format not in FORMATS:
        raise invalid(
            "INVALID_ARGUMENT", "render.format", f"render.format {request.format} is unknown"
        )
    if not request.HasField("since"):
        return
    if request.since.items_count < 0:
        raise invalid(
            "INVALID_ARGUMENT",
            "render.since.items_count",
            f"render.since.items_count {request.since.items_count} is negative",
        )
    if len(request.since.items_digest) > _MAX_DIGEST_CHARS:
        raise invalid(
            "INVALID_ARGUMENT",
            "render.since.items_digest",
            f"render.since.items_digest has {len(request.since.items_digest)} characters, "
            f"at most {_MAX_DIGEST_CHARS} are accepted",
        )


def texts_of(app: config_pb2.AppConfig | None) -> RenderTexts:
    """The app's words for the turns a rendering adds (the engine's where it sets none)."""
    if app is None or not app.HasField("rendering"):
        return DEFAULT_TEXTS
    config = app.rendering
    return RenderTexts(
        continue_text=(
            config.continue_text
            if config.HasField("continue_text")
            else DEFAULT_TEXTS.continue_text
        ),
        empty_text=config.empty_text if config.HasField("empty_text") else DEFAULT_TEXTS.empty_text,
        missing_tool_result=(
            config.missing_tool_result_text
            if config.HasField("missing_tool_result_text")
            else DEFAULT_TEXTS.missing_tool_result
        ),
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def rendered(
    request: pb.BuildContextRequest,
    contents: Sequence[content_pb2.Content],
    app: config_pb2.AppConfig | None,
) -> pb.RenderedContext:
    """The rendering ``request.render`` asks for, of ``contents`` (the whole contents)."""
    format = FORMATS[request.render.format]
    cacheable = cacheable_count([content.role for content in contents])
    cache = None
    caching = app is not None and app.HasField("context_cache_config")
    if format is RenderFormat.ANTHROPIC_MESSAGES and app is not None and caching:
        ttl = app.context_cache_config.ttl_seconds
        cache = AnthropicCache(cacheable, one_hour=ttl >= _ONE_HOUR)
    rendering = render(
        contents,
        format,
        system=system_text(
            request.system_instruction if request.HasField("system_instruction") else None
        ),
        texts=texts_of(app),
        cache=cache,
    )
    items = [_json(item) for item in rendering.items]
    system = _json(rendering.system) if rendering.system is not None else ""
    digests = _chain(format, items)
    base = _since_base(request.render, digests)
    prefix = rendering.items_of(cacheable)
    tokens, counter = rendering_tokens(
        rendering.items, rendering.system, openai=format is not RenderFormat.ANTHROPIC_MESSAGES
    )
    return pb.RenderedContext(
        format=request.render.format,
        items=items[base:],
        system=system,
        base_items_count=base,
        items_digest=digests[-1].hex(),
        prefix_fingerprint=_fingerprint(format, system, items[:prefix]),
        prefix_items_count=prefix,
        token_estimate=pb.TokenEstimate(tokens=tokens, counter=counter),
    )


def _chain(format: RenderFormat, items: Sequence[str]) -> list[bytes]:
    """The digest of each prefix of the items (``[0]``: none), chained: BLAKE2b-256 of the
    previous digest and the next item's bytes, starting from the format's name."""
    digests = [hashlib.blake2b(format.value.encode(), digest_size=32).digest()]
    for item in items:
        digests.append(hashlib.blake2b(digests[-1] + item.encode(), digest_size=32).digest())
    return digests


def _since_base(render_request: pb.RenderRequest, digests: Sequence[bytes]) -> int:
    if not render_request.HasField("since"):
        return 0
    count = render_request.since.items_count
    if 0 < count < len(digests) and digests[count].hex() == render_request.since.items_digest:
        return count
    return 0


def _fingerprint(format: RenderFormat, system: str, items: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for piece in (format.value, system, *items):
        digest.update(piece.encode())
        digest.update(b"\n")
    return digest.hexdigest()
