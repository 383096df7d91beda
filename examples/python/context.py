"""docs/guide/context.md: the contents ADK would send for the next model call.

With a sidecar running (`make run`): `.venv/bin/python examples/python/context.py`; set
CONTEXTENGINE_TARGET (host:port) to use another one. tests/docs/test_examples.py runs it and
checks that the guide shows this file from `import asyncio` on.
"""

from __future__ import annotations

import asyncio
import os

from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, context_service_pb2, event_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")


def turn(author: str, invocation: str, text: str) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    part = content_pb2.Part(text=text)
    return event_pb2.Event(
        author=author,
        invocation_id=invocation,
        content=content_pb2.Content(role=role, parts=[part]),
    )


async def main() -> None:
    async with ContextEngineClient(TARGET) as ce:
        s = await ce.create_session("demo", "dave")
        await ce.append_event("demo", "dave", s.id, turn("user", "i1", "Weather in Paris?"))
        await ce.append_event("demo", "dave", s.id, turn("planner", "i1", "Ask the weather agent."))
        await ce.append_event("demo", "dave", s.id, turn("user", "i2", "Actually, Rome."))
        await ce.rewind_session("demo", "dave", s.id, "i2")  # the last turn never happened

        context = await ce.build_context(
            "demo",
            "dave",
            s.id,
            agent_name="weather_agent",
            model=context_service_pb2.ModelIdentity(
                provider=context_service_pb2.MODEL_PROVIDER_GEMINI, model="gemini-2.5-flash"
            ),
        )
        assert [c.role for c in context.contents] == ["user", "user"]
        assert context.contents[1].parts[1].text.startswith("[planner] said:")
        assert context.last_sequence == 4
        estimate = context.token_estimate
        print(estimate.tokens, estimate.counter)  # e.g. 79 tiktoken/cl100k_base


if __name__ == "__main__":
    asyncio.run(main())
