"""A corpus of events made by the real google-adk 2.13 package, for the proto round-trip tests.

Three sources:

* :func:`constructed_cases` - events built directly from ADK's and google-genai's classes, one or
  a few features per event, together touching every field of the proto contract;
* :func:`runner_cases` - events produced by running ADK: a ``Runner`` over an ``App`` with an
  ``InMemorySessionService`` and a scripted fake model (tools, a long-running tool, tool
  confirmation, an auth request, artifacts, agent transfer, SSE streaming, sliding-window
  compaction with ``LlmEventSummarizer``, a rewind, a graph workflow);
* :func:`mismatch_cases` - events that do *not* survive ADK JSON -> proto -> ADK JSON, one per
  known mismatch, so that the tests pin each one (``xfail(strict=True)``).

Everything is deterministic: fixed ids and timestamps for constructed events, and ADK's
``platform.time`` / ``platform.uuid`` providers replaced by counters while ADK runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import warnings
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pydantic
from fastapi.openapi.models import HTTPBearer, OAuth2, OAuthFlowAuthorizationCode, OAuthFlows
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import (  # type: ignore[attr-defined]  # StreamingMode: not re-exported
    RunConfig,
    StreamingMode,
)
from google.adk.apps._configs import EventsCompactionConfig
from google.adk.apps.app import App
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.artifacts import InMemoryArtifactService
from google.adk.auth.auth_credential import (
    AuthCredential,
    AuthCredentialTypes,
    HttpAuth,
    HttpCredentials,
    OAuth2Auth,
)
from google.adk.auth.auth_tool import AuthConfig
from google.adk.events.event import Event, NodeInfo
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.events.ui_widget import UiWidget
from google.adk.models.base_llm import BaseLlm
from google.adk.models.cache_metadata import CacheMetadata
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.platform import time as adk_time, uuid as adk_uuid
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext
from google.adk.workflow import START, Workflow
from google.genai import types
from hypothesis import strategies as st

from contextengine.core.errors import ContextEngineError

#: 2026-01-01T00:00:00Z; every timestamp in the corpus is an offset from it.
T0 = 1_767_225_600.0

#: The warnings google-adk 2.13 emits while the corpus is built, as (message regex, category).
#: Tests that touch ADK use the same list as ``pytest.mark.filterwarnings`` marks.
ADK_WARNINGS: tuple[tuple[str, type[Warning]], ...] = (
    # @experimental on EventsCompactionConfig (apps/_configs.py).
    (r"\[EXPERIMENTAL\] EventsCompactionConfig", UserWarning),
    # AuthConfig.__init__ calls its own deprecated get_credential_key() (auth/auth_tool.py).
    (r"This method is deprecated\. Use credential_key instead\.", DeprecationWarning),
)

#: The same filters in ``pytest.mark.filterwarnings`` syntax.
ADK_WARNING_MARKS: tuple[str, ...] = tuple(
    f"ignore:{message}:{category.__name__}" for message, category in ADK_WARNINGS
)


@contextlib.contextmanager
def adk_warnings_ignored() -> Iterator[None]:
    """Ignores exactly :data:`ADK_WARNINGS` (the corpus is built at collection time, before any
    ``filterwarnings`` mark applies)."""
    with warnings.catch_warnings():
        for message, category in ADK_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield


@dataclass(frozen=True)
class Case:
    """One corpus event."""

    name: str
    event: Event
    #: False when ADK itself does not reload its own JSON to an equal event (auth configs: the
    #: fastapi security-scheme models come back with an extra ``type_`` attribute; ``message=``:
    #: a ``UserContent`` comes back as a ``Content``). The round-trip is then compared with ADK's
    #: own reload.
    adk_self_roundtrip: bool = True
    #: Key of :data:`KNOWN_MISMATCHES` when this event is known not to round-trip.
    mismatch: str | None = None


@dataclass(frozen=True)
class Mismatch:
    """A documented way in which an ADK event does not survive the proto."""

    reason: str
    #: What the round-trip check raises for it.
    raises: type[BaseException]


#: Every known mismatch: key -> short reason and what the round-trip check raises.
KNOWN_MISMATCHES: dict[str, Mismatch] = {
    # long_running_tool_ids, Content.parts, NodeInfo.output_for, usage *_details,
    # FunctionCall.partial_args, FunctionResponse.parts, Transcription.words, render_ui_widgets.
    "empty-list": Mismatch("empty typed list comes back as None", AssertionError),
    # 0.0 is not printed; ADK fills in the current time.
    "zero-event-timestamp": Mismatch("timestamp 0.0 comes back as now", AssertionError),
    "json-integer-precision": Mismatch("JSON integer beyond 2**53 loses precision", AssertionError),
    # Token counts, artifact versions, cache counters are unbounded ints in ADK.
    "int32-overflow": Mismatch("int above int32 is rejected", ContextEngineError),
    # json_format.Parse's max_recursion_depth=100; a JSON level is a Value plus a Struct.
    "json-depth": Mismatch("JSON value nested ~50 levels is rejected", ContextEngineError),
    # Inside Struct/Value 1.0 comes back as 1: equal in Python, but ADK then dumps "1".
    "integral-float": Mismatch("integral float in a JSON value comes back as int", AssertionError),
}


def known_mismatch_of(event: Event) -> str | None:
    """The known mismatch a runner-produced event runs into, if any: empty lists (ADK's runner
    sets ``long_running_tool_ids`` to an empty set on every function-call event and keeps an
    empty model response as ``Content(parts=[])``) or an integral float in a JSON value (a tool
    returning ``4 * 2.5``)."""
    if event.long_running_tool_ids == set():
        return "empty-list"
    contents = [event.content]
    if event.actions.compaction is not None:
        contents.append(event.actions.compaction.compacted_content)
    if any(content is not None and content.parts == [] for content in contents):
        return "empty-list"
    if any(_has_integral_float(value) for value in _json_values_of(event)):
        return "integral-float"
    return None


def _json_values_of(event: Event) -> Iterator[Any]:
    """The values of ``event`` that the proto stores as ``Struct`` / ``Value``."""
    yield event.output
    yield event.custom_metadata
    actions = event.actions
    yield actions.state_delta
    yield actions.agent_state
    yield actions.set_model_response
    yield [confirmation.payload for confirmation in actions.requested_tool_confirmations.values()]
    contents = [event.content]
    if actions.compaction is not None:
        contents.append(actions.compaction.compacted_content)
    for content in contents:
        for part in (content.parts or []) if content is not None else []:
            yield part.part_metadata
            if part.function_call is not None:
                yield part.function_call.args
            if part.function_response is not None:
                yield part.function_response.response
            if part.tool_call is not None:
                yield part.tool_call.args
            if part.tool_response is not None:
                yield part.tool_response.response


def _has_integral_float(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_has_integral_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_integral_float(item) for item in value)
    return False


def as_it_comes_back(event: Event) -> Event:
    """``event`` with the empty lists ADK's runner produces replaced by None, which is what the
    proto round-trip returns (see ``empty-list``; integral floats compare equal anyway)."""
    data = event.model_dump(mode="json", exclude_none=True)
    if data.get("long_running_tool_ids") == []:
        del data["long_running_tool_ids"]
    compaction = data["actions"].get("compaction") or {}
    for content in (data.get("content"), compaction.get("compacted_content")):
        if content is not None and content.get("parts") == []:
            del content["parts"]
    return Event.model_validate_json(json.dumps(data))


# --------------------------------------------------------------------------------------------
# (a) constructed events
# --------------------------------------------------------------------------------------------

ALL_BYTES = bytes(range(256))


def _ev(n: int, **fields: Any) -> Event:
    """An event with fixed id, invocation id and timestamp (overridable)."""
    defaults: dict[str, Any] = {
        "id": f"evt-{n:04d}",
        "invocation_id": f"e-inv-{n // 10:03d}",
        "author": "assistant",
        "timestamp": T0 + n + 0.125,
    }
    defaults.update(fields)
    return Event(**defaults)


def _usage(**fields: Any) -> types.GenerateContentResponseUsageMetadata:
    return types.GenerateContentResponseUsageMetadata(**fields)


def _auth_configs() -> dict[str, AuthConfig]:
    bearer = AuthConfig(
        auth_scheme=HTTPBearer(bearerFormat="JWT"),
        raw_auth_credential=AuthCredential(
            auth_type=AuthCredentialTypes.HTTP,
            http=HttpAuth(scheme="bearer", credentials=HttpCredentials(token="t0k3n")),
        ),
    )
    oauth = AuthConfig(
        auth_scheme=OAuth2(
            flows=OAuthFlows(
                authorizationCode=OAuthFlowAuthorizationCode(
                    authorizationUrl="https://auth.example.com/authorize",
                    tokenUrl="https://auth.example.com/token",
                    scopes={"calendar.read": "Read your calendar"},
                )
            )
        ),
        raw_auth_credential=AuthCredential(
            auth_type=AuthCredentialTypes.OAUTH2,
            oauth2=OAuth2Auth(client_id="client-1", client_secret="s3cret"),
        ),
    )
    return {"adk-call-auth-1": bearer, "adk-call-auth-2": oauth}


def constructed_cases() -> list[Case]:
    """Events built from ADK's and google-genai's own classes."""
    with adk_warnings_ignored():
        return _constructed_cases()


def _constructed_cases() -> list[Case]:
    nested_json: dict[str, Any] = {
        "int": 7,
        "negative": -12,
        "float": 2.5,
        "tiny": 1e-300,
        "huge": 1.5e300,
        "neg_zero": -0.0,
        "bool": False,
        "null": None,
        "empty_string": "",
        "empty_list": [],
        "empty_object": {},
        "list": [1, "two", 3.25, None, True, [[]], {"k": [None]}],
        "unicode": "naïve café – 日本語 – 🙂 – עברית – \u0000nul",
        "deep": {"a": {"b": {"c": {"d": [1, {"e": None}]}}}},
    }
    cases = [
        Case(
            "user-text",
            _ev(
                1,
                author="user",
                content=types.Content(role="user", parts=[types.Part(text="Hello there")]),
            ),
        ),
        Case(
            "model-text-unicode",
            _ev(
                2,
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(text='Grüße, 世界! Ça va? 🚀🧪 — “quoted” \t\n\\ "escaped"'),
                        types.Part(text=""),
                        types.Part(text="not a thought", thought=False),
                        types.Part(text="\u200b\u202e right-to-left \U0010ffff"),
                    ],
                ),
                model_version="gemini-2.5-flash-001",
                finish_reason=types.FinishReason.STOP,
            ),
        ),
        Case(
            "thought-function-call",
            _ev(
                3,
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            text="I should look this up.",
                            thought=True,
                            thought_signature=ALL_BYTES,
                        ),
                        types.Part(
                            function_call=types.FunctionCall(
                                id="adk-0001",
                                name="search",
                                args={
                                    "query": "weather in Zürich",
                                    "limit": 3,
                                    "opts": nested_json,
                                },
                                will_continue=False,
                            ),
                            thought_signature=b"\x00",
                        ),
                        types.Part(
                            function_call=types.FunctionCall(
                                name="no_args_no_id",
                            )
                        ),
                        types.Part(function_call=types.FunctionCall(name="empty_args", args={})),
                    ],
                ),
            ),
        ),
        Case(
            "streaming-function-call",
            _ev(
                4,
                partial=True,
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            function_call=types.FunctionCall(
                                id="fc-stream",
                                name="write_file",
                                partial_args=[
                                    types.PartialArg(json_path="$.path", string_value="/tmp/ä"),
                                    types.PartialArg(json_path="$.size", number_value=12.5),
                                    types.PartialArg(json_path="$.force", bool_value=True),
                                    types.PartialArg(
                                        json_path="$.mode",
                                        null_value="NULL_VALUE",
                                        will_continue=True,
                                    ),
                                ],
                                will_continue=True,
                            )
                        )
                    ],
                ),
            ),
        ),
        Case(
            "function-response-rich",
            _ev(
                5,
                content=types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                id="adk-0001",
                                name="search",
                                response={"result": nested_json, "count": 0},
                                will_continue=True,
                                scheduling=types.FunctionResponseScheduling.WHEN_IDLE,
                                parts=[
                                    types.FunctionResponsePart(
                                        inline_data=types.FunctionResponseBlob(
                                            mime_type="image/png",
                                            data=ALL_BYTES,
                                            display_name="chart.png",
                                        )
                                    ),
                                    types.FunctionResponsePart(
                                        file_data=types.FunctionResponseFileData(
                                            file_uri="gs://bucket/report.pdf",
                                            mime_type="application/pdf",
                                        )
                                    ),
                                ],
                            )
                        ),
                        types.Part(
                            function_response=types.FunctionResponse(
                                id="adk-0002", name="noop", response={}
                            )
                        ),
                    ],
                ),
                actions=EventActions(skip_summarization=True),
            ),
        ),
        Case(
            "media-parts",
            _ev(
                6,
                author="user",
                content=types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            inline_data=types.Blob(
                                data=ALL_BYTES,
                                mime_type="application/octet-stream",
                                display_name="all.bin",
                            )
                        ),
                        types.Part(inline_data=types.Blob(data=b"", mime_type="text/plain")),
                        types.Part(
                            file_data=types.FileData(
                                file_uri="gs://bucket/clip.mp4",
                                mime_type="video/mp4",
                                display_name="clip",
                            ),
                            video_metadata=types.VideoMetadata(
                                start_offset="1.5s", end_offset="10s", fps=0.0
                            ),
                            media_resolution=types.PartMediaResolution(
                                level=types.PartMediaResolutionLevel.MEDIA_RESOLUTION_HIGH,
                                num_tokens=280,
                            ),
                        ),
                        types.Part(
                            inline_data=types.Blob(data=b"\xff\xfe\xfd", mime_type="audio/pcm"),
                            video_metadata=types.VideoMetadata(fps=29.97),
                            part_metadata={"source": "mic", "gain": 0.5, "channels": 2},
                        ),
                    ],
                ),
            ),
        ),
        Case(
            "code-execution",
            _ev(
                7,
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            executable_code=types.ExecutableCode(
                                code="print(sum(range(10)))\n",
                                language=types.Language.PYTHON,
                                id="code-1",
                            )
                        ),
                        types.Part(
                            code_execution_result=types.CodeExecutionResult(
                                outcome=types.Outcome.OUTCOME_OK, output="45\n", id="code-1"
                            )
                        ),
                        types.Part(
                            code_execution_result=types.CodeExecutionResult(
                                outcome=types.Outcome.OUTCOME_DEADLINE_EXCEEDED
                            )
                        ),
                    ],
                ),
            ),
        ),
        Case(
            "server-tools",
            _ev(
                8,
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            tool_call=types.ToolCall(
                                id="tc-1",
                                tool_type=types.ToolType.GOOGLE_SEARCH_WEB,
                                args={"queries": ["adk", "proto"], "n": 2},
                            ),
                            thought_signature=b"sig-tool",
                        ),
                        types.Part(
                            tool_response=types.ToolResponse(
                                id="tc-1",
                                tool_type=types.ToolType.GOOGLE_SEARCH_WEB,
                                response={"results": [{"title": "A", "score": 0.25}]},
                            ),
                            part_metadata={},
                        ),
                    ],
                ),
            ),
        ),
        Case(
            "live-transcriptions",
            _ev(
                9,
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            inline_data=types.Blob(
                                data=b"\x01\x02", mime_type="audio/pcm;rate=24000"
                            ),
                            audio_transcription=types.Transcription(
                                text="hola", finished=False, language_code="es-ES"
                            ),
                        )
                    ],
                ),
                input_transcription=types.Transcription(
                    text="¿Qué tal?",
                    finished=True,
                    language_code="es-ES",
                    speaker_label="speaker-1",
                    start_offset="0s",
                    end_offset="1.25s",
                    words=[
                        types.WordInfo(word="¿Qué", start_offset="0s", end_offset="0.5s"),
                        types.WordInfo(word="tal?"),
                    ],
                ),
                output_transcription=types.Transcription(text="", finished=True),
                turn_complete=True,
                turn_complete_reason=types.TurnCompleteReason.NEED_MORE_INPUT,
                interaction_status=types.InteractionStatus.IDLE,
                interrupted=False,
                live_session_id="live-123",
                live_session_resumption_update=types.LiveServerSessionResumptionUpdate(
                    new_handle="handle-9", resumable=True, last_consumed_client_message_index=41
                ),
                go_away=types.LiveServerGoAway(time_left="30s"),
                voice_activity=types.VoiceActivity(
                    voice_activity_type=types.VoiceActivityType.ACTIVITY_END, audio_offset="2.5s"
                ),
            ),
        ),
        Case(
            "usage-and-logprobs",
            _ev(
                10,
                content=types.Content(role="model", parts=[types.Part(text="ok")]),
                usage_metadata=_usage(
                    prompt_token_count=0,
                    candidates_token_count=1,
                    total_token_count=1,
                    cached_content_token_count=0,
                    thoughts_token_count=12,
                    tool_use_prompt_token_count=3,
                    traffic_type=types.TrafficType.ON_DEMAND,
                    prompt_tokens_details=[
                        types.ModalityTokenCount(modality=types.MediaModality.TEXT, token_count=0),
                        types.ModalityTokenCount(modality=types.MediaModality.IMAGE),
                    ],
                    candidates_tokens_details=[
                        types.ModalityTokenCount(modality=types.MediaModality.TEXT, token_count=1)
                    ],
                    cache_tokens_details=[types.ModalityTokenCount(token_count=5)],
                    tool_use_prompt_tokens_details=[
                        types.ModalityTokenCount(modality=types.MediaModality.AUDIO, token_count=3)
                    ],
                ),
                avg_logprobs=-0.123456789012345,
                logprobs_result=types.LogprobsResult(
                    chosen_candidates=[
                        types.LogprobsResultCandidate(token="ok", token_id=3, log_probability=-0.25)
                    ],
                    top_candidates=[
                        types.LogprobsResultTopCandidates(
                            candidates=[
                                types.LogprobsResultCandidate(token="ok", log_probability=-0.25),
                                types.LogprobsResultCandidate(token="OK", log_probability=-2.0),
                            ]
                        )
                    ],
                    log_probability_sum=-0.25,
                ),
            ),
        ),
        Case(
            "grounding-citations",
            _ev(
                11,
                content=types.Content(role="model", parts=[types.Part(text="Zürich is sunny.")]),
                grounding_metadata=types.GroundingMetadata(
                    web_search_queries=["weather zurich"],
                    search_entry_point=types.SearchEntryPoint(
                        rendered_content="<div>search</div>", sdk_blob=ALL_BYTES
                    ),
                    grounding_chunks=[
                        types.GroundingChunk(
                            web=types.GroundingChunkWeb(
                                uri="https://example.com/w", title="Weather", domain="example.com"
                            )
                        )
                    ],
                    grounding_supports=[
                        types.GroundingSupport(
                            grounding_chunk_indices=[0],
                            confidence_scores=[0.9, 1.0],
                            segment=types.Segment(
                                start_index=0, end_index=16, text="Zürich is sunny"
                            ),
                        )
                    ],
                    retrieval_metadata=types.RetrievalMetadata(
                        google_search_dynamic_retrieval_score=0.0
                    ),
                ),
                citation_metadata=types.CitationMetadata(
                    citations=[
                        types.Citation(
                            start_index=0,
                            end_index=5,
                            uri="https://example.com/c",
                            title="Source",
                            license="CC-BY",
                            publication_date=types.GoogleTypeDate(year=2024, month=2, day=29),
                        )
                    ]
                ),
            ),
        ),
        Case(
            "error-response",
            _ev(
                12,
                error_code="RESOURCE_EXHAUSTED",
                error_message="Quota exceeded — try again later",
                finish_reason=types.FinishReason.MALFORMED_FUNCTION_CALL,
                model_version="gemini-x",
            ),
        ),
        Case(
            "cache-metadata-active",
            _ev(
                13,
                content=types.Content(role="model", parts=[types.Part(text="cached")]),
                cache_metadata=CacheMetadata(
                    cache_name="projects/p/locations/l/cachedContents/c-1",
                    expire_time=T0 + 1800.5,
                    fingerprint="9f86d081884c7d65",
                    invocations_used=0,
                    contents_count=4,
                    created_at=T0 + 0.5,
                ),
                interaction_id="int-1",
                environment_id="env-1",
                custom_metadata={"__adk_internal_restored_event": True, "trace": {"id": 1}},
            ),
        ),
        Case(
            "cache-metadata-fingerprint-only",
            _ev(
                14,
                content=types.Content(role="model", parts=[types.Part(text="fp")]),
                cache_metadata=CacheMetadata(fingerprint="abc", contents_count=1),
                custom_metadata={},
            ),
        ),
        Case(
            "state-and-artifacts",
            _ev(
                15,
                actions=EventActions(
                    state_delta={
                        "app:theme": "dark",
                        "user:name": "Zoë",
                        "temp:scratch": [1, 2],
                        "counter": 3,
                        "deleted": None,
                        "nested": nested_json,
                        "": "empty key",
                    },
                    artifact_delta={"report.pdf": 0, "notes/ä.txt": 2_147_483_647},
                    transfer_to_agent="billing_agent",
                    transfer_reason="user asked about invoices",
                    escalate=False,
                    skip_summarization=False,
                ),
            ),
        ),
        Case(
            "hitl-confirmation",
            _ev(
                16,
                long_running_tool_ids={"adk-call-b", "adk-call-a", "adk-call-c"},
                actions=EventActions(
                    requested_tool_confirmations={
                        "adk-call-a": ToolConfirmation(hint="Delete /tmp/x?"),
                        "adk-call-b": ToolConfirmation(
                            hint="", confirmed=True, payload={"approved_by": "ops", "n": 1}
                        ),
                        "adk-call-c": ToolConfirmation(payload=["a", 1, None]),
                        "adk-call-d": ToolConfirmation(payload="plain string"),
                    },
                    escalate=True,
                ),
            ),
        ),
        Case(
            "hitl-auth",
            _ev(17, actions=EventActions(requested_auth_configs=_auth_configs())),
            adk_self_roundtrip=False,
        ),
        Case(
            "compaction",
            _ev(
                18,
                author="user",
                invocation_id="5c0d2a9e-0000-4000-8000-000000000018",
                actions=EventActions(
                    compaction=EventCompaction(
                        start_timestamp=T0 + 1.125,
                        end_timestamp=T0 + 15.125,
                        compacted_content=types.Content(
                            role="model",
                            parts=[
                                types.Part(text="Conversation Language: English\nSummary…"),
                                types.Part(text="hidden reasoning", thought=True),
                            ],
                        ),
                    )
                ),
                usage_metadata=_usage(prompt_token_count=812, total_token_count=900),
            ),
        ),
        Case(
            "rewind",
            _ev(
                19,
                author="user",
                actions=EventActions(
                    rewind_before_invocation_id="e-inv-001",
                    state_delta={"counter": None, "user:name": "Zoe"},
                    artifact_delta={"report.pdf": 3},
                ),
            ),
        ),
        Case(
            "workflow-node",
            _ev(
                20,
                author="planner",
                output={"plan": ["a", "b"], "score": 0.75, "n": 2, "done": False, "none": None},
                node_info=NodeInfo(
                    path="wf@1/planner@2",
                    output_for=["wf@1/planner@2", "wf@1"],
                    message_as_output=True,
                ),
                content=types.Content(role="model", parts=[types.Part(text="plan ready")]),
                actions=EventActions(
                    end_of_agent=True,
                    agent_state={"step": 3, "visited": ["a"], "cursor": None},
                    route=["approve", 2, True],
                    set_model_response={"answer": 42, "confidence": 0.5},
                    render_ui_widgets=[
                        UiWidget(
                            id="w-1",
                            provider="mcp",
                            payload={"resource_uri": "ui://chart", "tool_args": {"n": 3}},
                        ),
                        UiWidget(id="w-2", provider="custom"),
                    ],
                ),
            ),
        ),
        Case(
            "workflow-scalars",
            _ev(
                21,
                author="router",
                output="just a string",
                node_info=NodeInfo(path="wf@1/router@1", message_as_output=False),
                actions=EventActions(route=7, set_model_response=0, end_of_agent=False),
            ),
        ),
        Case("workflow-bool-route", _ev(22, output=False, actions=EventActions(route=True))),
        Case("workflow-string-route", _ev(23, output=0, actions=EventActions(route="DEFAULT"))),
        Case("workflow-list-output", _ev(24, output=[None, 1.5, "x", [], {}])),
        Case(
            "branch-scope",
            _ev(
                25,
                author="coder",
                branch="root.planner@1.coder",
                isolation_scope="adk-call-task-1",
                content=types.Content(role="model", parts=[types.Part(text="in scope")]),
            ),
        ),
        Case(
            "empty-strings",
            _ev(
                26,
                author="",
                invocation_id="",
                branch="",
                isolation_scope="",
                model_version="",
                error_code="",
                error_message="",
                live_session_id="",
                interaction_id="",
                environment_id="",
                content=types.Content(role="", parts=[types.Part(text="", thought=False)]),
                actions=EventActions(
                    transfer_to_agent="", rewind_before_invocation_id="", route=""
                ),
                node_info=NodeInfo(path=""),
            ),
        ),
        Case(
            "zero-numbers",
            _ev(
                27,
                avg_logprobs=0.0,
                partial=False,
                turn_complete=False,
                interrupted=True,
                usage_metadata=_usage(
                    prompt_token_count=0,
                    candidates_token_count=0,
                    total_token_count=0,
                    cached_content_token_count=0,
                    thoughts_token_count=0,
                    tool_use_prompt_token_count=0,
                ),
                content=types.Content(
                    parts=[types.Part(video_metadata=types.VideoMetadata(fps=0.0))]
                ),
                actions=EventActions(route=0, artifact_delta={"zero": 0}),
            ),
        ),
        Case("defaults-only", Event(id="evt-defaults", timestamp=T0 + 0.5)),
        Case(
            "negative-and-tiny-timestamps",
            _ev(
                28,
                timestamp=-1.5,
                actions=EventActions(
                    compaction=EventCompaction(
                        start_timestamp=5e-324,
                        end_timestamp=1.7976931348623157e308,
                        compacted_content=types.Content(parts=[types.Part(text="x")]),
                    )
                ),
            ),
        ),
        Case(
            "convenience-kwargs",
            Event(  # type: ignore[call-arg]  # ADK's convenience kwargs (taken by a validator)
                id="evt-conv",
                timestamp=T0 + 29,
                author="user",
                message="made with message=",
                state={"k": "v"},
                route="next",
                node_path="wf@1/start@1",
            ),
            # message= builds a genai UserContent, which reloads as a plain Content.
            adk_self_roundtrip=False,
        ),
    ]
    return cases


# --------------------------------------------------------------------------------------------
# (b) events produced by running ADK
# --------------------------------------------------------------------------------------------


class ScriptedLlm(BaseLlm):
    """A fake model: each call pops the next scripted turn, either one response or a list of
    chunks (streaming)."""

    script: list[LlmResponse | list[LlmResponse]] = pydantic.Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if not self.script:
            raise AssertionError(f"model {self.model!r} called more often than scripted")
        turn = self.script.pop(0)
        for response in turn if isinstance(turn, list) else [turn]:
            yield response


def _text(text: str, **fields: Any) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]), **fields)


def _calls(*calls: tuple[str, dict[str, Any]], **fields: Any) -> LlmResponse:
    parts = [types.Part(function_call=types.FunctionCall(name=n, args=a)) for n, a in calls]
    return LlmResponse(content=types.Content(role="model", parts=parts), **fields)


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def _function_response(call_id: str, name: str, response: dict[str, Any]) -> types.Content:
    part = types.Part(
        function_response=types.FunctionResponse(id=call_id, name=name, response=response)
    )
    return types.Content(role="user", parts=[part])


# Tools. Their docstrings become the tool descriptions the fake model never reads.


def add(a: int, b: int, tool_context: ToolContext) -> dict[str, Any]:
    """Adds two integers."""
    tool_context.state["last_sum"] = a + b
    return {"sum": a + b}


def scale(x: float, factor: float) -> dict[str, Any]:
    """Multiplies."""
    return {"product": x * factor, "inputs": [x, factor], "note": None}


def open_ticket(title: str) -> dict[str, Any]:
    """Opens a ticket; the answer arrives later."""
    return {"status": "pending", "ticket": "T-1", "title": title}


def delete_file(path: str) -> dict[str, Any]:
    """Deletes a file (needs the user's confirmation)."""
    return {"deleted": path}


async def read_calendar(day: str, tool_context: ToolContext) -> dict[str, Any]:
    """Needs OAuth credentials."""
    tool_context.request_credential(_auth_configs()["adk-call-auth-2"])
    return {"pending": "auth", "day": day}


async def save_note(name: str, tool_context: ToolContext) -> dict[str, Any]:
    """Saves an artifact and writes user and temp state."""
    version = await tool_context.save_artifact(name, types.Part(text="note body ✓"))
    tool_context.state["user:last_note"] = name
    tool_context.state["temp:scratch"] = {"dropped": True}
    return {"version": version}


def give_up(reason: str, tool_context: ToolContext) -> dict[str, Any]:
    """Escalates to the parent and skips summarisation."""
    tool_context.actions.escalate = True
    tool_context.actions.skip_summarization = True
    return {"escalated": reason}


class _Clock:
    """Deterministic ADK time and ids: each call advances by a fixed step / counter."""

    def __init__(self) -> None:
        self._ticks = itertools.count(1)
        self._ids = itertools.count(1)

    def time(self) -> float:
        return T0 + 1000.0 + next(self._ticks) * 0.25

    def uuid(self) -> str:
        return f"00000000-0000-4000-8000-{next(self._ids):012d}"


class _Scenario:
    """One runner, one session; records every event the runner yields."""

    def __init__(self, name: str, app: App, *, artifacts: bool = False) -> None:
        self.name = name
        self.sessions = InMemorySessionService()
        self.runner = Runner(
            app=app,
            session_service=self.sessions,
            artifact_service=InMemoryArtifactService() if artifacts else None,
        )
        self.app_name = app.name
        self.yielded: list[Event] = []

    async def start(self) -> None:
        await self.sessions.create_session(app_name=self.app_name, user_id="u1", session_id="s1")

    async def send(self, message: types.Content, run_config: RunConfig | None = None) -> None:
        async for event in self.runner.run_async(
            user_id="u1", session_id="s1", new_message=message, run_config=run_config
        ):
            self.yielded.append(event.model_copy(deep=True))

    async def events(self) -> list[Event]:
        session = await self.sessions.get_session(
            app_name=self.app_name, user_id="u1", session_id="s1"
        )
        assert session is not None
        return list(session.events)

    async def cases(self) -> list[Case]:
        stored = await self.events()
        # Partial (streaming) events are yielded but never stored; keep them too.
        extra = [event for event in self.yielded if event.partial]
        out = []
        for index, event in enumerate(stored + extra):
            out.append(
                Case(
                    f"{self.name}-{index:02d}-{_label(event)}",
                    event.model_copy(deep=True),
                    adk_self_roundtrip=not event.actions.requested_auth_configs,
                    mismatch=known_mismatch_of(event),
                )
            )
        return out


def _label(event: Event) -> str:
    if event.partial:
        return "partial"
    if event.actions.compaction is not None:
        return "compaction"
    if event.actions.rewind_before_invocation_id is not None:
        return "rewind"
    if event.error_code is not None:
        return "error"
    if event.output is not None:
        return "output"
    if event.get_function_calls():
        return "call"
    if event.get_function_responses():
        return "response"
    if event.content is not None and event.content.parts:
        return "text"
    return "other"


async def _tools_scenario() -> list[Case]:
    model = ScriptedLlm(
        model="fake-pro",
        script=[
            LlmResponse(
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            text="Two independent calls.",
                            thought=True,
                            thought_signature=b"\x00sig\xff",
                        ),
                        types.Part(
                            function_call=types.FunctionCall(name="add", args={"a": 2, "b": 3})
                        ),
                        types.Part(
                            function_call=types.FunctionCall(
                                name="scale", args={"x": 4, "factor": 2.5}
                            )
                        ),
                    ],
                ),
                usage_metadata=_usage(
                    prompt_token_count=120,
                    candidates_token_count=14,
                    thoughts_token_count=9,
                    total_token_count=143,
                    prompt_tokens_details=[
                        types.ModalityTokenCount(modality=types.MediaModality.TEXT, token_count=120)
                    ],
                ),
                model_version="fake-pro-001",
            ),
            _text("2 + 3 = 5 and 4 × 2.5 = 10.", finish_reason=types.FinishReason.STOP),
            _calls(("open_ticket", {"title": "Printer on fire"})),
            _text("Ticket is pending."),
            _text("Ticket T-1 is resolved."),
            _calls(("delete_file", {"path": "/tmp/old.log"})),
            _text("Deleted."),
            _calls(("give_up", {"reason": "out of scope"})),
        ],
    )
    agent = LlmAgent(
        name="calc",
        model=model,
        instruction="Use the tools.",
        tools=[
            FunctionTool(add),
            FunctionTool(scale),
            LongRunningFunctionTool(open_ticket),
            FunctionTool(delete_file, require_confirmation=True),
            FunctionTool(give_up),
        ],
    )
    scenario = _Scenario("tools", App(name="parity_tools", root_agent=agent))
    await scenario.start()
    await scenario.send(_user("add 2 and 3, and scale 4 by 2.5"))
    await scenario.send(_user("open a ticket"))
    ticket_call = next(
        call
        for e in scenario.yielded
        for call in e.get_function_calls()
        if call.name == "open_ticket"
    )
    assert ticket_call.id is not None
    await scenario.send(_function_response(ticket_call.id, "open_ticket", {"status": "resolved"}))
    await scenario.send(_user("delete /tmp/old.log"))
    confirmation_call = next(
        call
        for e in scenario.yielded
        for call in e.get_function_calls()
        if call.name == "adk_request_confirmation"
    )
    assert confirmation_call.id is not None
    await scenario.send(
        _function_response(confirmation_call.id, "adk_request_confirmation", {"confirmed": True})
    )
    await scenario.send(_user("this is beyond you"))
    return await scenario.cases()


