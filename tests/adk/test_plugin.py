"""ContextEnginePlugin with a real google-adk Runner and a scripted model, in both modes.

The same script runs twice: plain ADK (its InMemorySessionService, no plugin) and the engine
(ContextEngineSessionService + ContextEnginePlugin on one backend). The model must receive the
same contents on every call, and those contents must be the engine's (the spy backend records
each BuildContext). EndInvocation closes every run; an app that also configures ADK's own
compaction or context cache is refused; the engine's prompt-cache decision is applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from google.adk.agents.context_cache_config import ContextCacheConfig
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.flows.llm_flows.context._fencing import OTHER_AGENT_CONTEXT_PREAMBLE as ADK_PREAMBLE
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types
from pydantic import PrivateAttr

from contextengine.adk import (
    Backend,
    ContextEnginePlugin,
    ContextEngineSessionService,
    EmbeddedBackend,
    SidecarBackend,
)
from contextengine.adk._convert import content_to_genai
from contextengine.adk._plugin import model_identity
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    content_pb2,
    context_service_pb2 as cpb,
    event_pb2,
    session_service_pb2 as spb,
)

pytestmark = pytest.mark.process

USER = "u1"


class Scripted(BaseLlm):
    """Answers each call with the next canned response; records every request."""

    model: str = "scripted-model"
    _answers: list[types.Content] = PrivateAttr(default_factory=list)
    _requests: list[LlmRequest] = PrivateAttr(default_factory=list)

    def load(self, answers: Sequence[types.Content]) -> Scripted:
        self._answers = [a.model_copy(deep=True) for a in answers]
        return self

    @property
    def requests(self) -> list[LlmRequest]:
        return self._requests

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._requests.append(llm_request.model_copy(deep=True))
        assert self._answers, "the script has no answer left"
        yield LlmResponse(content=self._answers.pop(0))


class Spy:
    """A backend that records BuildContext responses and EndInvocation requests."""

    def __init__(self, inner: Backend) -> None:
        self._inner = inner
        self.inner = inner
        #: the BuildContext answers with their whole contents (a plugin asks with ``since``:
        #: the answers as sent are in ``answers``)
        self.contexts: list[cpb.BuildContextResponse] = []
        self.answers: list[cpb.BuildContextResponse] = []
        self._by_digest: dict[str, list[content_pb2.Content]] = {}
        self.ended: list[kpb.EndInvocationRequest] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def build_context(self, request: cpb.BuildContextRequest) -> cpb.BuildContextResponse:
        response = await self._inner.build_context(request)
        self.answers.append(response)
        held = self._by_digest.get(request.since.contents_digest, [])
        whole = cpb.BuildContextResponse()
        whole.CopyFrom(response)
        whole.base_contents_count = 0
        del whole.contents[:]
        whole.contents.extend([*held[: response.base_contents_count], *response.contents])
        self._by_digest[whole.contents_digest] = list(whole.contents)
        self.contexts.append(whole)
        return response

    async def end_invocation(self, request: kpb.EndInvocationRequest) -> kpb.EndInvocationResponse:
        self.ended.append(request)
        return await self._inner.end_invocation(request)


def get_weather(city: str) -> dict[str, Any]:
    """The weather of a city (keys sorted: the engine prints other agents' dicts sorted, see
    docs/design/context.md)."""
    return {"city": city, "sky": "clear", "temp": 21}


def _model(*parts: types.Part) -> types.Content:
    return types.Content(role="model", parts=list(parts))


SCRIPT = [
    _model(
        types.Part(function_call=types.FunctionCall(name="get_weather", args={"city": "Paris"}))
    ),
    _model(types.Part(text="It is 21 degrees and clear in Paris.")),
    _model(
        types.Part(function_call=types.FunctionCall(name="get_weather", args={"city": "Oslo"})),
        types.Part(function_call=types.FunctionCall(name="get_weather", args={"city": "Rome"})),
    ),
    _model(types.Part(text="Oslo and Rome are both 21.")),
    _model(
        types.Part(
            function_call=types.FunctionCall(
                name="transfer_to_agent", args={"agent_name": "helper"}
            )
        )
    ),
    _model(types.Part(text="You're welcome, I am the helper.")),
    _model(types.Part(text="Still the helper here.")),
]
MESSAGES = ["Weather in Paris?", "And Oslo and Rome?", "Thanks!", "Who is this?"]


def _agent(model: Scripted, include_contents: str = "default") -> LlmAgent:
    """The root agent (a tool, a sub-agent to transfer to); both agents share the model, so
    its requests are in call order."""
    helper = LlmAgent(
        name="helper",
        model=model,
        instruction="Help politely.",
        include_contents=include_contents,  # type: ignore[arg-type]
    )
    return LlmAgent(
        name="assistant",
        model=model,
        instruction="Answer briefly.",
        tools=[get_weather],
        sub_agents=[helper],
        include_contents=include_contents,  # type: ignore[arg-type]
    )


async def _converse(runner: Runner, sessions: BaseSessionService, app: str) -> list[str]:
    session = await sessions.create_session(app_name=app, user_id=USER)
    for message in MESSAGES:
        async for _ in runner.run_async(
            user_id=USER,
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text=message)]),
        ):
            pass
    stored = await sessions.get_session(app_name=app, user_id=USER, session_id=session.id)
    assert stored is not None
    return [e.invocation_id for e in stored.events]


def _runner(
    app: str,
    model: Scripted,
    sessions: BaseSessionService,
    *plugins: ContextEnginePlugin,
    include_contents: str = "default",
) -> Runner:
    return Runner(
        app=App(name=app, root_agent=_agent(model, include_contents), plugins=list(plugins)),
        session_service=sessions,
    )


def _dumps(requests: Sequence[LlmRequest]) -> list[list[dict[str, Any]]]:
    return [[c.model_dump(mode="json", exclude_none=True) for c in r.contents] for r in requests]


@pytest.fixture
async def spy(backend: Backend) -> Spy:
    return Spy(backend)


@pytest.mark.parametrize("include_contents", ["default", "none"])
async def test_contents_equal_plain_adk_and_come_from_the_engine(
    spy: Spy, app_name: str, include_contents: str
) -> None:
    """Tool calls (one, then two in parallel), a transfer to a sub-agent that then keeps the
    conversation (the root's turns reframed for it), each agent with the whole history or only
    the current turn."""
    # ADK's own text before other agents' quoted turns (the engine's default is its own)
    await _update_app_config(
        spy, config_pb2.AppConfig(app_name=app_name, other_agent_preamble=ADK_PREAMBLE)
    )
    reference_model = Scripted().load(SCRIPT)
    reference_sessions = InMemorySessionService()
    reference = _runner(
        app_name, reference_model, reference_sessions, include_contents=include_contents
    )
    await _converse(reference, reference_sessions, app_name)

    model = Scripted().load(SCRIPT)
    sessions = ContextEngineSessionService(backend=spy)
    plugin = ContextEnginePlugin(backend=spy)
    runner = _runner(app_name, model, sessions, plugin, include_contents=include_contents)
    invocations = await _converse(runner, sessions, app_name)

    assert len(model.requests) == len(SCRIPT)
    assert _dumps(model.requests) == _dumps(reference_model.requests)
    # the contents the model got are the engine's, call for call
    assert len(spy.contexts) == len(SCRIPT)
    for request, context in zip(model.requests, spy.contexts, strict=True):
        assert request.contents == [content_to_genai(c) for c in context.contents]
    # after the first call of a view, only what was added since went over the wire
    assert any(answer.base_contents_count > 0 for answer in spy.answers)
    # one EndInvocation per run, for the run's invocation
    assert [e.invocation_id for e in spy.ended] == list(dict.fromkeys(invocations))
    assert all(e.app_name == app_name and e.user_id == USER for e in spy.ended)
    await runner.close()


@pytest.mark.filterwarnings(r"ignore:\[EXPERIMENTAL\]:UserWarning")
@pytest.mark.parametrize(
    ("setting", "config"),
    [
        ("events_compaction_config", {"compaction_interval": 2, "overlap_size": 0}),
        ("context_cache_config", {}),
    ],
)
async def test_double_configuration_is_refused(
    backend: Backend, app_name: str, setting: str, config: dict[str, Any]
) -> None:
    value: Any = EventsCompactionConfig(**config) if setting == "events_compaction_config" else None
    if setting == "context_cache_config":
        value = ContextCacheConfig(**config)
    model = Scripted().load(SCRIPT)
    app = App(
        name=app_name,
        root_agent=_agent(model),
        plugins=[ContextEnginePlugin(backend=backend)],
        **{setting: value},
    )
    sessions = ContextEngineSessionService(backend=backend)
    runner = Runner(app=app, session_service=sessions)
    session = await sessions.create_session(app_name=app_name, user_id=USER)
    # ADK's plugin manager wraps a plugin's error in a RuntimeError naming the plugin
    with pytest.raises(RuntimeError, match=f"contextengine.*remove {setting}") as raised:
        async for _ in runner.run_async(
            user_id=USER,
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text="hi")]),
        ):
            pass
    assert isinstance(raised.value.__cause__, ValueError)
    assert model.requests == []


async def _update_app_config(backend: Backend, config: config_pb2.AppConfig) -> None:
    if isinstance(backend, Spy):
        backend = backend.inner
    if isinstance(backend, SidecarBackend):
        await backend.client().update_app_config(config)
    else:
        assert isinstance(backend, EmbeddedBackend)
        engine = await backend.engine()
        await engine.update_app_config(spb.UpdateAppConfigRequest(config=config))


async def _set_cache_config(backend: Backend, app: str) -> None:
    await _update_app_config(
        backend,
        config_pb2.AppConfig(
            app_name=app, context_cache_config=config_pb2.ContextCacheConfig(min_tokens=0)
        ),
    )


async def _summaries(backend: Backend, app: str, session_id: str) -> list[event_pb2.Event]:
    response = await backend.get_session(
        spb.GetSessionRequest(app_name=app, user_id=USER, session_id=session_id)
    )
    return [e for e in response.session.events if e.actions.HasField("compaction")]


async def test_end_invocation_compacts_and_the_next_call_uses_the_summary(
    spy: Spy, backend: Backend, app_name: str
) -> None:
    await _update_app_config(
        backend,
        config_pb2.AppConfig(
            app_name=app_name,
            events_compaction_config=config_pb2.EventsCompactionConfig(
                compaction_interval=1, overlap_size=0
            ),
            summarizer=config_pb2.SummarizerConfig(
                extractive=config_pb2.ExtractiveSummarizerConfig()
            ),
        ),
    )
    model = Scripted().load([_model(types.Part(text=f"answer {i}")) for i in range(2)])
    sessions = ContextEngineSessionService(backend=spy)
    runner = _runner(app_name, model, sessions, ContextEnginePlugin(backend=spy))
    session = await sessions.create_session(app_name=app_name, user_id=USER)

    async def say(text: str) -> None:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
            pass

    await say("first question")
    assert len(spy.ended) == 1
    for _ in range(200):  # the engine compacts in the background after EndInvocation
        summaries = await _summaries(backend, app_name, session.id)
        if summaries:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("no summary after EndInvocation")
    await say("second question")
    summary = content_to_genai(summaries[0].actions.compaction.compacted_content)
    second = model.requests[1].contents
    assert second[0] == summary
    assert [c.parts[0].text for c in second[1:] if c.parts] == ["second question"]
    await runner.close()


async def test_cache_decision_is_recorded_on_the_response(
    spy: Spy, backend: Backend, app_name: str
) -> None:
    await _set_cache_config(backend, app_name)
    model = Scripted().load(SCRIPT)
    sessions = ContextEngineSessionService(backend=spy)
    runner = _runner(app_name, model, sessions, ContextEnginePlugin(backend=spy))
    session = await sessions.create_session(app_name=app_name, user_id=USER)
    async for _ in runner.run_async(
        user_id=USER,
        session_id=session.id,
        new_message=types.Content(role="user", parts=[types.Part(text=MESSAGES[0])]),
    ):
        pass
    stored = await sessions.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    assert stored is not None
    answers = [e for e in stored.events if e.content is not None and e.content.role == "model"]
    assert len(answers) == 2 == len(spy.contexts)
    for event, context in zip(answers, spy.contexts, strict=True):
        decision = context.cache_decision
        assert decision.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
        assert event.cache_metadata is not None
        assert event.cache_metadata.fingerprint == decision.cache_metadata.fingerprint
        assert event.cache_metadata.contents_count == decision.cache_metadata.contents_count
        assert event.cache_metadata.cache_name is None
    # without a cache, the whole request goes out
    assert all(r.config.system_instruction for r in model.requests)
    await runner.close()


async def test_a_reused_cache_is_sent_as_cached_content(backend: Backend) -> None:
    plugin = ContextEnginePlugin(backend=backend)
    model = Scripted()
    agent = _agent(model)
    contents = [
        types.Content(role="user", parts=[types.Part(text="one")]),
        types.Content(role="model", parts=[types.Part(text="two")]),
    ]
    request = LlmRequest(
        model=model.model,
        contents=list(contents),
        config=types.GenerateContentConfig(
            system_instruction="Answer briefly.",
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(name="f")])],
        ),
    )
    decision = cpb.CacheDecision(
        action=cpb.CACHE_ACTION_REUSE,
        cache_name="cachedContents/abc",
        send_from_index=2,
        cache_metadata=event_pb2.CacheMetadata(
            cache_name="cachedContents/abc",
            fingerprint="f" * 64,
            contents_count=2,
            invocations_used=2,
            expire_time=2e9,
            created_at=1e9,
        ),
    )
    context = SimpleNamespace(invocation_id="inv-1")
    plugin._apply_cache(context, agent, request, decision)  # type: ignore[arg-type]
    recorded = plugin._pending_cache[("inv-1", "assistant")]
    assert recorded.cache_name == "cachedContents/abc"
    assert recorded.invocations_used == 2
    assert request.config.cached_content == "cachedContents/abc"
    assert request.config.system_instruction is None
    assert request.config.tools is None
    # ADK's continuation turn is appended before the cached prefix is cut, as ADK does
    assert [c.role for c in request.contents] == ["user"]
    assert request.contents[0].parts
    assert request.contents[0].parts[0].text
    assert request.contents[0].parts[0].text.startswith("Continue processing")


def test_model_identity() -> None:
    assert model_identity(Scripted()) == cpb.ModelIdentity(
        provider=cpb.MODEL_PROVIDER_OTHER, model="scripted-model"
    )
    from google.adk.models.google_llm import Gemini

    gemini = Gemini(model="gemini-2.5-flash", use_interactions_api=True)
    assert model_identity(gemini, "gemini-2.5-pro") == cpb.ModelIdentity(
        provider=cpb.MODEL_PROVIDER_GEMINI, model="gemini-2.5-pro", use_interactions_api=True
    )


async def test_a_plugin_on_another_engine_says_so(backend: Backend, app_name: str) -> None:
    model = Scripted().load(SCRIPT)
    sessions = ContextEngineSessionService(backend=backend)
    elsewhere = ContextEnginePlugin(db=":memory:")  # its own engine: no such session there
    runner = _runner(app_name, model, sessions, elsewhere)
    session = await sessions.create_session(app_name=app_name, user_id=USER)
    with pytest.raises(RuntimeError, match="session service's backend") as raised:
        async for _ in runner.run_async(
            user_id=USER,
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text="hi")]),
        ):
            pass
    assert isinstance(raised.value.__cause__, ValueError)
    assert model.requests == []
    await runner.close()  # closes the plugin's own engine


class _WithUsage(Scripted):
    """``Scripted`` whose responses report a large prompt token count (so that the engine's
    cache gates let a cache be created from the second call on)."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        async for response in super().generate_content_async(llm_request, stream):
            response.usage_metadata = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=50_000
            )
            yield response


