"""A scripted, realistic session for the inspector tests (and the inspector guide's screenshot): two
agents sharing a trip-planning session, a tool call and its response, state changes, a pinned
goal, a compaction summary covering the first two invocations, and a rewind of a change of mind.
"""

from __future__ import annotations

import time
from typing import Any

from contextengine.client import ContextEngineClient
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, event_pb2

APP = "trips"
USER = "alice"
SESSION = "lisbon-may"
#: the same script, for the browser tests
BROWSER_SESSION = "lisbon-may-2"
#: the log starts ten minutes ago (the rewind event is stamped by the server, now)
T0 = float(int(time.time())) - 600.0


def message(
    author: str,
    invocation: str,
    text: str,
    at: float,
    *,
    pinned: bool = False,
    state: dict[str, Any] | None = None,
) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    event = event_pb2.Event(
        author=author,
        invocation_id=invocation,
        timestamp=T0 + at,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
        pinned=pinned,
    )
    if state is not None:
        event.actions.state_delta.CopyFrom(dict_to_struct(state))
    return event


def call(
    author: str, invocation: str, name: str, args: dict[str, Any], at: float
) -> event_pb2.Event:
    event = event_pb2.Event(author=author, invocation_id=invocation, timestamp=T0 + at)
    part = event.content.parts.add()
    event.content.role = "model"
    part.function_call.id = f"call-{name}"
    part.function_call.name = name
    part.function_call.args.CopyFrom(dict_to_struct(args))
    return event


def response(
    author: str, invocation: str, name: str, result: dict[str, Any], at: float
) -> event_pb2.Event:
    event = event_pb2.Event(author=author, invocation_id=invocation, timestamp=T0 + at)
    event.content.role = "user"
    part = event.content.parts.add()
    part.function_response.id = f"call-{name}"
    part.function_response.name = name
    part.function_response.response.CopyFrom(dict_to_struct(result))
    return event


def summary(author: str, start: float, end: float, text: str, at: float) -> event_pb2.Event:
    event = event_pb2.Event(author=author, invocation_id="compaction-1", timestamp=T0 + at)
    compaction = event.actions.compaction
    compaction.start_timestamp = T0 + start
    compaction.end_timestamp = T0 + end
    compaction.compacted_content.role = "model"
    compaction.compacted_content.parts.add(text=text)
    return event


#: the summary covers the events at 2..9 (the pinned goal at 1 stays)
SUMMARY_TEXT = (
    "Alice is planning 3 days in Lisbon in May. Flight found: TAP TP541 BER-LIS on 12 May, "
    "EUR 129. The researcher suggested Hotel Alfama Patio (EUR 95/night); Alice liked it."
)


async def script(client: ContextEngineClient, session: str = SESSION) -> None:
    """Creates ``session`` and appends the scripted log (16 events)."""
    await client.create_session(APP, USER, session, {"traveller": "alice"})
    first = [
        message(
            "user",
            "inv-1",
            "Plan a 3-day trip to Lisbon in May. I fly from Berlin.",
            1,
            pinned=True,
        ),
        message("planner", "inv-1", "Let me look for flights first.", 2),
        call("planner", "inv-1", "search_flights", {"from": "BER", "to": "LIS", "month": "May"}, 3),
        response(
            "planner",
            "inv-1",
            "search_flights",
            {"flights": [{"code": "TP541", "date": "2026-05-12", "eur": 129}]},
            4,
        ),
        message(
            "planner",
            "inv-1",
            "TAP TP541 on 12 May is EUR 129. Shall I hold it?",
            5,
            state={"destination": "Lisbon", "flight": "TP541"},
        ),
        message("user", "inv-2", "Yes. Also find a quiet hotel near Alfama.", 6),
        message("researcher", "inv-2", "Hotel Alfama Patio: quiet, EUR 95 a night, 4.6 stars.", 7),
        message(
            "planner",
            "inv-2",
            "I noted Hotel Alfama Patio for 12-15 May.",
            8,
            state={"hotel": "Alfama Patio"},
        ),
        message("user", "inv-2", "Great, I like it.", 9),
    ]
    await client.append_events(APP, USER, session, first)
    await client.append_event(APP, USER, session, summary("planner", 2, 9, SUMMARY_TEXT, 10))
    await client.append_events(
        APP,
        USER,
        session,
        [
            message("user", "inv-3", "Actually, make it Porto instead.", 11),
            message(
                "planner",
                "inv-3",
                "Switching everything to Porto.",
                12,
                state={"destination": "Porto"},
            ),
        ],
    )
    await client.rewind_session(APP, USER, session, "inv-3")
    await client.append_events(
        APP,
        USER,
        session,
        [
            message("user", "inv-4", "Sorry, Lisbon it is. What should I pack?", 14),
            message(
                "researcher", "inv-4", "May in Lisbon: 17-23 C, a light jacket for evenings.", 15
            ),
            message(
                "planner",
                "inv-4",
                "Pack light layers, comfortable shoes for the hills, and a light jacket.",
                16,
            ),
        ],
    )
