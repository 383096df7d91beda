"""The real engine (``open_engine`` on an in-memory store, with a fixed summarizer) on a clock
the cache-aware compaction tests move; and an agent that follows the cache decisions (creates the
caches it is told to, records metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field

from contextengine.compaction.compactor import Compactor
from contextengine.compaction.summarizers.summarizer import Summary, SummaryInput
from contextengine.core.events import normalize_for_append
from contextengine.engine import Engine, open_engine
from contextengine.store import EventFilter, EventStore, SessionKey
from contextengine.store.memory import MemoryStore
from contextengine.v1 import config_pb2, content_pb2, context_service_pb2 as cpb, event_pb2

APP = "aware"
AGENT = "agent"
KEY = SessionKey(APP, "u", "s")


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FixedSummarizer:
    name = "fixed"

    def __init__(self) -> None:
        self.calls: list[SummaryInput] = []

    async def summarize(self, request: SummaryInput) -> Summary | None:
        self.calls.append(request)
        text = f"summary {len(self.calls)}"
        return Summary(content_pb2.Content(role="model", parts=[content_pb2.Part(text=text)]))


@dataclass
class Agent:
    """One session of the app on ``engine``, driven the way an agent would."""

    engine: Engine
    clock: Clock
    summarizer: FixedSummarizer
    decisions: list[cpb.CacheDecision] = field(default_factory=list)
    created: int = 0

    @property
    def store(self) -> EventStore:
        return self.engine.store

    @property
    def compactor(self) -> Compactor:
        return self.engine.compactor

    async def add(self, author: str, invocation: str, text: str) -> event_pb2.Event:
        role = "user" if author == "user" else "model"
        event = event_pb2.Event(author=author, invocation_id=invocation, timestamp=self.clock())
        event.content.role = role
        event.content.parts.add(text=text)
        self.clock.now += 1
        outcome = await self.store.append_events(
            KEY, [normalize_for_append(event, f"e{self.clock.now}")], None
        )
        return outcome.events[0]

    async def model_call(
        self, invocation: str, answer: str, prompt_tokens: int = 5000
    ) -> cpb.BuildContextResponse:
        """BuildContext, then the agent's answer with the metadata the decision says."""
        request = cpb.BuildContextRequest(
            app_name=KEY.app_name,
            user_id=KEY.user_id,
            session_id=KEY.session_id,
            agent_name=AGENT,
            invocation_id=invocation,
            model=cpb.ModelIdentity(provider=cpb.MODEL_PROVIDER_GEMINI, model="gemini-2.0-flash"),
        )
        response = (await self.engine.build_context(request)).response()
        decision = response.cache_decision
        self.decisions.append(decision)
        metadata = event_pb2.CacheMetadata()
        metadata.CopyFrom(decision.cache_metadata)
        if decision.action == cpb.CACHE_ACTION_CREATE:
            self.created += 1
            metadata.cache_name = f"cachedContents/c{self.created}"
            metadata.created_at = self.clock()
            metadata.expire_time = self.clock() + decision.ttl_seconds
            metadata.invocations_used = 1
        event = event_pb2.Event(author=AGENT, invocation_id=invocation, timestamp=self.clock())
        event.content.role = "model"
        event.content.parts.add(text=answer)
        event.usage_metadata.prompt_token_count = prompt_tokens
        event.cache_metadata.CopyFrom(metadata)
        self.clock.now += 1
        await self.store.append_events(
            KEY, [normalize_for_append(event, f"e{self.clock.now}")], None
        )
        return response

    async def invocation(
        self, number: int, *, prompt_tokens: int = 5000, text: str = "x"
    ) -> cpb.BuildContextResponse:
        name = f"i{number}"
        await self.add("user", name, f"question {number} {text}")
        response = await self.model_call(name, f"answer {number} {text}", prompt_tokens)
        await self.compactor.end_invocation(KEY)
        await self.compactor.idle(KEY)
        return response

    async def log(self) -> list[event_pb2.Event]:
        return list((await self.store.get_session(KEY, EventFilter())).events)

    async def summaries(self) -> list[event_pb2.Event]:
        return [event for event in await self.log() if event.actions.HasField("compaction")]


async def engine(
    compaction: config_pb2.EventsCompactionConfig,
    cache: config_pb2.ContextCacheConfig,
) -> Agent:
    """A new engine whose app has these configurations, with its session created."""
    clock = Clock()
    summarizer = FixedSummarizer()
    opened = await open_engine(
        store=MemoryStore(), summarizers=lambda _config: summarizer, clock=clock
    )
    await opened.app_configs.put(
        config_pb2.AppConfig(
            app_name=APP, events_compaction_config=compaction, context_cache_config=cache
        )
    )
    await opened.store.create_session(KEY, {}, clock())
    return Agent(opened, clock, summarizer)
