"""docs/guide/subscriptions.md: follow a session, its merged state, and every session of a user.

With a sidecar running (`make run`): `.venv/bin/python examples/python/subscriptions.py`; set
CONTEXTENGINE_TARGET (host:port) to use another one. tests/docs/test_examples.py runs it and
checks that the guide shows this file from `import asyncio` on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid

from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, event_pb2, subscription_service_pb2

TARGET = os.environ.get("CONTEXTENGINE_TARGET", "127.0.0.1:50151")


def said(text: str) -> event_pb2.Event:
    return event_pb2.Event(
        author="user",
        content=content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)]),
    )


async def main() -> None:
    user = f"carol-{uuid.uuid4().hex[:8]}"  # a new user per run (the last part follows all theirs)
    async with ContextEngineClient(TARGET) as ce:
        session = await ce.create_session("demo", user, state={"app:model": "gemini-2.5-flash"})
        await ce.append_event("demo", user, session.id, said("first"))

        cursor = ""
        async with contextlib.aclosing(ce.subscribe_events("demo", user, session.id)) as frames:
            async for frame in frames:
                if frame.HasField("caught_up"):  # the stored events are behind us: now live
                    await ce.append_event("demo", user, session.id, said("second"))
                elif frame.HasField("event"):
                    cursor = frame.event.cursor
                    if frame.event.event.content.parts[0].text == "second":
                        break  # leaving the loop closes the stream
        assert cursor == "2"  # resume later with subscribe_events(..., cursor=cursor)

        # The merged state (session, user: and app: keys): a snapshot, then one delta per change.
        async with contextlib.aclosing(ce.watch_session_state("demo", user, session.id)) as watch:
            state = dict((await anext(watch)).snapshot.state)
            changed = said("third")
            changed.actions.state_delta.update({"turns": 1})
            await ce.append_event("demo", user, session.id, changed)
            state.update((await anext(watch)).delta.delta)
        assert state["turns"] == 1
        assert state["app:model"] == "gemini-2.5-flash"

        # Every session of a user (or of an app: no user id), filtered, after a global cursor.
        kinds = [subscription_service_pb2.EVENT_KIND_STATE_CHANGE]
        followed = ce.subscribe_events("demo", user, kinds=kinds, cursor="")
        async with contextlib.aclosing(followed) as frames:
            first = await anext(frames)
        assert first.event.event.content.parts[0].text == "third"
        print(f"{user}: resume session {session.id} after cursor {cursor}")


if __name__ == "__main__":
    asyncio.run(main())
