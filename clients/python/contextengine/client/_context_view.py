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
the answer is a full one. A build that fails leaves what is held as it was; builds of one view
take turns. The holding, the turns and the reassembly are :class:`SinceView`'s, shared with
:class:`RenderedView` ("items since" for renderings).

Make one view per (session, agent and view options). :class:`ContextViews` (the ADK plugin's)
keeps a view per request's view, for the last ``max_views`` of them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from contextengine.client._since_view import SendBuildContext, SinceView
from contextengine.v1 import content_pb2, context_service_pb2 as cpb

__all__ = ["ContextView", "ContextViews", "SendBuildContext"]


class ContextView(SinceView):
    """One agent's view of one session, built with "contents since" (see the module
    documentation). ``send`` is BuildContext itself; the address and ``options``
    (:meth:`ContextEngineClient.build_context`'s) are what every :meth:`build` sends. ``build``
    and ``build_request`` return the whole BuildContextResponse, ``digest`` is its
    ``contents_digest``, ``reset`` forgets it (:class:`SinceView`, shared with
    :class:`RenderedView`)."""

    _ITEMS = ("contents",)
    _DIGEST = ("contents_digest",)
    _BASE = ("base_contents_count",)

    def _ask(self, request: cpb.BuildContextRequest, count: int, digest: str | None) -> None:
        request.ClearField("since")
        if digest is not None:
            request.since.contents_count = count
            request.since.contents_digest = digest

    @property
    def contents(self) -> Sequence[content_pb2.Content]:
        """The whole contents of the last answer (empty before the first build, or after
        :meth:`reset`)."""
        return self._held()

    @property
    def contents_received(self) -> int:
        """Contents received over the wire since the view was made."""
        return self._received

    @property
    def contents_answered(self) -> int:
        """Contents answered (reassembled) since the view was made."""
        return self._answered


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