async def _hitl_scenario() -> list[Case]:
    model = ScriptedLlm(
        model="fake-flash",
        script=[
            _calls(("read_calendar", {"day": "2026-01-02"})),
            _calls(("save_note", {"name": "notes/ünïcode.txt"})),
            _text("Saved."),
        ],
    )
    agent = LlmAgent(
        name="assistant",
        model=model,
        tools=[FunctionTool(read_calendar), FunctionTool(save_note)],
    )
    scenario = _Scenario("hitl", App(name="parity_hitl", root_agent=agent), artifacts=True)
    await scenario.start()
    await scenario.send(_user("what is on my calendar?"))
    await scenario.send(_user("save a note"))
    return await scenario.cases()


async def _transfer_scenario() -> list[Case]:
    model = ScriptedLlm(
        model="fake-flash",
        script=[
            _calls(("transfer_to_agent", {"agent_name": "helper"})),
            _text("Helper here."),
            LlmResponse(content=types.Content(role="model", parts=[])),
            LlmResponse(error_code="RESOURCE_EXHAUSTED", error_message="quota exhausted"),
        ],
    )
    helper = LlmAgent(name="helper", model=model, instruction="Help.")
    root = LlmAgent(name="root", model=model, instruction="Route.", sub_agents=[helper])
    scenario = _Scenario("transfer", App(name="parity_transfer", root_agent=root))
    await scenario.start()
    await scenario.send(_user("I need the helper"))
    await scenario.send(_user("say nothing"))
    await scenario.send(_user("fail please"))
    return await scenario.cases()


