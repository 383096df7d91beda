"""A session log written by hand, for the context tools' core tests: events get their sequence
and a timestamp equal to it, a small session builds in a few lines."""

from __future__ import annotations

from typing import Any

from contextengine.core.context_tools import Caller, Limits, SessionView
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, event_pb2

AGENT = "agent"


def measure(event: event_pb2.Event) -> int:
    """Tokens as characters / 4 (rounded up) of the event's text and payloads."""
    content = (
        event.actions.compaction.compacted_content
        if event.actions.HasField("compaction")
        else event.content
    )
    return -(-len(content.SerializeToString()) // 4)


class Log:
    """A growing log; ``add`` returns the new event's sequence."""

    def __init__(self) -> None:
        self.events: list[event_pb2.Event] = []

    def add(self, event: event_pb2.Event) -> int:
        event.sequence = len(self.events) + 1
        if not event.timestamp:
            event.timestamp = float(event.sequence)
        if not event.id:
            event.id = f"e{event.sequence}"
        self.events.append(event)
        return event.sequence

    def user(self, text: str, invocation: str) -> int:
        return self.add(
            event_pb2.Event(
                author="user",
                invocation_id=invocation,
                content=content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)]),
            )
        )

    def say(self, text: str, invocation: str, author: str = AGENT, **kw: Any) -> int:
        return self.add(
            event_pb2.Event(
                author=author,
                invocation_id=invocation,
                content=content_pb2.Content(role="model", parts=[content_pb2.Part(text=text)]),
                **kw,
            )
        )

    def call(
        self,
        call_id: str,
        name: str,
        args: dict[str, Any],
        invocation: str,
        author: str = AGENT,
        **kw: Any,
    ) -> int:
        part = content_pb2.Part(
            function_call=content_pb2.FunctionCall(id=call_id, name=name, args=dict_to_struct(args))
        )
        return self.add(
            event_pb2.Event(
                author=author,
                invocation_id=invocation,
                content=content_pb2.Content(role="model", parts=[part]),
                **kw,
            )
        )

    def answer(
        self,
        call_id: str,
        name: str,
        result: dict[str, Any],
        invocation: str,
        author: str = AGENT,
        **kw: Any,
    ) -> int:
        return self.add(answer_event(call_id, name, result, invocation, author, **kw))

    def view(
        self, invocation: str, *, branch: str | None = None, scope: str | None = None
    ) -> SessionView:
        return SessionView(self.events, Caller(AGENT, branch, scope, invocation), measure)


def answer_event(
    call_id: str,
    name: str,
    result: dict[str, Any],
    invocation: str,
    author: str = AGENT,
    **kw: Any,
) -> event_pb2.Event:
    part = content_pb2.Part(
        function_response=content_pb2.FunctionResponse(
            id=call_id, name=name, response=dict_to_struct(result)
        )
    )
    return event_pb2.Event(
        author=author,
        invocation_id=invocation,
        content=content_pb2.Content(role="user", parts=[part]),
        **kw,
    )


BULK = {"rows": ["a fairly long line of tool output that nobody needs later"] * 30}

ON = Limits(enabled=True)


def long_session() -> Log:
    """Three finished turns with bulky tool results, then a current turn (``i4``)."""
    log = Log()
    for turn in ("i1", "i2", "i3"):
        log.user(f"question of {turn}", turn)
        log.call(f"{turn}-c", "lookup", {"q": turn}, turn)
        log.answer(f"{turn}-c", "lookup", BULK, turn)
        log.say(f"answer of {turn}", turn)
    log.user("question of i4", "i4")
    return log
