"""docs/guide/renderings.md: one context, three providers' shapes.

With a sidecar running (`make run`) and `openai` and `anthropic` installed:
`.venv/bin/python examples/python/renderings.py` (set OPENAI_BASE_URL / ANTHROPIC_BASE_URL and the
API keys, or point them at any compatible server).
"""

from __future__ import annotations

import asyncio
import os

from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, context_service_pb2 as cpb, event_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")
# Any OpenAI-compatible server and any Anthropic one (`make test` points these at a local fake).
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
SYSTEM = content_pb2.Content(parts=[content_pb2.Part(text="You plan trips.")])


def said(author: str, text: str) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        author=author,
        invocation_id="i1",
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )


async def main() -> None:
    async with ContextEngineClient(TARGET) as ce:
        session = await ce.create_session("renderings-demo", "ann")
        key = ("renderings-demo", "ann", session.id)
        await ce.append_event(*key, said("user", "A weekend in Lisbon, please."))
        await ce.append_event(*key, said("planner", "Friday to Sunday, by train."))
        await ce.append_event(*key, said("user", "And where do we stay?"))

        # The same context, rendered for each provider's SDK: pass it on as keyword arguments.
        chat = await ce.render_context(
            *key, cpb.RENDER_FORMAT_OPENAI_CHAT, agent_name="planner", system_instruction=SYSTEM
        )
        openai = AsyncOpenAI(
            base_url=OPENAI_BASE_URL, api_key=os.environ.get("OPENAI_API_KEY", "-")
        )
        reply = await openai.chat.completions.create(model="gpt-4o", **chat)
        print("OpenAI chat:", reply.choices[0].message.content)

        responses = await ce.render_context(
            *key,
            cpb.RENDER_FORMAT_OPENAI_RESPONSES,
            agent_name="planner",
            system_instruction=SYSTEM,
        )
        answer = await openai.responses.create(model="gpt-4o", **responses)
        print("OpenAI responses:", answer.output_text)

        messages = await ce.render_context(
            *key,
            cpb.RENDER_FORMAT_ANTHROPIC_MESSAGES,
            agent_name="planner",
            system_instruction=SYSTEM,
        )
        anthropic = AsyncAnthropic(
            base_url=ANTHROPIC_BASE_URL, api_key=os.environ.get("ANTHROPIC_API_KEY", "-")
        )
        message = await anthropic.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, **messages
        )
        print("Anthropic:", message.content[0].text)


if __name__ == "__main__":
    asyncio.run(main())