async def _streaming_scenario() -> list[Case]:
    final_parts = [
        types.Part(text="Let me think.", thought=True),
        types.Part(text="Streaming works."),
    ]
    model = ScriptedLlm(
        model="fake-stream",
        script=[
            [
                LlmResponse(
                    content=types.Content(
                        role="model", parts=[types.Part(text="Let me think.", thought=True)]
                    ),
                    partial=True,
                ),
                LlmResponse(
                    content=types.Content(role="model", parts=[types.Part(text="Streaming ")]),
                    partial=True,
                ),
                LlmResponse(
                    content=types.Content(role="model", parts=[types.Part(text="works.")]),
                    partial=True,
                ),
                LlmResponse(
                    content=types.Content(role="model", parts=final_parts),
                    partial=False,
                    turn_complete=True,
                    finish_reason=types.FinishReason.STOP,
                    usage_metadata=_usage(prompt_token_count=30, total_token_count=36),
                ),
            ]
        ],
    )
    agent = LlmAgent(name="streamer", model=model)
    scenario = _Scenario("streaming", App(name="parity_streaming", root_agent=agent))
    await scenario.start()
    await scenario.send(_user("stream it"), RunConfig(streaming_mode=StreamingMode.SSE))
    return await scenario.cases()


async def _compaction_scenario() -> tuple[list[Case], list[Event]]:
    model = ScriptedLlm(
        model="fake-flash",
        script=[
            _text(f"Answer {i}.", usage_metadata=_usage(prompt_token_count=10 * i))
            for i in range(1, 5)
        ],
    )
    summarizer_model = ScriptedLlm(
        model="fake-summarizer",
        script=[
            LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=f"Summary {i}: …")]),
                usage_metadata=_usage(
                    prompt_token_count=0, candidates_token_count=5, total_token_count=5
                ),
            )
            for i in range(1, 4)
        ],
    )
    agent = LlmAgent(name="chat", model=model)
    app = App(
        name="parity_compaction",
        root_agent=agent,
        events_compaction_config=EventsCompactionConfig(
            compaction_interval=2,
            overlap_size=1,
            summarizer=LlmEventSummarizer(llm=summarizer_model),
        ),
    )
    scenario = _Scenario("compaction", app)
    await scenario.start()
    for i in range(1, 5):
        await scenario.send(_user(f"Question {i}"))
    events = await scenario.events()
    third_invocation = [e.invocation_id for e in events if e.author == "user" and e.content][2]
    await scenario.runner.rewind_async(
        user_id="u1", session_id="s1", rewind_before_invocation_id=third_invocation
    )
    return await scenario.cases(), events


