"""The ADK Python driver of the cross-language parity run (the contract: README.md here).

    python clients/conformance/adk/python_driver.py --target HOST:PORT \\
        --conversation clients/conformance/adk/conversation.json \\
        --app APP --user USER --session SESSION --out REPORT.jsonl

google-adk 2.13 with the three ``contextengine.adk`` drop-ins on one sidecar backend runs the
scripted conversation through ADK's own ``Runner``; every model call is answered by one scripted
model from the current turn's answers and written to the report with the contents the model
received (google-genai's camelCase JSON, ``model_dump(by_alias=True)``), the calling agent and
the session's ``last_sequence`` on the sidecar at that moment. ``compare.py`` checks the report.

ADK Python specifics: a function response answering a long-running call resumes the invocation
of that call (the turn's ``invocation_id`` is the earlier turn's); ADK's ids and clock are its
own (random, wall clock): the comparator maps them to ordinals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import warnings
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types
from google.protobuf import json_format
from pydantic import PrivateAttr

from contextengine.adk import (
    ContextEngineMemoryService,
    ContextEnginePlugin,
    ContextEngineSessionService,
    sidecar_backend,
)
from contextengine.client import ContextEngineClient
from contextengine.v1 import config_pb2

PORT = "python"
#: how often and how long the driver waits for the engine's background compaction after a turn
SETTLE_POLL_SECONDS = 0.01
SETTLE_TIMEOUT_SECONDS = 30.0


class DriverError(Exception):
    """The conversation could not be run as scripted (names the turn)."""


# ---- the tools (conversation.json's "description") -------------------------------------------


def lookup(city: str) -> dict[str, Any]:
    """Looks up the weather in a city."""
    return {"weather": "sunny in " + city}


def convert(amount: float) -> dict[str, Any]:
    """Converts an amount of euros to dollars."""
    return {"usd": amount * 2}


def start_refund(order: str) -> dict[str, Any]:
    """Starts a refund; the result arrives later."""
    return {"status": order + " pending"}


TOOLS: dict[str, FunctionTool] = {
    "lookup": FunctionTool(lookup),
    "convert": FunctionTool(convert),
    "start_refund": LongRunningFunctionTool(start_refund),
}


# ---- the scripted model ----------------------------------------------------------------------


class Report:
    """The report file: one JSON object per line, written as the run goes."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self.model_calls = 0

    def write(self, line: dict[str, Any]) -> None:
        self._out.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
        self._out.flush()


class Calls:
    """What the scripted model needs to know about a call besides the request: the turn, the
    calling agent (set by :class:`AgentRecorder` just before) and where the session is."""

    def __init__(self, client: ContextEngineClient, app: str, user: str, session: str) -> None:
        self.client = client
        self.key = (app, user, session)
        self.turn = ""
        self.index = 0
        self.agent = ""
        self.answers: deque[dict[str, Any]] = deque()

    async def last_sequence(self) -> int:
        page = await self.client.list_events_page(*self.key, page_size=1)
        return page.last_sequence


class AgentHolder(Protocol):
    """Whatever wants to know the agent of the model call about to happen."""

    agent: str


class AgentRecorder(BasePlugin):
    """Remembers which agent makes the model call about to happen (the model does not see it)."""

    def __init__(self, holder: AgentHolder, name: str = "parity-agent-recorder") -> None:
        super().__init__(name)
        self._holder = holder

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        self._holder.agent = callback_context.agent_name
        return None


def answer_content(answer: dict[str, Any]) -> types.Content:
    """A scripted answer (``{"text"}`` or ``{"calls"}``) as the model's content."""
    if "text" in answer:
        return types.Content(role="model", parts=[types.Part(text=answer["text"])])
    parts = [
        types.Part(function_call=types.FunctionCall(id=c["id"], name=c["name"], args=c["args"]))
        for c in answer["calls"]
    ]
    return types.Content(role="model", parts=parts)


class ScriptedModel(BaseLlm):
    """Answers each call with the next answer of the current turn and reports the call."""

    model: str = "scripted-model"
    _calls: Calls = PrivateAttr()
    _report: Report = PrivateAttr()

    def bind(self, calls: Calls, report: Report) -> ScriptedModel:
        self._calls = calls
        self._report = report
        return self

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        calls = self._calls
        contents = [
            c.model_dump(mode="json", by_alias=True, exclude_none=True)
            for c in llm_request.contents
        ]
        if not calls.answers:
            raise DriverError(
                f"turn {calls.turn}: model call {calls.index} ({calls.agent}) has no answer left"
            )
        answer = calls.answers.popleft()
        self._report.write(
            {
                "kind": "model_call",
                "turn": calls.turn,
                "index": calls.index,
                "agent": calls.agent,
                "last_sequence": await calls.last_sequence(),
                "contents": contents,
            }
        )
        calls.index += 1
        self._report.model_calls += 1
        prompt_tokens = len(json.dumps(contents)) // 4
        yield LlmResponse(
            content=answer_content(answer),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt_tokens,
                candidates_token_count=5,
                total_token_count=prompt_tokens + 5,
            ),
        )


