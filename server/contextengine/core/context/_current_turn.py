"""Where the current turn starts, for ``include_contents=NONE`` (section 6.9).

Walking back from the end while tracking tool results the caller posted back (user events with
function responses) whose calls are still ahead in the walk, the turn starts at the latest event
that is not waiting for such a call, is visible (section 6.3), comes from the user or another
agent, is not a direct ``transfer_to_agent`` and is neither a posted-back tool result nor a
tool's sub-branch message. The contents are then those of the full pipeline over the events from
that one on. Rewinds are not applied to the walk (ADK applies them to the slice only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contextengine.core.context._model import Item
from contextengine.core.context._options import ContextOptions
from contextengine.core.context._visibility import (
    call_ids,
    is_other_agent_reply,
    is_tool_sub_branch,
    is_visible,
)
from contextengine.v1 import event_pb2

__all__ = ["current_turn_start", "is_direct_transfer"]

_TRANSFER_CALL_NAME = "transfer_to_agent"


def is_direct_transfer(item: Item) -> bool:
    source = item.source
    if source is not None and source.actions.transfer_to_agent:
        return True
    return any(call.name == _TRANSFER_CALL_NAME for call in item.calls)


def current_turn_start(
    events: Sequence[event_pb2.Event], options: ContextOptions, item_at: Callable[[int], Item]
) -> int | None:
    """Position in ``events`` where the current turn starts; None when there is no such event
    (the context is then empty). ``item_at(i)`` is ``events[i]``'s item; only the events the
    walk reaches are read (and the whole log once, only if a call id has to be looked up)."""
    agent_name = options.agent_name
    branch_memo: dict[str, bool] = {}
    ids: set[str] | None = None
    waiting: set[str] = set()
    for index in range(len(events) - 1, -1, -1):
        item = item_at(index)
        if waiting:
            waiting.difference_update(call.id for call in item.calls if call.id)
        posted_result = item.author == "user" and bool(item.responses)
        if posted_result:
            if ids is None:
                ids = call_ids(item_at(i) for i in range(len(events)))
            waiting.update(
                response.id for response in item.responses if response.id and response.id in ids
            )
        if waiting or posted_result:
            continue
        other = is_other_agent_reply(agent_name, item)
        if item.author != "user" and not other:
            continue
        if is_direct_transfer(item):
            continue
        if not is_visible(
            item,
            branch=options.branch,
            isolation_scope=options.isolation_scope,
            include_thoughts=options.include_thoughts_from_other_agents and other,
            branch_memo=branch_memo,
        ):
            continue
        source = item.source
        assert source is not None
        event_branch = source.branch
        # without a '<name>@<id>' segment a branch is never a tool's sub-branch
        if event_branch and "@" in event_branch:
            if ids is None:
                ids = call_ids(item_at(i) for i in range(len(events)))
            if is_tool_sub_branch(options.branch, event_branch, agent_name, ids):
                continue
        return index
    return None