async def _summarizer_scenario(events: list[Event]) -> list[Case]:
    """LlmEventSummarizer called directly on raw events, with a thought in the summary."""
    summarizer_model = ScriptedLlm(
        model="fake-summarizer",
        script=[
            LlmResponse(
                content=types.Content(
                    role="assistant",
                    parts=[
                        types.Part(text="Weighing what matters.", thought=True),
                        types.Part(
                            text="Conversation Language: English\nThe user asked 2 questions."
                        ),
                    ],
                ),
                usage_metadata=_usage(
                    prompt_token_count=321, candidates_token_count=20, total_token_count=341
                ),
            )
        ],
    )
    summarizer = LlmEventSummarizer(llm=summarizer_model)
    raw = [e for e in events if e.actions.compaction is None][:4]
    compaction = await summarizer.maybe_summarize_events(events=raw)
    assert compaction is not None
    return [Case("summarizer-00-compaction", compaction)]


def _classify(node_input: str) -> Event:
    return Event(
        output={"kind": "greeting", "score": 0.75, "n": 3}, actions=EventActions(route="greet")
    )


def _greet(node_input: dict[str, Any]) -> dict[str, Any]:
    return {"reply": "hello", "seen": node_input, "items": [1, 2.5, None]}


def _other(node_input: dict[str, Any]) -> str:
    return "other"


