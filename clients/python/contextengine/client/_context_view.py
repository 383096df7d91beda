"""``ContextView``: "contents since" for one agent's view of a session.

A caller that builds the context of the same view again and again (an agent before each model
call) gets, with ``BuildContextRequest.since``, only the contents after the ones it already
holds, while they are still the first ones; the view keeps the last answer, asks with ``since``
and reassembles (TypeScript's and Java's ``ContextView``):

    view = client.context_view("app", "u", "s", agent_name="planner")
    response = await view.build()  # or view.build(invocation_id=..., user_content=...)

``response`` is a BuildContextResponse with the **whole** contents and ``base_contents_count``
0, as a full answer has; only the wire carried the difference. It is the view's own message,
extended in place by its next build: read it (or copy it with ``CopyFrom``) before that, and
never modify it. The answers ``send`` returns are left as they are (a full one is copied, a
delta's contents are appended). The held contents are correct whatever happens on the server (a
rewind, a compaction, another sidecar, a restart): when they are no longer the first contents,
the answer is a full one. A build that fails leaves what is held as it was.

Make one view per (session, agent and view options). :class:`ContextViews` (the ADK plugin's)
keeps a view per request's view, for the last ``max_views`` of them.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from contextengine.v1 import content_pb2, context_service_pb2 as cpb

__all__ = ["ContextView", "ContextViews", "SendBuildContext"]

#: BuildContext as a function of the request (``ContextEngineClient.send_build_context``, or an
#: in-process engine's)
SendBuildContext = Callable[[cpb.BuildContextRequest], Awaitable[cpb.BuildContextResponse]]

#: the response fields besides the contents (replaced by every answer)
_OTHER_FIELDS = tuple(
    f.name for f in cpb.BuildContextResponse.DESCRIPTOR.fields if f.name != "contents"
)


class ContextView:
    """One agent's view of one session, built with "contents since" (see the module
    documentation). ``send`` is BuildContext itself; the address and ``options``
    (:meth:`ContextEngineClient.build_context`'s) are what every :meth:`build` sends."""

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
        #: builds take turns, so that each reassembles from the contents its ``since`` named
        self._lock = asyncio.Lock()
        self._whole: cpb.BuildContextResponse | None = None
        #: contents received over the wire / contents answered (reassembled), since creation
        self.contents_received = 0
        self.contents_answered = 0

    async def build(self, **overrides: Any) -> cpb.BuildContextResponse:
        """The whole context of this view, as ``ContextEngineClient.build_context`` answers it
        without ``since``; ``overrides`` (the invocation's ``invocation_id`` and
        ``user_content``, the prompt-caching fields, ...) go on top of the view's options."""
        from contextengine.client._client import context_request

        options = {**self._options, **overrides}
        return await self.build_request(context_request(*self._address, **options))

    async def build_request(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        """The whole context ``request`` asks for (its ``since`` is replaced by what the view
        holds; ``request`` itself is not changed). Any request may be sent (the sidecar answers
        in full when the held contents are not the prefix of its answer), but only one view's
        requests save anything."""
        asked = cpb.BuildContextRequest()
        asked.CopyFrom(request)
        asked.ClearField("since")
        async with self._lock:
            held = self._whole
            if held is not None:
                asked.since.contents_count = len(held.contents)
                asked.since.contents_digest = held.contents_digest
            answer = await self._send(asked)
            self.contents_received += len(answer.contents)
            base = answer.base_contents_count
            if held is not None and 0 < base != len(held.contents):
                # not an answer to what was held: ask for everything
                asked.ClearField("since")
                answer = await self._send(asked)
                self.contents_received += len(answer.contents)
                base = 0
            # The view's own messages: the answers stay as ``send`` gave them.
            if held is None or base == 0:
                whole = cpb.BuildContextResponse()
                whole.CopyFrom(answer)
            else:
                whole = held
                whole.contents.extend(answer.contents)
                fields: Any = whole  # the names are the message's own (typed as literals)
                for name in _OTHER_FIELDS:
                    fields.ClearField(name)
                rest = cpb.BuildContextResponse()
                rest.CopyFrom(answer)
                rest.ClearField("contents")
                whole.MergeFrom(rest)
                whole.base_contents_count = 0
            self._whole = whole
        self.contents_answered += len(whole.contents)
        return whole

    @property
    def contents(self) -> Sequence[content_pb2.Content]:
        """The whole contents of the last answer (empty before the first build, or after
        :meth:`reset`)."""
        return () if self._whole is None else self._whole.contents

    @property
    def digest(self) -> str:
        """The last answer's ``contents_digest`` ("" before the first build, or after
        :meth:`reset`)."""
        return "" if self._whole is None else self._whole.contents_digest

    def reset(self) -> None:
        """Forgets the last answer: the next build asks for all the contents."""
        self._whole = None


def _view_key(request: cpb.BuildContextRequest) -> bytes:
    """The request's view: its fields that decide the contents (the others only add fields
    beside them), serialized."""
    key = cpb.BuildContextRequest(
        app_name=request.app_name,
        user_id=request.user_id,
        session_id=request.session_id,
        agent_name=request.agent_name,
        include_contents=request.include_contents,
        include_thoughts_from_other_agents=request.include_thoughts_from_other_agents,
    )
    if request.HasField("branch"):
        key.branch = request.branch
    if request.HasField("model"):
        key.model.CopyFrom(request.model)
    if request.HasField("isolation_scope"):
        key.isolation_scope = request.isolation_scope
        # (only a scope's contents depend on the user content: it opens them)
        if request.HasField("user_content"):
            key.user_content.CopyFrom(request.user_content)
    return key.SerializeToString(deterministic=True)


class ContextViews:
    """A :class:`ContextView` per request's view (session, agent, branch, isolation scope,
    ``include_contents``, model, ...), for a caller that builds many (the ADK plugin, as the ADK
    Java drop-in's ``ContextViews``): the last ``max_views`` views are kept, the least recently
    built dropped first. Sound whatever the key: a view only decides what is saved."""

    def __init__(self, send: SendBuildContext, *, max_views: int = 64) -> None:
        if max_views < 1:
            raise ValueError(f"max_views must be at least 1, got {max_views}")
        self._send = send
        self._max_views = max_views
        self._views: OrderedDict[bytes, ContextView] = OrderedDict()

    async def build(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        """The whole context ``request`` asks for, through its view (``request`` is not
        changed)."""
        key = _view_key(request)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = ContextView(
                self._send, request.app_name, request.user_id, request.session_id
            )
        self._views.move_to_end(key)
        while len(self._views) > self._max_views:
            self._views.popitem(last=False)
        return await view.build_request(request)

    @property
    def contents_received(self) -> int:
        """Contents received over the wire by the views kept now."""
        return sum(view.contents_received for view in self._views.values())

    @property
    def contents_answered(self) -> int:
        """Contents answered (reassembled) by the views kept now."""
        return sum(view.contents_answered for view in self._views.values())

    def __len__(self) -> int:
        return len(self._views)

    def reset(self) -> None:
        """Drops every view (the next build of each is a full answer)."""
        self._views.clear()
