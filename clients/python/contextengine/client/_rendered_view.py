"""``RenderedView``: "rendered items since" for one agent's view of a session in one provider's
format, as :class:`ContextView` is for contents (TypeScript's, Java's and Kotlin's
``RenderedView``).

The view keeps the whole items of its last rendering and sends them back as ``render.since``
(their count and the answer's ``items_digest``), so the sidecar sends only the items after the
ones it still recognises as the first items of the new rendering (all of them after a rewind, a
compaction, or a change of the rendering's tail such as its continuation turn); it reassembles
every answer:

    view = client.rendered_view("app", "u", "s", cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES,
                                agent_name="planner")
    answer = await view.build()  # or view.build(invocation_id=..., system_instruction=...)
    part = request_part(answer.rendered)  # anthropic.messages.create(..., **part)

``answer`` is a BuildContextResponse whose ``rendered`` holds the **whole** items with
``base_items_count`` 0, as a full BuildContext with ``render`` answers; only the wire carried the
difference. It is the view's own message, extended in place by its next build: read it (or copy
it) before that, and never modify it. A build that fails leaves what is held as it was; builds of
one view take turns (:class:`SinceView`, shared with :class:`ContextView`).

Make one view per (session, agent and view options, format).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from contextengine.client._errors import ContextEngineError
from contextengine.client._since_view import SendBuildContext, SinceView
from contextengine.v1 import context_service_pb2 as cpb

__all__ = ["RenderedView"]

#: the formats a context renders as
_FORMATS = frozenset(
    value.number
    for value in cpb.RenderFormat.DESCRIPTOR.values
    if value.number != cpb.RENDER_FORMAT_UNSPECIFIED
)


def _name(format: int) -> str:
    """The format's name, or its number when this client does not know it."""
    try:
        return cpb.RenderFormat.Name(format)  # type: ignore[arg-type]
    except ValueError:
        return str(format)


class RenderedView(SinceView):
    """One agent's view of one session rendered as ``format`` (see the module documentation).
    ``send`` is BuildContext itself; the address and ``options``
    (:meth:`ContextEngineClient.build_context`'s, without ``render``) are what every
    :meth:`build` sends. ``build`` and ``build_request`` return the whole BuildContextResponse
    (a request's own ``render`` and ``since`` are replaced), ``digest`` is its
    ``rendered.items_digest``, ``reset`` forgets it. ValueError for a format that is no
    rendering's."""

    _ITEMS = ("rendered", "items")
    _DIGEST = ("rendered", "items_digest")
    _BASE = ("rendered", "base_items_count")

    def __init__(
        self,
        send: SendBuildContext,
        *address: str,
        format: cpb.RenderFormat.ValueType,
        **options: Any,
    ) -> None:
        """``address``: the app, the user and the session, as :class:`ContextView`'s."""
        if format not in _FORMATS:
            raise ValueError(f"a rendering needs a format, not {format}")
        super().__init__(send, *address, **options)
        self.format = format

    def _ask(self, request: cpb.BuildContextRequest, count: int, digest: str | None) -> None:
        request.ClearField("since")
        request.render.Clear()
        request.render.format = self.format
        if digest is not None:
            request.render.since.items_count = count
            request.render.since.items_digest = digest

    def _check(self, answer: cpb.BuildContextResponse) -> None:
        """UNIMPLEMENTED (client side) for an answer without this view's rendering."""
        if answer.rendered.format != self.format:
            got = (
                _name(answer.rendered.format)
                if answer.HasField("rendered")
                else "none (a sidecar older than renderings?)"
            )
            raise ContextEngineError(
                grpc.StatusCode.UNIMPLEMENTED,
                f"asked for a {_name(self.format)} rendering, the sidecar answered {got}",
                "",
                {},
            )

    @property
    def items(self) -> Sequence[str]:
        """The whole items of the last rendering, as the JSON texts the sidecar sent (empty
        before the first build, or after :meth:`reset`)."""
        return self._held()

    @property
    def items_received(self) -> int:
        """Items received over the wire since the view was made."""
        return self._received

    @property
    def items_answered(self) -> int:
        """Items answered (reassembled) since the view was made."""
        return self._answered