async def _workflow_scenario() -> list[Case]:
    workflow = Workflow(
        name="wf",
        edges=[(START, _classify), (_classify, {"greet": _greet, "other": _other})],
    )
    scenario = _Scenario("workflow", App(name="parity_workflow", root_agent=workflow))
    await scenario.start()
    await scenario.send(_user("hi"))
    return await scenario.cases()


async def _run_all() -> list[Case]:
    clock = _Clock()
    adk_time.set_time_provider(clock.time)
    adk_uuid.set_id_provider(clock.uuid)
    try:
        cases = await _tools_scenario()
        cases += await _hitl_scenario()
        cases += await _transfer_scenario()
        cases += await _streaming_scenario()
        compaction_cases, compaction_events = await _compaction_scenario()
        cases += compaction_cases
        cases += await _summarizer_scenario(compaction_events)
        cases += await _workflow_scenario()
        return cases
    finally:
        adk_time.reset_time_provider()
        adk_uuid.reset_id_provider()


@cache
def runner_cases() -> tuple[Case, ...]:
    """Events produced by running ADK (run once per process; safe to call at collection time,
    when no event loop is running)."""
    with adk_warnings_ignored():
        return tuple(asyncio.run(_run_all()))


# --------------------------------------------------------------------------------------------
# known mismatches
# --------------------------------------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"d": value}
    return value