async def test_a_cache_left_to_the_agent_is_not_created(
    spy: Spy, backend: Backend, app_name: str
) -> None:
    """CREATE without managed_gemini_caches: the plugin creates no cache, so the call goes out
    whole and records the metadata as it is (ADK's fallback when creating a cache fails)."""
    await _set_cache_config(backend, app_name)
    model = _WithUsage().load(SCRIPT[:2])
    sessions = ContextEngineSessionService(backend=spy)
    runner = _runner(app_name, model, sessions, ContextEnginePlugin(backend=spy))
    session = await sessions.create_session(app_name=app_name, user_id=USER)
    message = types.Content(role="user", parts=[types.Part(text=MESSAGES[0])])
    async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
        pass
    first, second = (context.cache_decision for context in spy.contexts)
    assert first.action == cpb.CACHE_ACTION_FINGERPRINT_ONLY
    assert second.action == cpb.CACHE_ACTION_CREATE
    assert not second.managed
    assert second.cache_metadata.contents_count > 0
    request = model.requests[1]
    assert request.config.cached_content is None
    assert request.config.system_instruction
    assert request.contents == [content_to_genai(c) for c in spy.contexts[1].contents]
    stored = await sessions.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    assert stored is not None
    recorded = stored.events[-1].cache_metadata
    assert recorded is not None
    assert recorded.cache_name is None
    assert recorded.fingerprint == second.cache_metadata.fingerprint
    await runner.close()


