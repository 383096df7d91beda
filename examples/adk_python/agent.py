"""clients/adk_python/README.md, "Example": an ADK agent with a tool and a sub-agent, on the sidecar.

A google-adk ``Runner`` whose session service, memory service and plugin are the contextengine
drop-ins: the session and its events live in the sidecar, every model request's history is the
sidecar's ``BuildContext``, and the sidecar compacts after each invocation (the app's compaction
is configured in the sidecar, not in ADK). The model is scripted (no API key needed): it calls
the weather tool, answers, and hands the currency question to the sub-agent.

With a sidecar running (`make run`): `.venv/bin/python examples/adk_python/agent.py`; set
CONTEXTENGINE_TARGET (host:port) to use another one. tests/docs/test_adk_example.py runs it
against a real `contextengine serve`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncGenerator

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import PrivateAttr

from contextengine.adk import (
    ContextEngineMemoryService,
    ContextEnginePlugin,
    ContextEngineSessionService,
    sidecar_backend,
)
from contextengine.client import ContextEngineClient
from contextengine.v1 import config_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")
APP = "adk_travel"
# ADK advises a context_cache_config for apps that transfer; with the plugin, caching is the
# sidecar's configuration (AppConfig.context_cache_config), never ADK's
logging.getLogger("google_adk").setLevel(logging.ERROR)


def call(name: str, **args: object) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


class ScriptedModel(BaseLlm):
    """Answers each model call with the next scripted content, and counts the history it got."""

    model: str = "scripted"
    script: list[types.Part]
    _history_sizes: list[int] = PrivateAttr(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._history_sizes.append(len(llm_request.contents))  # built by the sidecar
        part = self.script.pop(0)
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=100)
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


def get_weather(city: str) -> dict[str, str]:
    """The weather in a city."""
    return {"city": city, "forecast": "sunny, 24 C"}


def eur_to_usd(amount: float) -> dict[str, float]:
    """Converts euros to dollars."""
    return {"usd": round(amount * 1.08, 2)}


async def main() -> None:
    async with ContextEngineClient(TARGET) as ce:  # compaction is the sidecar's job
        await ce.update_app_config(
            config_pb2.AppConfig(
                app_name=APP,
                events_compaction_config=config_pb2.EventsCompactionConfig(
                    compaction_interval=2, overlap_size=0
                ),
            )
        )

    model = ScriptedModel(
        script=[
            call("get_weather", city="Lisbon"),
            types.Part(text="Sunny and 24 C in Lisbon."),
            call("transfer_to_agent", agent_name="currency"),
            call("eur_to_usd", amount=150),
            types.Part(text="150 EUR is 162.0 USD."),
        ]
    )
    currency = LlmAgent(
        name="currency",
        model=model,
        description="Converts currencies.",
        tools=[eur_to_usd],
    )
    planner = LlmAgent(
        name="planner",
        model=model,
        instruction="You plan trips.",
        tools=[get_weather],
        sub_agents=[currency],
    )

    backend = sidecar_backend(TARGET)  # one connection for the three drop-ins
    sessions = ContextEngineSessionService(backend=backend)
    app = App(name=APP, root_agent=planner, plugins=[ContextEnginePlugin(backend=backend)])
    runner = Runner(
        app=app,
        session_service=sessions,
        memory_service=ContextEngineMemoryService(backend=backend),
    )

    user = f"user-{uuid.uuid4().hex[:8]}"
    session = await sessions.create_session(app_name=APP, user_id=user)
    for question in ("What's the weather in Lisbon?", "How much is 150 EUR in dollars?"):
        message = types.Content(role="user", parts=[types.Part(text=question)])
        async for event in runner.run_async(
            user_id=user, session_id=session.id, new_message=message
        ):
            for part in event.content.parts if event.content and event.content.parts else []:
                if part.text:
                    print(f"{event.author}: {part.text}")
                elif part.function_call:
                    print(f"{event.author} calls {part.function_call.name}")

    async with ContextEngineClient(TARGET) as ce:  # the summary is written in the background
        while (await ce.compaction_status(APP, user, session.id)).running:
            await asyncio.sleep(0.05)
    stored = await sessions.get_session(app_name=APP, user_id=user, session_id=session.id)
    assert stored is not None
    [summary] = [e.actions.compaction for e in stored.events if e.actions.compaction]
    assert summary.compacted_content is not None
    assert summary.compacted_content.parts
    print(f"{len(stored.events)} events in the sidecar, one a summary of the two invocations:")
    print(summary.compacted_content.parts[0].text)
    await runner.close()
    await backend.aclose()


if __name__ == "__main__":
    asyncio.run(main())
