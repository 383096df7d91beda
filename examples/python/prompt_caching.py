"""docs/guide/prompt-caching.md: the cache decision of each model call, and what to send.

With a sidecar running (`make run`): `.venv/bin/python examples/python/prompt_caching.py`; set
CONTEXTENGINE_TARGET (host:port) to use another one. tests/docs/test_examples.py runs it and
checks that the guide shows this file from `import asyncio` on.
"""

from __future__ import annotations

import asyncio
import os

from contextengine.client import ContextEngineClient
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as cpb, event_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")
GEMINI = cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_GEMINI, model="gemini-2.0-flash")
INSTRUCTION = content_pb2.Content(parts=[content_pb2.Part(text="You report the weather.")])
TOOLS = [{"function_declarations": [{"name": "get_weather", "description": "A city's weather."}]}]


def said(author: str, invocation: str, text: str) -> event_pb2.Event:
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
                app_name="weather",
                context_cache_config=config_pb2.ContextCacheConfig(ttl_seconds=600),
            )
        )
        s = await ce.create_session("weather", "erin")
        actions = []
        for invocation, question in [("i1", "Weather in Paris?"), ("i2", "And in Rome?")]:
            await ce.append_event("weather", "erin", s.id, said("user", invocation, question))
            context = await ce.build_context(
                "weather",
                "erin",
                s.id,
                agent_name="forecaster",
                model=GEMINI,
                system_instruction=INSTRUCTION,
                tools=TOOLS,
                invocation_id=invocation,
            )
            decision = context.cache_decision
            actions.append(cpb.CacheAction.Name(decision.action))
            metadata = decision.cache_metadata
            if decision.action == cpb.CACHE_ACTION_CREATE:
                # cache contents[:metadata.contents_count] with the instruction and tools for
                # decision.ttl_seconds (google-genai caches.create), then complete the metadata
                metadata.cache_name, metadata.invocations_used = "cachedContents/abc", 1
                metadata.created_at = 1_800_000_000
                metadata.expire_time = metadata.created_at + decision.ttl_seconds
            to_send = context.contents[decision.send_from_index :]  # the rest is in the cache
            print(f"{invocation}: {actions[-1]}, send {len(to_send)} of {len(context.contents)}")
            answer = said("forecaster", invocation, "Sunny, 24 degrees.")
            answer.cache_metadata.CopyFrom(metadata)  # the next decision is made from it
            answer.usage_metadata.prompt_token_count = 3000  # as the model reported it
            await ce.append_event("weather", "erin", s.id, answer)
        assert actions == ["CACHE_ACTION_FINGERPRINT_ONLY", "CACHE_ACTION_CREATE"]
        assert metadata.contents_count == context.cacheable_contents_count == 2


if __name__ == "__main__":
    asyncio.run(main())