def mismatch_cases() -> list[Case]:
    """One event per known way of not round-tripping (see :data:`KNOWN_MISMATCHES`)."""
    with adk_warnings_ignored():
        return _mismatch_cases()


def _mismatch_cases() -> list[Case]:
    def text_content(**part: Any) -> types.Content:
        return types.Content(role="model", parts=[types.Part(text="x", **part)])

    summary = types.Content(role="model", parts=[types.Part(text="s")])
    # Entries with key None were mismatches once and are fixed; they stay here as regressions and
    # are served by ``fixed_mismatch_cases``.
    cases: list[tuple[str, str | None, Event]] = [
        (
            "part-media-processing",
            None,
            _ev(100, content=text_content(media_processing=types.MediaProcessing.AGENTIC)),
        ),
        (
            "part-speech-metadata",
            None,
            _ev(
                101,
                content=text_content(
                    speech_metadata=types.SpeechMetadata(speaker="narrator", style="calm")
                ),
            ),
        ),
        ("empty-long-running-tool-ids", "empty-list", _ev(102, long_running_tool_ids=set())),
        (
            "empty-content-parts",
            "empty-list",
            _ev(103, content=types.Content(role="model", parts=[])),
        ),
        ("empty-output-for", "empty-list", _ev(104, node_info=NodeInfo(path="a@1", output_for=[]))),
        (
            "empty-usage-details",
            "empty-list",
            _ev(105, usage_metadata=_usage(prompt_token_count=1, prompt_tokens_details=[])),
        ),
        (
            "empty-partial-args",
            "empty-list",
            _ev(
                106,
                content=types.Content(
                    parts=[types.Part(function_call=types.FunctionCall(name="f", partial_args=[]))]
                ),
            ),
        ),
        (
            "empty-function-response-parts",
            "empty-list",
            _ev(
                107,
                content=types.Content(
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                name="f", response={}, parts=[]
                            )
                        )
                    ]
                ),
            ),
        ),
        (
            "empty-transcription-words",
            "empty-list",
            _ev(108, input_transcription=types.Transcription(text="a", words=[])),
        ),
        (
            "empty-render-ui-widgets",
            "empty-list",
            _ev(109, actions=EventActions(render_ui_widgets=[])),
        ),
        ("zero-event-timestamp", "zero-event-timestamp", _ev(110, timestamp=0.0)),
        (
            "zero-compaction-start",
            None,
            _ev(
                111,
                actions=EventActions(
                    compaction=EventCompaction(
                        start_timestamp=0.0, end_timestamp=T0, compacted_content=summary
                    )
                ),
            ),
        ),
        (
            "zero-cache-contents-count",
            None,
            _ev(112, cache_metadata=CacheMetadata(fingerprint="fp", contents_count=0)),
        ),
        (
            "empty-cache-fingerprint",
            None,
            _ev(113, cache_metadata=CacheMetadata(fingerprint="", contents_count=2)),
        ),
        (
            "json-integer-above-2-53",
            "json-integer-precision",
            _ev(114, actions=EventActions(state_delta={"big": 2**53 + 1})),
        ),
        (
            "artifact-version-above-int32",
            "int32-overflow",
            _ev(115, actions=EventActions(artifact_delta={"f": 2**31})),
        ),
        (
            "token-count-above-int32",
            "int32-overflow",
            _ev(116, usage_metadata=_usage(total_token_count=2**31)),
        ),
        (
            "state-nested-50-levels",
            "json-depth",
            _ev(117, actions=EventActions(state_delta={"deep": _nested(50)})),
        ),
        (
            "integral-float-in-args",
            "integral-float",
            _ev(
                118,
                content=types.Content(
                    parts=[
                        types.Part(function_call=types.FunctionCall(name="f", args={"ratio": 1.0}))
                    ]
                ),
            ),
        ),
    ]
    return [Case(name, event, mismatch=key) for name, key, event in cases]


