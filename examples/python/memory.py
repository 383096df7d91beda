"""docs/guide/memory.md: remember a session, search it, recall it into a later context.

With a sidecar running (`make run`): `.venv/bin/python examples/python/memory.py`; set
CONTEXTENGINE_TARGET (host:port) to use another one. tests/docs/test_examples.py runs it and
checks that the guide shows this file from `import asyncio` on.
"""

from __future__ import annotations

import asyncio
import os
import uuid

from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, event_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")


def said(author: str, text: str) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        author=author,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )


async def main() -> None:
    gina = f"gina-{uuid.uuid4().hex[:8]}"  # memory is per user: a new one per run
    async with ContextEngineClient(TARGET) as ce:
        old = await ce.create_session("chef", gina)
        await ce.append_event("chef", gina, old.id, said("user", "I am allergic to peanuts."))
        await ce.append_event("chef", gina, old.id, said("chef_agent", "Noted: no peanuts, ever."))
        await ce.append_event("chef", gina, old.id, said("user", "私は東京に住んでいます。"))
        added = await ce.add_session_to_memory("chef", gina, old.id)
        assert added.entry_count == 3

        found = await ce.search_memory("chef", gina, "peanut allergy? peanuts")
        assert {m.author for m in found.memories} == {"user", "chef_agent"}
        assert (await ce.search_memory("chef", gina, "東京")).memories[0].sequence == 3

        # Days later, a new conversation: recall what matters for the current message.
        new = await ce.create_session("chef", gina)
        await ce.append_event("chef", gina, new.id, said("user", "A satay sauce with peanuts?"))
        context = await ce.build_context(
            "chef", gina, new.id, agent_name="chef_agent", preload_memory=True
        )
        assert len(context.memory_preload.memories) == 2
        print(context.memory_preload.text)  # for the system instruction, or before the user turn


if __name__ == "__main__":
    asyncio.run(main())
