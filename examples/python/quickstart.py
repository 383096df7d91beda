"""The Python client's first example (clients/python/README.md, "A first context"): create a
session, append the user's message, fetch the agent's context.

With a sidecar running (`make run`): `.venv/bin/python examples/python/quickstart.py`; set
CONTEXTENGINE_TARGET (host:port) to use another one. tests/docs/test_examples.py runs it and
checks that the guide shows this file from `import asyncio` on.
"""

from __future__ import annotations

import asyncio
import os

from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, event_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")


async def main() -> None:
    async with ContextEngineClient(TARGET) as ce:
        # No session id given: the sidecar picks a fresh UUID, so every run has its own session.
        session = await ce.create_session("demo", "bob", state={"user:name": "Bob"})
        event = event_pb2.Event(
            author="user",
            invocation_id="inv-1",
            content=content_pb2.Content(role="user", parts=[content_pb2.Part(text="hello")]),
        )
        recorded = await ce.append_event("demo", "bob", session.id, event)
        assert recorded.event.sequence == 1
        print(f"session {session.id}: event {recorded.event.id} is sequence 1")

        # Before each model call: the contents the agent's model gets (google-adk's rules).
        context = await ce.build_context("demo", "bob", session.id, agent_name="greeter")
        assert [c.role for c in context.contents] == ["user"]
        count, last = len(context.contents), context.last_sequence
        print(f"context of greeter: {count} content, up to event {last}")


if __name__ == "__main__":
    asyncio.run(main())
