"""What :class:`ContextView` ("contents since") and :class:`RenderedView` ("items since")
share (as Java's ``SinceView``): the view holds its last whole answer, sends the count and digest
of its items (contents, or rendered items) back with every request as the request's "since", and
reassembles every answer, so that a build returns the whole answer while only the items after the
held ones cross the wire.

The whole answer is the view's own message, extended in place by its next build; the answers
``send`` returns are left as they are (a full one is copied, a delta's items are appended). A
build that fails leaves what is held as it was; builds of one view take turns, so that each
reassembles from the items its "since" named.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from contextengine.v1 import context_service_pb2 as cpb

__all__ = ["SendBuildContext", "SinceView"]

#: BuildContext as a function of the request (``ContextEngineClient.send_build_context``, or an
#: in-process engine's)
SendBuildContext = Callable[[cpb.BuildContextRequest], Awaitable[cpb.BuildContextResponse]]


def _at(message: Any, path: Sequence[str]) -> Any:
    """The field of ``message`` at ``path`` (field names, outermost first)."""
    for name in path:
        message = getattr(message, name)
    return message


def _clear_besides(message: Any, path: Sequence[str]) -> None:
    """Clears every field of ``message`` but the one at ``path``, at every level of it."""
    head, rest = path[0], path[1:]
    for field in message.DESCRIPTOR.fields:
        if field.name != head:
            message.ClearField(field.name)
    if rest:
        _clear_besides(getattr(message, head), rest)


class SinceView:
    """The shared part of the views: a subclass names where its items, their digest and the
    answer's base count are in a BuildContextResponse, and how a request asks for what follows
    the held items."""

    #: the items, their digest and the base count of an answer (field names, outermost first)
    _ITEMS: tuple[str, ...]
    _DIGEST: tuple[str, ...]
    _BASE: tuple[str, ...]

    def __init__(
        self,
        send: SendBuildContext,
        app_name: str = "",
        user_id: str = "",
        session_id: str = "",
        **options: Any,
    ) -> None:
        self._send = send
        self._address = (app_name, user_id, session_id)
        self._options = options
        #: builds take turns, so that each reassembles from the items its "since" named
        self._lock = asyncio.Lock()
        self._whole: cpb.BuildContextResponse | None = None
        #: items received over the wire / items answered (reassembled), since creation
        self._received = 0
        self._answered = 0

    def _ask(self, request: cpb.BuildContextRequest, count: int, digest: str | None) -> None:
        """Makes ``request`` (the view's copy) ask for what follows ``count`` held items whose
        digest is ``digest`` (None: for every item)."""
        raise NotImplementedError

    def _check(self, answer: cpb.BuildContextResponse) -> None:
        """Raises when ``answer`` is not what the view asked for (nothing is then kept)."""

    async def build(self, **overrides: Any) -> cpb.BuildContextResponse:
        """The whole answer of this view, as ``ContextEngineClient.build_context`` answers it
        without a "since"; ``overrides`` (the invocation's ``invocation_id`` and
        ``user_content``, the prompt-caching fields, ...) go on top of the view's options."""
        from contextengine.client._client import context_request

        options = {**self._options, **overrides}
        return await self.build_request(context_request(*self._address, **options))

    async def build_request(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        """The whole answer to ``request`` (its "since" is replaced by what the view holds;
        ``request`` itself is not changed). Any request may be sent (the sidecar answers in full
        when the held items are not the prefix of its answer), but only one view's requests
        save anything."""
        asked = cpb.BuildContextRequest()
        asked.CopyFrom(request)
        async with self._lock:
            held = self._whole
            if held is None:
                self._ask(asked, 0, None)
            else:
                self._ask(asked, len(_at(held, self._ITEMS)), _at(held, self._DIGEST))
            answer = await self._send(asked)
            self._check(answer)
            self._received += len(_at(answer, self._ITEMS))
            base = _at(answer, self._BASE)
            if held is not None and 0 < base != len(_at(held, self._ITEMS)):
                # not an answer to what was held: ask for everything
                self._ask(asked, 0, None)
                answer = await self._send(asked)
                self._check(answer)
                self._received += len(_at(answer, self._ITEMS))
                base = 0
            # The view's own messages: the answers stay as ``send`` gave them.
            if held is None or base == 0:
                whole = cpb.BuildContextResponse()
                whole.CopyFrom(answer)
            else:
                whole = held
                _at(whole, self._ITEMS).extend(_at(answer, self._ITEMS))
                _clear_besides(whole, self._ITEMS)
                rest = cpb.BuildContextResponse()
                rest.CopyFrom(answer)
                _at(rest, self._ITEMS[:-1]).ClearField(self._ITEMS[-1])
                _at(rest, self._BASE[:-1]).ClearField(self._BASE[-1])  # 0, as a full answer
                whole.MergeFrom(rest)
            self._whole = whole
        self._answered += len(_at(whole, self._ITEMS))
        return whole

    @property
    def digest(self) -> str:
        """The last answer's digest of its items ("" before the first build, or after
        :meth:`reset`)."""
        return "" if self._whole is None else str(_at(self._whole, self._DIGEST))

    def reset(self) -> None:
        """Forgets the last answer: the next build asks for all of it."""
        self._whole = None

    def _held(self) -> Sequence[Any]:
        """The whole items of the last answer (none before the first build, or after
        :meth:`reset`)."""
        if self._whole is None:
            return ()
        items: Sequence[Any] = _at(self._whole, self._ITEMS)
        return items
