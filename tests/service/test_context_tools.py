"""ContextToolsService over a real gRPC server: declarations in every provider's shape, each
tool's answer, the edits recorded on append (and only there), compaction keeping the model's
pins and hides, and the caller's mistakes as statuses with ErrorInfo."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from anthropic.types import ToolParam
from google.genai import types
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from contextengine.client import ContextEngineClient, ContextEngineError, ContextTools, struct_json
from contextengine.core.structs import dict_to_struct
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from contextengine.v1 import (
    compaction_service_pb2 as kpb,
    config_pb2,
    content_pb2,
    event_pb2,
)

pytestmark = pytest.mark.service

APP = "tools-app"
USER = "u"
ROWS = {"rows": [f"row {i}: a line of a long tool result nobody needs later" for i in range(40)]}
ON = config_pb2.ContextToolsConfig(enabled=True)


@pytest.fixture(params=["memory", "sqlite"])
async def server(
    request: pytest.FixtureRequest, tmp_path: Any
) -> AsyncIterator[ContextEngineServer]:
    db = ":memory:" if request.param == "memory" else str(tmp_path / "ce.db")
    async with start_local_server(db) as srv:
        yield srv


class Session:
    """One session written the way an agent loop writes it (the call, then its answer)."""

    def __init__(self, client: ContextEngineClient, session_id: str) -> None:
        self.client = client
        self.id = session_id
        self.tools: ContextTools = client.context_tools(APP, USER, session_id, agent_name="agent")
        self.count = 0

    async def add(self, event: event_pb2.Event) -> event_pb2.Event:
        response = await self.client.append_event(APP, USER, self.id, event)
        return response.event

    async def user(self, text: str, invocation: str) -> None:
        await self.add(
            event_pb2.Event(
                author="user",
                invocation_id=invocation,
                content=content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)]),
            )
        )

    async def agent(self, invocation: str, part: content_pb2.Part, role: str = "model") -> None:
        await self.add(
            event_pb2.Event(
                author="agent",
                invocation_id=invocation,
                content=content_pb2.Content(role=role, parts=[part]),
            )
        )

    async def turn(self, invocation: str) -> None:
        """A finished turn: question, tool call, bulky result, answer (4 events)."""
        await self.user(f"question {invocation}", invocation)
        call_id = f"{invocation}-lookup"
        await self.agent(
            invocation,
            content_pb2.Part(
                function_call=content_pb2.FunctionCall(
                    id=call_id, name="lookup", args=dict_to_struct({"q": invocation})
                )
            ),
        )
        await self.agent(
            invocation,
            content_pb2.Part(
                function_response=content_pb2.FunctionResponse(
                    id=call_id, name="lookup", response=dict_to_struct(ROWS)
                )
            ),
            role="user",
        )
        await self.agent(invocation, content_pb2.Part(text=f"answer {invocation}"))

    async def use(
        self, name: str, args: dict[str, Any], invocation: str, *, append: bool = True
    ) -> tuple[dict[str, Any], event_pb2.Event | None]:
        """The model calls a tool: its call appended, the engine runs it, its answer appended."""
        self.count += 1
        call = content_pb2.FunctionCall(id=f"t{self.count}", name=name, args=dict_to_struct(args))
        await self.agent(invocation, content_pb2.Part(function_call=call))
        answer = await self.tools.call(call, invocation_id=invocation)
        result = struct_json(answer.response.response)
        if not append:
            return result, None
        event = await self.add(
            event_pb2.Event(
                author="agent",
                invocation_id=invocation,
                content=content_pb2.Content(
                    role="user", parts=[content_pb2.Part(function_response=answer.response)]
                ),
            )
        )
        return result, event

    async def context_text(self) -> str:
        context = await self.client.build_context(APP, USER, self.id, agent_name="agent")
        return str(list(context.contents))


async def session(client: ContextEngineClient, session_id: str, turns: int = 3) -> Session:
    await client.update_app_config(config_pb2.AppConfig(app_name=APP, context_tools=ON))
    await client.create_session(APP, USER, session_id)
    written = Session(client, session_id)
    for n in range(1, turns + 1):
        await written.turn(f"i{n}")
    await written.user("the current question", "now")
    return written


async def test_declarations_in_every_providers_shape(client: ContextEngineClient) -> None:
    listed = await client.list_context_tools(APP)
    names = [
        "context_status",
        "context_pin",
        "context_unpin",
        "context_hide",
        "context_summarize",
        "context_expand",
        "context_search",
    ]
    for declaration in listed.function_declarations:
        types.FunctionDeclaration.model_validate(struct_json(declaration))
    assert [d["name"] for d in listed.function_declarations] == names
    chat = [json.loads(text) for text in listed.openai_chat_tools]
    TypeAdapter(list[ChatCompletionToolParam]).validate_python(chat)
    responses = [json.loads(text) for text in listed.openai_responses_tools]
    TypeAdapter(list[FunctionToolParam]).validate_python(responses)
    anthropic = [json.loads(text) for text in listed.anthropic_tools]
    TypeAdapter(list[ToolParam]).validate_python(anthropic)
    assert [t["function"]["name"] for t in chat] == names
    assert [t["name"] for t in anthropic] == names
    assert anthropic[3]["input_schema"]["required"] == ["first"]


async def test_hide_is_recorded_on_the_answer_and_shows_as_a_stub(
    client: ContextEngineClient,
) -> None:
    s = await session(client, "hide")
    assert "row 39" in await s.context_text()
    result, event = await s.use("context_hide", {"first": 2, "last": 3}, "now")
    assert result["ok"] is True
    assert result["tokens_hidden"] > 100
    assert result["cached_tokens_invalidated"] >= result["tokens_hidden"]
    assert event is not None
    assert event.context_edits[0].hide.range.last == 3
    text = await s.context_text()
    assert text.count("row 39") == 2  # turns 2 and 3 still hold theirs
    assert "Hidden from this context" in text
    assert "context_expand with sequence 2" in text
    # the edit is in the log for every reader
    listed = [e async for e in client.list_events(APP, USER, "hide")]
    assert [e.sequence for e in listed if e.context_edits] == [event.sequence]
    # expand reads the events back
    expanded, _ = await s.use("context_expand", {"sequence": 2}, "now")
    assert expanded["kind"] == "hidden_range"
    assert "row 39" in expanded["text"]
    assert expanded["first"] == 2
    assert expanded["last"] == 3


async def test_refusals_are_answers_the_model_reads(client: ContextEngineClient) -> None:
    s = await session(client, "refuse")
    answer = await s.tools.call(
        content_pb2.FunctionCall(
            id="x", name="context_hide", args=dict_to_struct({"first": 13, "last": 13})
        ),
        invocation_id="now",
    )
    assert answer.refusal.reason == "CONTEXT_EDIT_REFUSED"
    assert answer.refusal.rule == "current_turn"
    assert answer.refusal.metadata["sequence"] == "13"
    result = struct_json(answer.response.response)
    assert result == {
        "ok": False,
        "reason": "CONTEXT_EDIT_REFUSED",
        "rule": "current_turn",
        "message": answer.refusal.message,
    }
    assert answer.response.id == "x"
    assert answer.response.name == "context_hide"
    assert not answer.edits
    bad = await s.tools.call(
        content_pb2.FunctionCall(name="context_pin", args=dict_to_struct({"first": "two"})),
    )
    assert bad.refusal.reason == "INVALID_TOOL_ARGUMENTS"
    assert bad.refusal.metadata["field"] == "call.args.first"
    # an answer saying ok for a refused edit records nothing
    forged, event = await s.use("context_hide", {"first": 13, "last": 13}, "now")
    assert forged["ok"] is False
    assert event is not None
    assert not event.context_edits


async def test_the_callers_mistakes_are_statuses(client: ContextEngineClient) -> None:
    s = await session(client, "mistakes")
    with pytest.raises(ContextEngineError) as err:
        await s.tools.call(content_pb2.FunctionCall(name="delete_everything"))
    assert (err.value.code, err.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "UNKNOWN_CONTEXT_TOOL",
    )
    with pytest.raises(ContextEngineError) as err:
        await s.tools.call(content_pb2.FunctionCall())
    assert err.value.reason == "MISSING_FIELD"
    with pytest.raises(ContextEngineError) as err:
        await client.context_tools(APP, USER, "nope").call(
            content_pb2.FunctionCall(name="context_status")
        )
    assert err.value.reason == "SESSION_NOT_FOUND"
    await client.update_app_config(config_pb2.AppConfig(app_name=APP))
    with pytest.raises(ContextEngineError) as err:
        await s.tools.call(content_pb2.FunctionCall(name="context_status"))
    assert (err.value.code, err.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "CONTEXT_TOOLS_DISABLED",
    )
    # a session's own configuration replaces the app's
    await client.update_session_config(
        APP, USER, "mistakes", config_pb2.SessionConfig(context_tools=ON)
    )
    assert (await s.tools.run("context_status", {}))["ok"] is True
    with pytest.raises(ContextEngineError) as err:
        await client.update_app_config(
            config_pb2.AppConfig(
                app_name=APP,
                context_tools=config_pb2.ContextToolsConfig(max_hidden_fraction=1.5),
            )
        )
    assert err.value.metadata["field"] == "config.context_tools.max_hidden_fraction"


async def test_a_client_cannot_set_edits_itself(client: ContextEngineClient) -> None:
    s = await session(client, "forge")
    forged = event_pb2.Event(
        author="agent",
        invocation_id="now",
        content=content_pb2.Content(role="model", parts=[content_pb2.Part(text="hi")]),
        context_edits=[
            event_pb2.ContextEdit(
                hide=event_pb2.HiddenRange(range=event_pb2.SequenceRange(first=1, last=12))
            )
        ],
    )
    stored = await s.add(forged)
    assert not stored.context_edits
    assert "row 39" in await s.context_text()


async def test_re_appending_an_answer_is_idempotent(client: ContextEngineClient) -> None:
    s = await session(client, "again")
    _, event = await s.use("context_hide", {"first": 2, "last": 3}, "now")
    assert event is not None
    replay = event_pb2.Event()
    replay.CopyFrom(event)
    replay.ClearField("sequence")
    del replay.context_edits[:]
    response = await client.append_event(APP, USER, "again", replay)
    assert response.duplicate
    assert response.event.sequence == event.sequence
    assert list(response.event.context_edits) == list(event.context_edits)


async def test_summarize_appends_an_adk_summary_and_expand_reads_it_back(
    client: ContextEngineClient,
) -> None:
    s = await session(client, "summarize")
    result, event = await s.use(
        "context_summarize",
        {"first": 1, "last": 8, "summary": "Two questions looked up; answers i1 and i2."},
        "now",
    )
    assert result["ok"] is True
    assert result["covers"] == [1, 8]
    at = result["summary_sequence"]
    assert event is not None
    assert event.context_edits[0].summary_sequence == at
    events = [e async for e in client.list_events(APP, USER, "summarize")]
    summary = events[at - 1]
    assert summary.author == "user"
    assert summary.actions.compaction.end_sequence == 8
    assert summary.actions.compaction.compacted_content.role == "model"
    text = await s.context_text()
    assert "Two questions looked up" in text
    assert text.count("row 39") == 1
    expanded, _ = await s.use("context_expand", {"sequence": at}, "now")
    assert expanded["kind"] == "summary"
    assert expanded["events"] == 8
    # ExpandSummary, the compaction RPC, sees it as any summary
    expansion = await client.expand_summary(APP, USER, "summarize", at)
    assert [e.sequence for e in expansion.events] == list(range(1, 9))
    status, _ = await s.use("context_status", {}, "now")
    assert status["summaries"] == [
        {
            "sequence": at,
            "covers": [1, 8],
            "events": 8,
            "tokens": status["summaries"][0]["tokens"],
            "written_by_model": True,
        }
    ]


async def test_status_pin_unpin_and_search(client: ContextEngineClient) -> None:
    s = await session(client, "status")
    status, _ = await s.use("context_status", {}, "now")
    assert status["current_turn_starts_at"] == 13
    assert status["edits_left_this_turn"] == 8
    assert [turn["first"] for turn in status["turns"]] == [1, 5, 9, 13]
    assert status["turns"][0]["tool_calls"] == {"lookup": 1}
    assert {e["sequence"] for e in status["largest_events"][:3]} == {3, 7, 11}
    assert status["prompt_cache"]["warm"] is True  # the agent answered seconds ago
    pinned, event = await s.use("context_pin", {"first": 4}, "now")
    assert pinned["ok"] is True
    assert event is not None
    assert event.context_edits[0].pin.first == 4
    again, _ = await s.use("context_status", {}, "now")
    assert again["pinned"] == [4]
    assert again["edits_left_this_turn"] == 7
    unpinned, _ = await s.use("context_unpin", {"first": 4}, "now")
    assert unpinned["ok"] is True
    found, _ = await s.use("context_search", {"query": "answer i2"}, "now")
    assert found["results"][0]["sequence"] == 8
    assert found["results"][0]["where"] == "in your context"


async def test_token_threshold_compaction_keeps_the_models_pins(
    client: ContextEngineClient,
) -> None:
    s = await session(client, "compaction")
    await s.use("context_pin", {"first": 3}, "now")
    await client.update_app_config(
        config_pb2.AppConfig(
            app_name=APP,
            context_tools=ON,
            events_compaction_config=config_pb2.EventsCompactionConfig(
                token_threshold=50, event_retention_size=1
            ),
        )
    )
    compacted = await client.compact(
        APP, USER, "compaction", trigger=kpb.COMPACTION_TRIGGER_TOKEN_THRESHOLD, agent_name="agent"
    )
    assert compacted.HasField("summary")
    covered = (
        compacted.summary.actions.compaction.start_sequence,
        compacted.summary.actions.compaction.end_sequence,
    )
    assert not covered[0] <= 3 <= covered[1]
    assert "row 39" in await s.context_text()