async def test_a_summary_made_before_a_model_call_joins_the_runner_session(
    spy: Spy, backend: Backend, app_name: str
) -> None:
    """Token threshold: the engine summarises inside BuildContext (as ADK does before a model
    call); the summary joins the runner's session object (the session service takes the
    engine's own summaries), so the invocation's next append is not refused as stale."""
    await _update_app_config(
        backend,
        config_pb2.AppConfig(
            app_name=app_name,
            events_compaction_config=config_pb2.EventsCompactionConfig(
                token_threshold=100, event_retention_size=1
            ),
            summarizer=config_pb2.SummarizerConfig(
                extractive=config_pb2.ExtractiveSummarizerConfig()
            ),
        ),
    )
    model = _WithUsage().load(SCRIPT[:4])
    sessions = ContextEngineSessionService(backend=spy)
    runner = _runner(app_name, model, sessions, ContextEnginePlugin(backend=spy))
    session = await sessions.create_session(app_name=app_name, user_id=USER)
    for text in MESSAGES[:2]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
            pass
    made = [c.compaction_sequence for c in spy.contexts if c.compaction_sequence]
    assert made, "no summary was made before a model call"
    stored = await sessions.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    assert stored is not None
    summaries = [e for e in stored.events if e.actions.compaction is not None]
    assert len(summaries) >= len(made)
    assert len(model.requests) == 4
    await runner.close()
