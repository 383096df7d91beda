"""The Python client's rendered view (clients/python/README.md, "A rendered view"): an agent that
calls an Anthropic model keeps a `RenderedView` of its context, so that each model call gets the
whole rendering while only the new items cross the wire.

With a sidecar running (`make run`) and `anthropic` installed:
`.venv/bin/python examples/python/rendered_view.py` (set ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY,
or point them at any compatible server; CONTEXTENGINE_TARGET for another sidecar).
tests/docs/test_examples.py runs it against a local fake of the API and checks that the guide
shows this file from `import asyncio` on.
"""

from __future__ import annotations

import asyncio
import os

from anthropic import AsyncAnthropic

from contextengine.client import ContextEngineClient, request_part
from contextengine.v1 import content_pb2, context_service_pb2 as cpb, event_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com")


def said(author: str, invocation_id: str, text: str) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        author=author,
        invocation_id=invocation_id,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )


async def main() -> None:
    anthropic = AsyncAnthropic(
        base_url=ANTHROPIC_BASE_URL, api_key=os.environ.get("ANTHROPIC_API_KEY", "-")
    )
    async with ContextEngineClient(TARGET) as ce:
        session = await ce.create_session("rendered-demo", "eve")
        key = ("rendered-demo", "eve", session.id)
        # One view per session, agent and format: it holds the items of its last rendering.
        view = ce.rendered_view(*key, cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES, agent_name="guide")
        for turn, question in enumerate(["Where is Porto?", "And how far is Lisbon?"]):
            invocation = f"inv-{turn}"
            await ce.append_event(*key, said("user", invocation, question))
            # The whole rendering, as a full BuildContext answers it (sent with render.since).
            answer = await view.build(invocation_id=invocation)
            message = await anthropic.messages.create(
                model="claude-sonnet-4-5", max_tokens=1024, **request_part(answer.rendered)
            )
            reply = message.content[0].text
            await ce.append_event(*key, said("guide", invocation, reply))
            print(f"turn {turn}: {len(view.items)} items, the model said: {reply}")
        # The second build got only the items after the first one's: the question and the reply.
        assert (view.items_answered, view.items_received) == (1 + 3, 1 + 2)
        print(f"{view.items_answered} items built, {view.items_received} crossed the wire")


if __name__ == "__main__":
    asyncio.run(main())
