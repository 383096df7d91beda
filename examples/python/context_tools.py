"""docs/guide/context-tools.md: the model hides a tool result it is done with, then reads it back.

With a sidecar running (`make run`): `.venv/bin/python examples/python/context_tools.py`. The
model's calls are written out here as a model would send them; with a real model, give it
`await tools.declarations("openai_chat")` (or "genai", "openai_responses", "anthropic") as its
tools and run each call it makes the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from google.protobuf import struct_pb2

from contextengine.client import ContextEngineClient
from contextengine.v1 import config_pb2, content_pb2, event_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")
APP = "tools-demo"


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


def event(author: str, invocation: str, part: content_pb2.Part) -> event_pb2.Event:
    # the model's calls and text are "model" contents; the user's text and tool results "user"
    role = "model" if part.HasField("function_call") or (part.text and author != "user") else "user"
    return event_pb2.Event(
        author=author,
        invocation_id=invocation,
        content=content_pb2.Content(role=role, parts=[part]),
    )


def call(call_id: str, name: str, args: dict[str, Any]) -> content_pb2.Part:
    fc = content_pb2.FunctionCall(id=call_id, name=name, args=struct(args))
    return content_pb2.Part(function_call=fc)


async def main() -> None:
    async with ContextEngineClient(TARGET) as ce:
        # The tools are off unless the app (or the session) turns them on.
        await ce.update_app_config(
            config_pb2.AppConfig(
                app_name=APP,
                context_tools=config_pb2.ContextToolsConfig(enabled=True, max_hidden_fraction=1),
            )
        )
        session = await ce.create_session(APP, "ann")
        key = (APP, "ann", session.id)
        table = {"rows": [f"station {n}: high tide 06:{n:02d}" for n in range(60)]}
        for written in (
            event("user", "i1", content_pb2.Part(text="When is high tide at station 7?")),
            event("planner", "i1", call("c1", "tide_table", {"coast": "west"})),
            event(
                "planner",
                "i1",
                content_pb2.Part(
                    function_response=content_pb2.FunctionResponse(
                        id="c1", name="tide_table", response=struct(table)
                    )
                ),
            ),
            event("planner", "i1", content_pb2.Part(text="At 06:07.")),
            event("user", "i2", content_pb2.Part(text="Thanks. Now plan the walk.")),
        ):
            await ce.append_event(*key, written)

        tools = ce.context_tools(*key, agent_name="planner")
        declared = await tools.declarations("openai_chat")
        print("tools:", ", ".join(tool["function"]["name"] for tool in declared))

        # The model calls a tool: append its call, run it, append the answer (the engine
        # records the edit on the answer).
        async def use(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
            await ce.append_event(*key, event("planner", "i2", call(call_id, name, args)))
            result = await tools.run(name, json.dumps(args), call_id=call_id, invocation_id="i2")
            answer = content_pb2.FunctionResponse(id=call_id, name=name, response=struct(result))
            await ce.append_event(
                *key, event("planner", "i2", content_pb2.Part(function_response=answer))
            )
            return result

        status = await use("t1", "context_status", {})
        print("largest event:", status["largest_events"][0])
        hidden = await use("t2", "context_hide", {"first": 2, "last": 3, "stub": "Tide table."})
        print("hidden:", hidden["ok"], hidden["tokens_hidden"], "tokens")

        context = await ce.build_context(*key, agent_name="planner")
        print("context now:", context.contents[1].parts[0].text)

        expanded = await use("t3", "context_expand", {"sequence": 2, "max_chars": 80})
        print("read back:", expanded["text"])


if __name__ == "__main__":
    asyncio.run(main())