# ---- the agents and the run ------------------------------------------------------------------


def build_agents(spec: dict[str, Any], model: BaseLlm) -> LlmAgent:
    """The agents of ``conversation.json``'s ``agents`` (``root`` at the top), on ``model``."""

    def agent(name: str) -> LlmAgent:
        described = spec[name]
        return LlmAgent(
            name=name,
            model=model,
            instruction=described["instruction"],
            description=described["description"],
            tools=[TOOLS[t] for t in described["tools"]],
            sub_agents=[agent(s) for s in described["sub_agents"]],
        )

    return agent("root")


def user_message(user: dict[str, Any]) -> types.Content:
    if "text" in user:
        return types.Content(role="user", parts=[types.Part(text=user["text"])])
    fr = user["function_response"]
    response = types.FunctionResponse(id=fr["id"], name=fr["name"], response=fr["response"])
    return types.Content(role="user", parts=[types.Part(function_response=response)])


async def settle(calls: Calls) -> None:
    """Waits until no compaction runs for the session (ADK Python compacts synchronously)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_TIMEOUT_SECONDS
    while True:
        status = await calls.client.compaction_status(*calls.key)
        if status.failures:
            raise DriverError(f"turn {calls.turn}: the summarizer failed: {status.last_error}")
        if not status.running:
            return
        if loop.time() > deadline:
            raise DriverError(f"turn {calls.turn}: compaction still running after 30 s")
        await asyncio.sleep(SETTLE_POLL_SECONDS)


async def run(
    args: argparse.Namespace, app: str, conversation: dict[str, Any], report: Report
) -> None:
    config = json_format.ParseDict(conversation["engine_app_config"], config_pb2.AppConfig())
    config.app_name = app
    backend = sidecar_backend(args.target)
    async with ContextEngineClient(args.target) as client:
        await client.update_app_config(config)
        calls = Calls(client, app, args.user, args.session)
        model = ScriptedModel().bind(calls, report)
        sessions = ContextEngineSessionService(backend=backend)
        adk_app = App(
            name=app,
            root_agent=build_agents(conversation["agents"], model),
            plugins=[ContextEnginePlugin(backend=backend), AgentRecorder(calls)],
        )
        runner = Runner(
            app=adk_app,
            session_service=sessions,
            memory_service=ContextEngineMemoryService(backend=backend),
        )
        try:
            await sessions.create_session(app_name=app, user_id=args.user, session_id=args.session)
            invocations: dict[str, str] = {}
            for turn in conversation["turns"]:
                calls.turn, calls.index = turn["id"], 0
                calls.answers = deque(turn["answers"])
                if "rewind" in turn:
                    await client.rewind_session(*calls.key, invocations[turn["rewind"]])
                invocation = ""
                async for event in runner.run_async(
                    user_id=args.user,
                    session_id=args.session,
                    new_message=user_message(turn["user"]),
                ):
                    invocation = invocation or event.invocation_id
                if calls.answers:
                    raise DriverError(
                        f"turn {turn['id']}: {len(calls.answers)} answer(s) left over"
                    )
                invocations[turn["id"]] = invocation
                await settle(calls)
                report.write({"kind": "turn", "turn": turn["id"], "invocation_id": invocation})
        finally:
            await runner.close()
            await backend.aclose()
    report.write(
        {
            "kind": "done",
            "app": app,
            "user": args.user,
            "session": args.session,
            "port": PORT,
            "model_calls": report.model_calls,
        }
    )


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the sidecar, HOST:PORT")
    parser.add_argument(
        "--conversation",
        required=True,
        help="conversation.json, or a directory: every *.json in it, each on app APP-<name>",
    )
    parser.add_argument("--app", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument(
        "--out", required=True, help="the report, JSON lines (a directory with a directory)"
    )
    return parser.parse_args(argv)


def jobs(args: argparse.Namespace) -> list[tuple[Path, str, Path]]:
    """(conversation, app, report) of every run: one, or one per ``*.json`` of a directory."""
    source, out = Path(args.conversation), Path(args.out)
    if not source.is_dir():
        return [(source, args.app, out)]
    return [
        (path, f"{args.app}-{path.stem}", out / f"{path.stem}.jsonl")
        for path in sorted(source.glob("*.json"))
    ]


def main(argv: Sequence[str]) -> int:
    args = parse(argv)
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    # ADK warns about experimental features and a multi-agent app without a cache config
    warnings.filterwarnings("ignore", category=UserWarning)
    status = 0
    for source, app, path in jobs(args):
        conversation = json.loads(source.read_text(encoding="utf-8"))
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as out:
            report = Report(out)
            try:
                asyncio.run(run(args, app, conversation, report))
            except Exception as err:
                message = str(err) if isinstance(err, DriverError) else repr(err)
                report.write({"kind": "failed", "message": message})
                print(f"python driver: {source.name}: {message}", file=sys.stderr)
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
