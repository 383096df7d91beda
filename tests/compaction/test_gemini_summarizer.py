"""GeminiSummarizer through the real google-genai client against the local fake Gemini server:
the request (ADK's shape, byte-for-byte ADK's prompt), the conversions, timeouts, retries and
garbage answers."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any

import pydantic
import pytest
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from contextengine.compaction.summarizers.gemini import GeminiSettings, GeminiSummarizer
from contextengine.compaction.summarizers.summarizer import (
    DEFAULT_PROMPT_TEMPLATE,
    SummarizerError,
    SummaryInput,
)
from contextengine.core.adk_json import event_from_adk_json
from contextengine.core.compaction import render_events
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, event_pb2
from tests.fakes.gemini_server import (
    FakeGemini,
    Reply,
    default_summary_text,
    delayed,
    empty_parts,
    error_reply,
    invalid_json,
    no_candidates,
    start_fake_gemini,
    summary_reply,
)

pytestmark = pytest.mark.unit

API_KEY = "test-key-do-not-log-5f3a"
MODEL = "gemini-test"
GENERATE_PATH = f"/v1beta/models/{MODEL}:generateContent"

Make = Callable[..., GeminiSummarizer]


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with start_fake_gemini() as server:
        yield server


@pytest.fixture
async def make(fake: FakeGemini) -> AsyncIterator[Make]:
    """Builds summarizers aimed at the fake (short backoff) and closes them after the test."""
    made: list[GeminiSummarizer] = []

    def build(**options: Any) -> GeminiSummarizer:
        options.setdefault("backoff_seconds", 0.01)
        settings = GeminiSettings(api_key=options.pop("api_key", API_KEY), base_url=fake.base_url)
        summarizer = GeminiSummarizer(options.pop("model", MODEL), settings, **options)
        made.append(summarizer)
        return summarizer

    yield build
    for summarizer in made:
        await summarizer.aclose()


def _text(author: str, text: str, role: str = "model") -> event_pb2.Event:
    return event_pb2.Event(
        author=author,
        content=content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)]),
    )


def _events() -> list[event_pb2.Event]:
    call = content_pb2.Part(
        function_call=content_pb2.FunctionCall(
            name="get_weather", args=dict_to_struct({"city": "Paris"})
        )
    )
    return [
        _text("user", "Weather in Paris? Reply {in JSON}.", role="user"),
        event_pb2.Event(author="root", content=content_pb2.Content(role="model", parts=[call])),
        _text("root", "It is 21°C and sunny."),
    ]


def _input(events: list[event_pb2.Event]) -> SummaryInput:
    return SummaryInput(events=events, conversation_history=render_events(events))


async def test_request_is_one_user_content_with_the_prompt(fake: FakeGemini, make: Make) -> None:
    events = _events()
    summary = await make().summarize(_input(events))

    prompt = DEFAULT_PROMPT_TEMPLATE.format(conversation_history=render_events(events))
    [request] = fake.requests
    assert request.method == "POST"
    assert request.path == GENERATE_PATH
    assert request.headers["x-goog-api-key"] == API_KEY
    assert request.body == {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}

    assert summary is not None
    assert summary.content == content_pb2.Content(
        role="model", parts=[content_pb2.Part(text=default_summary_text(prompt))]
    )
    prompt_tokens = len(prompt) // 4
    assert summary.usage_metadata == event_pb2.UsageMetadata(
        prompt_token_count=prompt_tokens,
        candidates_token_count=5,
        total_token_count=prompt_tokens + 5,
        prompt_tokens_details=[
            event_pb2.ModalityTokenCount(modality="TEXT", token_count=prompt_tokens)
        ],
    )


async def test_thought_parts_and_every_usage_count_are_kept(fake: FakeGemini, make: Make) -> None:
    usage = {
        "promptTokenCount": 120,
        "candidatesTokenCount": 30,
        "thoughtsTokenCount": 7,
        "cachedContentTokenCount": 100,
        "totalTokenCount": 157,
        "trafficType": "ON_DEMAND",
    }
    fake.script(summary_reply("The summary.", thought="Let me think.", usage=usage))
    summary = await make().summarize(_input(_events()))

    assert summary is not None
    assert list(summary.content.parts) == [
        content_pb2.Part(text="Let me think.", thought=True, thought_signature=b"sig-1"),
        content_pb2.Part(text="The summary."),
    ]
    assert summary.usage_metadata == event_pb2.UsageMetadata(
        prompt_token_count=120,
        candidates_token_count=30,
        thoughts_token_count=7,
        cached_content_token_count=100,
        total_token_count=157,
        traffic_type="ON_DEMAND",
    )


async def test_a_timed_out_attempt_is_retried(fake: FakeGemini, make: Make) -> None:
    fake.script(delayed(30))
    started = time.monotonic()
    summary = await make(timeout_seconds=0.5, max_attempts=2).summarize(_input(_events()))

    assert summary is not None
    assert summary.content.parts[0].text.startswith("SUMMARY(")
    assert len(fake.requests) == 2
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "failure",
    [error_reply(500), error_reply(503), error_reply(429), error_reply(408), invalid_json()],
    ids=["500", "503", "429", "408", "invalid-json"],
)
async def test_a_transient_failure_is_retried(fake: FakeGemini, make: Make, failure: Reply) -> None:
    fake.script(failure)
    summary = await make(max_attempts=2).summarize(_input(_events()))

    assert summary is not None
    assert len(fake.requests) == 2
    assert fake.requests[0].body == fake.requests[1].body


async def test_every_attempt_failing_raises(fake: FakeGemini, make: Make) -> None:
    fake.script(error_reply(500), delayed(30), error_reply(503))
    with pytest.raises(SummarizerError, match=r"attempt 3 of 3 failed: HTTP 503"):
        await make(timeout_seconds=0.5, max_attempts=3).summarize(_input(_events()))
    assert len(fake.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_a_client_error_is_not_retried(fake: FakeGemini, make: Make, status: int) -> None:
    fake.script(error_reply(status, "no such thing"))
    with pytest.raises(SummarizerError, match=rf"HTTP {status}"):
        await make(max_attempts=3).summarize(_input(_events()))
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (no_candidates(), "no candidates"),
        (no_candidates("SAFETY"), r"prompt was blocked \(SAFETY\)"),
        (empty_parts(), r"no content \(finish reason STOP\)"),
        (empty_parts("MAX_TOKENS"), r"no content \(finish reason MAX_TOKENS\)"),
        (summary_reply("  \n "), "no text"),
        (summary_reply("", thought="only a thought"), "no text"),
    ],
    ids=["no-candidates", "blocked", "no-parts", "max-tokens", "blank-text", "thought-only"],
)
async def test_an_answer_without_a_summary_raises(
    fake: FakeGemini, make: Make, answer: Reply, message: str
) -> None:
    fake.script(answer)
    with pytest.raises(SummarizerError, match=message):
        await make().summarize(_input(_events()))
    assert len(fake.requests) == 1  # not retried: the scheduler backs off instead


@pytest.mark.parametrize(
    "template",
    ["{conversation_history} {other}", "{}", "{conversation_history", "{conversation_history.x}"],
)
async def test_a_bad_template_raises_before_any_call(
    fake: FakeGemini, make: Make, template: str
) -> None:
    with pytest.raises(SummarizerError, match="invalid prompt template"):
        await make(prompt_template=template).summarize(_input(_events()))
    assert fake.requests == []


async def test_a_custom_template_is_filled(fake: FakeGemini, make: Make) -> None:
    events = _events()
    await make(prompt_template="Sum up {{briefly}}:\n{conversation_history}").summarize(
        _input(events)
    )
    assert fake.requests[0].prompt_text() == "Sum up {briefly}:\n" + render_events(events)


async def test_empty_range_needs_no_call(fake: FakeGemini, make: Make) -> None:
    assert await make().summarize(SummaryInput(events=[], conversation_history="")) is None
    assert fake.requests == []


async def test_no_api_key_raises_without_a_call(fake: FakeGemini, make: Make) -> None:
    with pytest.raises(SummarizerError, match="no Gemini API key"):
        await make(api_key=None).summarize(_input(_events()))
    assert fake.requests == []


async def test_one_client_serves_many_summaries_and_is_rebuilt_after_close(
    fake: FakeGemini, make: Make
) -> None:
    summarizer = make()
    for _ in range(3):
        assert await summarizer.summarize(_input(_events())) is not None
    await summarizer.aclose()
    await summarizer.aclose()  # idempotent
    assert await summarizer.summarize(_input(_events())) is not None
    assert len(fake.requests) == 4
    assert summarizer.name == f"gemini:{MODEL}"


async def test_the_api_key_is_never_logged(
    fake: FakeGemini, make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="contextengine")
    fake.script(error_reply(500), error_reply(500))
    summarizer = make(max_attempts=2)
    with pytest.raises(SummarizerError) as raised:
        await summarizer.summarize(_input(_events()))

    assert "retrying" in caplog.text
    assert API_KEY not in caplog.text
    assert API_KEY not in str(raised.value)
    assert API_KEY not in repr(summarizer)
    assert API_KEY not in repr(GeminiSettings(api_key=API_KEY, base_url=fake.base_url))


def test_settings_from_env() -> None:
    env = {"GEMINI_API_KEY": "g", "GOOGLE_GEMINI_BASE_URL": "http://proxy:1"}
    assert GeminiSettings.from_env(env) == GeminiSettings(api_key="g", base_url="http://proxy:1")
    assert GeminiSettings.from_env({**env, "GOOGLE_API_KEY": "o"}).api_key == "o"
    assert GeminiSettings.from_env({"GOOGLE_API_KEY": ""}) == GeminiSettings(api_key=None)


# --- parity with google-adk's LlmEventSummarizer ---------------------------------------------


class _CapturingLlm(BaseLlm):
    """An ADK model that records the requests it is given and answers "S"."""

    requests: list[LlmRequest] = pydantic.Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="S")]))


def _adk_events() -> list[Event]:
    def event(n: int, author: str, *parts: types.Part, **fields: Any) -> Event:
        role = "user" if author == "user" else "model"
        return Event(
            id=f"e{n}",
            invocation_id="inv-1",
            author=author,
            timestamp=1_767_225_600.0 + n,
            content=types.Content(role=role, parts=list(parts)),
            **fields,
        )

    def call(name: str, args: dict[str, Any] | None) -> types.Part:
        return types.Part(function_call=types.FunctionCall(id=f"c-{name}", name=name, args=args))

    def result(name: str, response: dict[str, Any] | None) -> types.Part:
        return types.Part(
            function_response=types.FunctionResponse(id=f"c-{name}", name=name, response=response)
        )

    # Payload dicts have at most one key per level: a Struct does not keep key order (a known,
    # separately pinned deviation), and str(dict) shows it.
    summary = types.Content(role="model", parts=[types.Part(text="Earlier: user is in Paris.")])
    return [
        event(0, "model", types.Part(text="Earlier: user is in Paris.")),
        event(1, "user", types.Part(text="Weather in Paris? Answer {in JSON} please ☕")),
        event(
            2,
            "root",
            types.Part(text="I need the weather tool.", thought=True),
            types.Part(text="Checking."),
            call("get_weather", {"city": "Paris"}),
        ),
        event(3, "root", result("get_weather", {"result": {"sky": ["sun", 21, None, True]}})),
        event(4, "root", call("adk_request_credential", {"scheme": "bearer"})),
        event(5, "user", result("adk_request_credential", {"token": "secret"})),
        event(6, "root", call("search", {"query": "x" * 2500})),
        event(7, "root", result("search", {"result": "y" * 1990})),
        event(8, "root", call("noop", None), result("noop", None)),
        event(
            9,
            "root",
            types.Part(text="a summary thought", thought=True),
            types.Part(text="It's 21 degrees.\nline two"),
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=1.0, end_timestamp=2.0, compacted_content=summary
                )
            ),
        ),
        event(10, "coder", types.Part(text=""), types.Part(text="done")),
    ]


@pytest.mark.parity
async def test_adk_template_gives_adk_prompt_byte_for_byte(fake: FakeGemini, make: Make) -> None:
    adk_events = _adk_events()
    llm = _CapturingLlm(model=MODEL)
    assert await LlmEventSummarizer(llm=llm).maybe_summarize_events(events=adk_events)
    [adk_request] = llm.requests

    events = [event_from_adk_json(e.model_dump_json(exclude_none=True)) for e in adk_events]
    template = LlmEventSummarizer._DEFAULT_PROMPT_TEMPLATE
    await make(prompt_template=template).summarize(_input(events))

    [request] = fake.requests
    assert adk_request.model == MODEL
    assert request.path == GENERATE_PATH
    [adk_content] = adk_request.contents
    assert request.body["contents"] == [
        adk_content.model_dump(mode="json", exclude_none=True, by_alias=True)
    ]
    assert adk_content.parts is not None
    adk_prompt = adk_content.parts[0].text
    assert adk_prompt is not None
    assert request.prompt_text().encode() == adk_prompt.encode()
    assert "[truncated 513 chars]" in adk_prompt  # the long call was cut, as ADK cuts it


def test_the_client_stays_on_httpx_when_aiohttp_is_installed() -> None:
    """google-genai switches to aiohttp whenever it can import it (litellm, installed for the
    renderings' tests, brings it); the engine's client asks for httpx explicitly."""
    import google.genai._api_client as api_client

    assert api_client.has_aiohttp  # installed in the test environment
    client = GeminiSettings(api_key=API_KEY, base_url="http://127.0.0.1:9").client(5.0)
    assert not client._api_client._use_aiohttp()
