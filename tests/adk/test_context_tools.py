"""The context tools in a real google-adk Runner, through the toolset drop-in (both backends).

A scripted model reads a bulky report, then calls ``context_status``, hides the report's call
and result, and searches for a fact in it. The runner appends the calls and answers as for any
tool; the engine records the hide on the answer, the next model call gets a stub instead of the
report, and a rewind before the hiding turn brings the report back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App
from google.adk.runners import Runner
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from contextengine.adk import (
    Backend,
    ContextEngineContextTools,
    ContextEnginePlugin,
    ContextEngineSessionService,
    EmbeddedBackend,
    SidecarBackend,
)
from contextengine.v1 import config_pb2, session_service_pb2 as spb
from tests.adk.scripted import ScriptedLlm, call, text

pytestmark = pytest.mark.process

USER = "u"


def fetch_report(topic: str) -> dict[str, Any]:
    """Fetches a long report on a topic."""
    rows = [f"row {i}: measurements of {topic} with many digits 0123456789" for i in range(60)]
    return {"report": rows, "code": "7Q-ALPHA"}


async def _configure(backend: Backend, app: str) -> None:
    config = config_pb2.AppConfig(
        app_name=app, context_tools=config_pb2.ContextToolsConfig(enabled=True)
    )
    if isinstance(backend, SidecarBackend):
        await backend.client().update_app_config(config)
    else:
        assert isinstance(backend, EmbeddedBackend)
        engine = await backend.engine()
        await engine.update_app_config(spb.UpdateAppConfigRequest(config=config))


async def _say(runner: Runner, session_id: str, message: str) -> None:
    async for _ in runner.run_async(
        user_id=USER,
        session_id=session_id,
        new_message=types.Content(role="user", parts=[types.Part(text=message)]),
    ):
        pass


def _texts(contents: list[dict[str, Any]]) -> str:
    return json.dumps(contents)


@pytest.mark.filterwarnings(r"ignore:\[EXPERIMENTAL\]:UserWarning")
async def test_the_model_hides_a_report_and_finds_a_fact_again(
    backend: Backend, app_name: str
) -> None:
    await _configure(backend, app_name)
    model = ScriptedLlm()
    toolset = ContextEngineContextTools(backend=backend)
    agent = LlmAgent(
        name="root",
        model=model,
        instruction="You read reports.",
        tools=[FunctionTool(fetch_report), toolset],
    )
    sessions = ContextEngineSessionService(backend=backend)
    runner = Runner(
        app=App(name=app_name, root_agent=agent, plugins=[ContextEnginePlugin(backend=backend)]),
        session_service=sessions,
    )
    session = await sessions.create_session(app_name=app_name, user_id=USER)
    # events: 1 user, 2 call, 3 report, 4 text
    model.queue([call(("c1", "fetch_report", {"topic": "tides"})), text("The code is in it.")])
    await _say(runner, session.id, "Read the tides report.")
    # 5 user, 6 status call, 7 status, 8 hide call, 9 hide answer, 10 text
    model.queue(
        [
            call(("c2", "context_status", {})),
            call(("c3", "context_hide", {"first": 2, "last": 3, "stub": "The tides report."})),
            text("Hidden."),
        ]
    )
    await _say(runner, session.id, "Tidy up your context.")
    # 11 user, 12 search call, 13 results, 14 text
    model.queue([call(("c4", "context_search", {"query": "code"})), text("7Q-ALPHA")])
    await _say(runner, session.id, "What was the code?")
    model.check_drained()

    # every tool is declared to the model
    declared = {
        d.name
        for tool in await toolset.get_tools()
        for d in [tool._get_declaration()]
        if d is not None
    }
    assert declared == {
        "context_status",
        "context_pin",
        "context_unpin",
        "context_hide",
        "context_summarize",
        "context_expand",
        "context_search",
    }
    requests = model.requests
    status = requests[3][-1]["parts"][0]["function_response"]["response"]
    assert status["ok"] is True
    assert status["current_turn_starts_at"] == 5
    assert status["largest_events"][0]["sequence"] == 3
    hidden = requests[4][-1]["parts"][0]["function_response"]["response"]
    assert hidden["ok"] is True
    assert hidden["stub"] == "The tides report."
    # the model call after the hide gets the stub, not the report
    after = _texts(requests[4])
    assert "row 59" not in after
    assert "The tides report." in after
    assert "row 59" in _texts(requests[3])
    results = requests[6][-1]["parts"][0]["function_response"]["response"]["results"]
    found = {result["sequence"]: result["where"] for result in results}
    assert found[3] == "hidden (2..3)"
    assert 11 not in found

    # the engine recorded the edit on the answer event (not visible to ADK's own events)
    stored = await backend.list_events(
        spb.ListEventsRequest(app_name=app_name, user_id=USER, session_id=session.id)
    )
    recorded = [(e.sequence, list(e.context_edits)) for e in stored.events if e.context_edits]
    assert len(recorded) == 1
    assert recorded[0][0] == 9
    assert recorded[0][1][0].hide.range.first == 2

    # a rewind before the hiding turn brings the report back
    adk_session = await sessions.get_session(app_name=app_name, user_id=USER, session_id=session.id)
    assert adk_session is not None
    await runner.rewind_async(
        user_id=USER,
        session_id=session.id,
        rewind_before_invocation_id=adk_session.events[4].invocation_id,
    )
    model.queue([text("Back.")])
    await _say(runner, session.id, "Again?")
    assert "row 59" in _texts(model.requests[-1])
    await runner.close()
