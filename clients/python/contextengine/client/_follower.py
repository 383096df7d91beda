"""``ContextFollower``: BuildContext that sends only the contents that changed.

A caller that builds the context of the same view again and again (an agent before each model
call) gets, with ``BuildContextRequest.since``, only the contents after the ones it already
holds, while they are still the first ones; the follower keeps the last answer of each view
(session and the options that decide the contents), asks with ``since`` and reassembles:

    follower = client.context_follower()
    response = await follower.build("app", "u", "s", agent_name="planner")

``response`` is a BuildContextResponse with the **whole** contents and ``base_contents_count``
0, as a full answer has; only the wire carried the difference. It is the follower's own
message, extended in place by the next build of the same view: read it (or copy it with
``CopyFrom``) before that, and never modify it. The answers ``send`` returns are left as they
are (a full one is copied, a delta's contents are appended). A view's held contents are correct whatever
happens on the server (a rewind, a compaction, another sidecar, a restart): when they are no
longer the first contents, the answer is a full one. The follower holds the last ``max_views``
views (least recently built dropped first).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from contextengine.v1 import context_service_pb2 as cpb

__all__ = ["ContextFollower", "SendBuildContext"]

#: BuildContext as a function of the request (``ContextEngineClient.send_build_context``, or an
#: in-process engine's)
SendBuildContext = Callable[[cpb.BuildContextRequest], Awaitable[cpb.BuildContextResponse]]

#: the response fields besides the contents (replaced by every answer)
_OTHER_FIELDS = tuple(
    f.name for f in cpb.BuildContextResponse.DESCRIPTOR.fields if f.name != "contents"
)


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


@dataclass
class _View:
    """One view's last whole answer; builds of one view take turns (``lock``), so each
    reassembles from the contents its ``since`` named."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    whole: cpb.BuildContextResponse | None = None


class ContextFollower:
    """Keeps the last answer of each of the last ``max_views`` views and asks BuildContext only
    for what changed (see the module documentation). ``send`` is BuildContext itself."""

    def __init__(self, send: SendBuildContext, *, max_views: int = 64) -> None:
        if max_views < 1:
            raise ValueError(f"max_views must be at least 1, got {max_views}")
        self._send = send
        self._max_views = max_views
        self._views: OrderedDict[bytes, _View] = OrderedDict()
        #: contents received over the wire / contents answered (reassembled), since creation
        self.contents_received = 0
        self.contents_answered = 0

    async def build(
        self, app_name: str, user_id: str, session_id: str, **options: Any
    ) -> cpb.BuildContextResponse:
        """The whole context, as ``ContextEngineClient.build_context(app_name, user_id,
        session_id, **options)`` answers it without ``since``."""
        from contextengine.client._client import context_request

        return await self.follow(context_request(app_name, user_id, session_id, **options))

    async def follow(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        """The whole context ``request`` asks for (its ``since`` is replaced by what the
        follower holds of its view; ``request`` itself is not changed)."""
        key = _view_key(request)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = _View()
        self._views.move_to_end(key)
        while len(self._views) > self._max_views:
            self._views.popitem(last=False)
        asked = cpb.BuildContextRequest()
        asked.CopyFrom(request)
        asked.ClearField("since")
        async with view.lock:
            held = view.whole
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
            # The follower's own messages: the answers stay as ``send`` gave them.
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
            view.whole = whole
        self.contents_answered += len(whole.contents)
        return whole

    def forget(self) -> None:
        """Drops every held view (the next build of each is a full answer)."""
        self._views.clear()