def known_mismatch_cases() -> list[Case]:
    return [case for case in mismatch_cases() if case.mismatch is not None]


def fixed_mismatch_cases() -> list[Case]:
    """Former mismatches (google-genai Part fields that were missing; required ADK fields at their
    zero value) that now round-trip: kept as regression cases."""
    return [case for case in mismatch_cases() if case.mismatch is None]


def all_round_tripping_cases() -> list[Case]:
    """Constructed and runner events expected to round-trip exactly."""
    cases = [*constructed_cases(), *runner_cases(), *fixed_mismatch_cases()]
    return [c for c in cases if c.mismatch is None]


#: For the golden vectors: file name -> corpus case.
GOLDEN_CASES: dict[str, str] = {
    "user_text": "user-text",
    "model_text_unicode": "model-text-unicode",
    "thought_function_call": "thought-function-call",
    "function_response_rich": "function-response-rich",
    "media_parts": "media-parts",
    "live_transcriptions": "live-transcriptions",
    "usage_and_logprobs": "usage-and-logprobs",
    "state_and_artifacts": "state-and-artifacts",
    "hitl_confirmation": "hitl-confirmation",
    "workflow_node": "workflow-node",
    "zero_numbers": "zero-numbers",
    "runner_confirmation_request": "tools-13-response",
    "runner_compaction": "compaction-04-compaction",
    "runner_rewind": "compaction-10-rewind",
}


def find_case(name: str) -> Case:
    for case in [*constructed_cases(), *runner_cases()]:
        if case.name == name:
            return case
    raise KeyError(name)


# --------------------------------------------------------------------------------------------
# (c) hypothesis strategies
# --------------------------------------------------------------------------------------------
#
# They build events from ADK's and google-genai's classes over the domain the proto promises to
# round-trip; each exclusion is one of KNOWN_MISMATCHES: no empty typed lists, no zero event or
# compaction timestamp, CacheMetadata with a non-empty fingerprint and contents_count >= 1,
# integers in JSON values within +-(2**53 - 1), no integral floats in JSON values, counts within
# int32, JSON nesting well below 50 levels. Strings exclude lone surrogates (not UTF-8; ADK cannot
# dump them either) and floats exclude NaN/infinity (ADK dumps them as null).


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


