"""docs/guide/compaction.md: a sliding-window summary written in the background, then expanded.

With a sidecar running (`make run`): `.venv/bin/python examples/python/compaction.py`; set
CONTEXTENGINE_TARGET (host:port) to use another one. tests/docs/test_examples.py runs it and
checks that the guide shows this file from `import asyncio` on.
"""

from __future__ import annotations

import asyncio
import os

from contextengine.client import ContextEngineClient
from contextengine.v1 import config_pb2, content_pb2, event_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")


def turn(author: str, invocation: str, text: str) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        author=author,
        invocation_id=invocation,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )


async def main() -> None:
    async with ContextEngineClient(TARGET) as ce:
        await ce.update_app_config(
            config_pb2.AppConfig(
                app_name="travel",
                events_compaction_config=config_pb2.EventsCompactionConfig(
                    compaction_interval=2, overlap_size=0
                ),
            )
        )
        s = await ce.create_session("travel", "erin")
        for i, (question, answer) in enumerate(
            [
                ("Find me a flight to Lisbon on May 3.", "TP1351 leaves at 09:40 for 182 EUR."),
                (
                    "And a hotel near the river for two nights?",
                    "Memmo Alfama has a room at 160 EUR.",
                ),
            ]
        ):
            await ce.append_event("travel", "erin", s.id, turn("user", f"inv{i}", question))
            await ce.append_event("travel", "erin", s.id, turn("planner", f"inv{i}", answer))
            await ce.end_invocation("travel", "erin", s.id, f"inv{i}")  # returns at once

        while (await ce.compaction_status("travel", "erin", s.id)).running:
            await asyncio.sleep(0.05)  # the summary is written in the background

        context = await ce.build_context("travel", "erin", s.id, agent_name="planner")
        assert len(context.contents) == 1  # one summary instead of four events
        print(context.contents[0].parts[0].text)

        summary_sequence = 5  # the summary was appended after the four events
        expanded = await ce.expand_summary("travel", "erin", s.id, summary_sequence)
        assert [e.sequence for e in expanded.events] == [1, 2, 3, 4]


if __name__ == "__main__":
    asyncio.run(main())
