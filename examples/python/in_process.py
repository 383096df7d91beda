"""docs/guide/in-process.md: the engine inside a Python program.

`.venv/bin/python examples/python/in_process.py` (no sidecar needed: it keeps its SQLite file in
a temporary directory). tests/docs/test_examples.py runs it and checks that the guide shows this
file from `import asyncio` on.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from contextengine.engine import ContextEngineError, EngineSettings, open_engine
from contextengine.v1 import (
    content_pb2,
    context_service_pb2 as cpb,
    event_pb2,
    session_service_pb2 as spb,
    subscription_service_pb2 as subpb,
)


def said(author: str, invocation: str, text: str) -> event_pb2.Event:
    role = "user" if author == "user" else "model"
    return event_pb2.Event(
        author=author,
        invocation_id=invocation,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        settings = EngineSettings(db=str(Path(folder) / "agent.db"))
        # The same engine the sidecar serves: same requests, same answers, same errors.
        async with await open_engine(settings) as engine:
            created = await engine.create_session(
                spb.CreateSessionRequest(app_name="demo", user_id="ana")
            )
            session_id = created.session.id
            await engine.append_events(
                spb.AppendEventsRequest(
                    app_name="demo",
                    user_id="ana",
                    session_id=session_id,
                    events=[
                        said("user", "inv-1", "Which city is the capital of Peru?"),
                        said("assistant", "inv-1", "Lima."),
                    ],
                )
            )
            context = await engine.build_context(
                cpb.BuildContextRequest(
                    app_name="demo", user_id="ana", session_id=session_id, agent_name="assistant"
                )
            )
            print(f"context of {len(context.response().contents)} contents")

            # Subscriptions are async iterators: the stored events, then caught_up, then live.
            stream = engine.subscribe_events(
                subpb.SubscribeEventsRequest(app_name="demo", user_id="ana", session_id=session_id)
            )
            async for frame in stream:
                if frame.HasField("caught_up"):
                    break
                print(f"event {frame.event.event.sequence} by {frame.event.event.author}")
            stream.close()

            try:
                await engine.get_session(
                    spb.GetSessionRequest(app_name="demo", user_id="ana", session_id="nope")
                )
            except ContextEngineError as error:
                print(f"{error.reason}: {error.code.name}")  # what a gRPC caller sees too


if __name__ == "__main__":
    asyncio.run(main())
