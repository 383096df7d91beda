"""What the client's view tests share."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

from contextengine.client import ContextEngineClient
from contextengine.v1 import context_service_pb2 as cpb
from tests.engine.test_since import seeded_events


class Recorder:
    """BuildContext through the client, keeping a copy of every request and raw answer."""

    def __init__(self, client: ContextEngineClient) -> None:
        self.client = client
        self.requests: list[cpb.BuildContextRequest] = []
        self.answers: list[cpb.BuildContextResponse] = []

    async def __call__(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        sent = cpb.BuildContextRequest()
        sent.CopyFrom(request)
        self.requests.append(sent)
        answer = await self.client.send_build_context(request)
        copy = cpb.BuildContextResponse()
        copy.CopyFrom(answer)
        self.answers.append(copy)
        return answer


async def grown(
    client: ContextEngineClient, app: str, session_id: str, seed: int, size: int = 30
) -> AsyncIterator[int]:
    """Appends the generated session ``seed`` (``size`` events: turns, calls answered later,
    rewinds, summaries) to the session one or two events at a time; yields the events appended so
    far after each step."""
    events = seeded_events(seed, size)
    rng = random.Random(seed)
    position = 0
    while position < len(events):
        step = rng.choice([1, 1, 2])
        await client.append_events(app, "u", session_id, events[position : position + step])
        position += step
        yield position