def _model(model: Any, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Like ``st.builds`` for a pydantic model, without signature inference."""
    return st.fixed_dictionaries(fields).map(lambda kwargs: model(**kwargs))


def _enum(enum_type: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(list(enum_type))


_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=24)
_IDS = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=16)
_FLOAT = st.floats(allow_nan=False, allow_infinity=False)
_NON_ZERO_FLOAT = _FLOAT.map(lambda x: x or 1.5)  # 0.0 and -0.0 become 1.5
# Non-integral floats, built rather than filtered (most large floats are integral).
_NON_INTEGRAL_FLOAT = st.floats(min_value=-(2.0**51), max_value=2.0**51).map(
    lambda x: x + 0.5 if x.is_integer() else x
)
_INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
_COUNT = st.integers(min_value=0, max_value=2**31 - 1)
_BYTES = st.binary(max_size=48)

json_scalars: st.SearchStrategy[Any] = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | _NON_INTEGRAL_FLOAT
    | _TEXT
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=10,
)
json_objects: st.SearchStrategy[dict[str, Any]] = st.dictionaries(_TEXT, json_values, max_size=4)

_transcriptions = _model(
    types.Transcription,
    text=_opt(_TEXT),
    finished=_opt(st.booleans()),
    language_code=_opt(_TEXT),
    speaker_label=_opt(_TEXT),
    start_offset=_opt(_TEXT),
    end_offset=_opt(_TEXT),
    words=_opt(
        st.lists(
            _model(
                types.WordInfo,
                word=_opt(_TEXT),
                start_offset=_opt(_TEXT),
                end_offset=_opt(_TEXT),
            ),
            min_size=1,
            max_size=3,
        )
    ),
)

_parts = st.one_of(
    _model(
        types.Part,
        text=_TEXT,
        thought=_opt(st.booleans()),
        thought_signature=_opt(_BYTES),
        part_metadata=_opt(json_objects),
    ),
    _model(
        types.Part,
        function_call=_model(
            types.FunctionCall,
            id=_opt(_IDS),
            name=_opt(_IDS),
            args=_opt(json_objects),
            will_continue=_opt(st.booleans()),
            partial_args=_opt(
                st.lists(
                    _model(
                        types.PartialArg,
                        json_path=_opt(_TEXT),
                        string_value=_opt(_TEXT),
                        number_value=_opt(_FLOAT),
                        will_continue=_opt(st.booleans()),
                    ),
                    min_size=1,
                    max_size=2,
                )
            ),
        ),
        thought_signature=_opt(_BYTES),
    ),
    _model(
        types.Part,
        function_response=_model(
            types.FunctionResponse,
            id=_opt(_IDS),
            name=_opt(_IDS),
            response=_opt(json_objects),
            will_continue=_opt(st.booleans()),
            scheduling=_opt(_enum(types.FunctionResponseScheduling)),
        ),
    ),
    _model(
        types.Part,
        inline_data=_model(
            types.Blob, data=_opt(_BYTES), mime_type=_opt(_TEXT), display_name=_opt(_TEXT)
        ),
        video_metadata=_opt(
            _model(
                types.VideoMetadata,
                start_offset=_opt(_TEXT),
                end_offset=_opt(_TEXT),
                fps=_opt(_FLOAT),
            )
        ),
        audio_transcription=_opt(_transcriptions),
    ),
    _model(
        types.Part,
        file_data=_model(
            types.FileData, file_uri=_opt(_TEXT), mime_type=_opt(_TEXT), display_name=_opt(_TEXT)
        ),
        media_resolution=_opt(
            _model(
                types.PartMediaResolution,
                level=_opt(_enum(types.PartMediaResolutionLevel)),
                num_tokens=_opt(_COUNT),
            )
        ),
    ),
    _model(
        types.Part,
        executable_code=_model(
            types.ExecutableCode,
            code=_opt(_TEXT),
            language=_opt(_enum(types.Language)),
            id=_opt(_IDS),
        ),
    ),
    _model(
        types.Part,
        code_execution_result=_model(
            types.CodeExecutionResult,
            outcome=_opt(_enum(types.Outcome)),
            output=_opt(_TEXT),
            id=_opt(_IDS),
        ),
    ),
    _model(
        types.Part,
        tool_call=_model(
            types.ToolCall,
            id=_opt(_IDS),
            tool_type=_opt(_enum(types.ToolType)),
            args=_opt(json_objects),
        ),
        tool_response=_opt(
            _model(
                types.ToolResponse,
                id=_opt(_IDS),
                tool_type=_opt(_enum(types.ToolType)),
                response=_opt(json_objects),
            )
        ),
    ),
)

contents = _model(
    types.Content,
    role=_opt(st.sampled_from(["user", "model"]) | _TEXT),
    parts=_opt(st.lists(_parts, min_size=1, max_size=4)),
)

_modality_counts = _opt(
    st.lists(
        _model(
            types.ModalityTokenCount,
            modality=_opt(_enum(types.MediaModality)),
            token_count=_opt(_COUNT),
        ),
        min_size=1,
        max_size=2,
    )
)

usage_metadata = _model(
    types.GenerateContentResponseUsageMetadata,
    prompt_token_count=_opt(_COUNT),
    candidates_token_count=_opt(_COUNT),
    total_token_count=_opt(_COUNT),
    cached_content_token_count=_opt(_COUNT),
    thoughts_token_count=_opt(_COUNT),
    tool_use_prompt_token_count=_opt(_COUNT),
    traffic_type=_opt(_enum(types.TrafficType)),
    prompt_tokens_details=_modality_counts,
    candidates_tokens_details=_modality_counts,
    cache_tokens_details=_modality_counts,
    tool_use_prompt_tokens_details=_modality_counts,
)

cache_metadata = st.one_of(
    _model(CacheMetadata, fingerprint=_IDS, contents_count=st.integers(1, 2**31 - 1)),
    _model(
        CacheMetadata,
        cache_name=_TEXT,
        expire_time=_FLOAT,
        fingerprint=_IDS,
        invocations_used=_COUNT,
        contents_count=st.integers(1, 2**31 - 1),
        created_at=_opt(_FLOAT),
    ),
)

_routes = st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | _TEXT
event_actions = _model(
    EventActions,
    skip_summarization=_opt(st.booleans()),
    state_delta=json_objects,
    artifact_delta=st.dictionaries(_TEXT, _INT32, max_size=3),
    transfer_to_agent=_opt(_TEXT),
    transfer_reason=_opt(_TEXT),
    escalate=_opt(st.booleans()),
    requested_tool_confirmations=st.dictionaries(
        _IDS,
        _model(ToolConfirmation, hint=_TEXT, confirmed=st.booleans(), payload=json_values),
        max_size=2,
    ),
    compaction=_opt(
        _model(
            EventCompaction,
            start_timestamp=_NON_ZERO_FLOAT,
            end_timestamp=_NON_ZERO_FLOAT,
            compacted_content=contents,
        )
    ),
    end_of_agent=_opt(st.booleans()),
    agent_state=_opt(json_objects),
    rewind_before_invocation_id=_opt(_TEXT),
    route=_opt(_routes | st.lists(_routes, max_size=3)),
    set_model_response=json_values,
    render_ui_widgets=_opt(
        st.lists(
            _model(UiWidget, id=_TEXT, provider=_TEXT, payload=json_objects),
            min_size=1,
            max_size=2,
        )
    ),
)

events = _model(
    Event,
    id=_IDS,
    invocation_id=_TEXT,
    author=_TEXT,
    timestamp=_NON_ZERO_FLOAT,
    content=_opt(contents),
    actions=event_actions,
    output=json_values,
    node_info=_model(
        NodeInfo,
        path=_TEXT,
        output_for=_opt(st.lists(_TEXT, min_size=1, max_size=3)),
        message_as_output=_opt(st.booleans()),
    ),
    long_running_tool_ids=_opt(st.sets(_IDS, min_size=1, max_size=3)),
    branch=_opt(_TEXT),
    isolation_scope=_opt(_TEXT),
    model_version=_opt(_TEXT),
    partial=_opt(st.booleans()),
    turn_complete=_opt(st.booleans()),
    interrupted=_opt(st.booleans()),
    finish_reason=_opt(_enum(types.FinishReason)),
    error_code=_opt(_TEXT),
    error_message=_opt(_TEXT),
    custom_metadata=_opt(json_objects),
    usage_metadata=_opt(usage_metadata),
    cache_metadata=_opt(cache_metadata),
    input_transcription=_opt(_transcriptions),
    output_transcription=_opt(_transcriptions),
    avg_logprobs=_opt(_FLOAT),
    live_session_id=_opt(_TEXT),
    interaction_id=_opt(_TEXT),
    environment_id=_opt(_TEXT),
)
