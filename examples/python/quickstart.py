"""README, "Using it from Python": create a session, append an event.

With a sidecar running (`make run`): `.venv/bin/python examples/python/quickstart.py`; set
CONTEXTENGINE_TARGET (host:port) to use another one. tests/docs/test_examples.py runs it and
checks that the README shows this file from `import asyncio` on.
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


if __name__ == "__main__":
    asyncio.run(main())
