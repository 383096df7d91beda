"""A scripted fake model and scripted multi-agent conversations, for running a real google-adk
``Runner`` offline and deterministically.

* :class:`ScriptedLlm` is a ``BaseLlm`` that answers each model call with the next
  :class:`Answer` of its queue (text, one or several function calls with fixed ids, a transfer)
  and records every ``LlmRequest``'s contents (as JSON dicts) in call order. An empty queue is a
  test failure, and so is an answer left over (:meth:`ScriptedLlm.check_drained`).
* :func:`build_app` is the agent tree every test and the benchmark use: a root agent with a plain
  tool, a tool that requires confirmation and a long-running tool, and a sub-agent ``helper``
  with a tool of its own; both agents may transfer to each other.
* :class:`Turn` is one user turn: the user's message (text, or a function response answering a
  long-running call or a confirmation request, made from the session so far) and the answers
  the model gives during it. :func:`fixed_script` is a hand-written conversation with every kind;
  :func:`turns` draws conversations with hypothesis.
* :func:`deterministic_adk` makes ADK's clock and ids counters (``google.adk.platform``), so two
  runs of one script produce the same event ids, invocation ids and timestamps.

Everything here only calls ADK; nothing is copied from it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.platform import time as adk_time, uuid as adk_uuid
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types
from hypothesis import strategies as st
from pydantic import PrivateAttr

__all__ = [
    "KINDS",
    "Answer",
    "ScriptedLlm",
    "Turn",
    "build_agents",
    "call",
    "deterministic_adk",
    "fixed_script",
    "text",
    "transfer",
    "turns",
]

#: ADK's name of the function call a tool confirmation is requested with
CONFIRMATION_CALL = "adk_request_confirmation"


@dataclass(frozen=True)
class Answer:
    """What the model answers to one call: a model content's parts."""

    parts: tuple[types.Part, ...]

    def content(self) -> types.Content:
        return types.Content(role="model", parts=[p.model_copy(deep=True) for p in self.parts])


def text(value: str) -> Answer:
    return Answer((types.Part(text=value),))


def call(*calls: tuple[str, str, dict[str, Any]]) -> Answer:
    """One or several (parallel) function calls, each ``(id, name, args)``."""
    return Answer(
        tuple(
            types.Part(function_call=types.FunctionCall(id=id_, name=name, args=args))
            for id_, name, args in calls
        )
    )


def transfer(id_: str, agent: str) -> Answer:
    return call((id_, "transfer_to_agent", {"agent_name": agent}))


class ScriptedLlm(BaseLlm):
    """Answers every call with the next queued :class:`Answer`; records each request."""

    model: str = "scripted-model"
    _queue: deque[Answer] = PrivateAttr(default_factory=deque)
    _requests: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list)
    _calls: int = PrivateAttr(default=0)

    @property
    def requests(self) -> list[list[dict[str, Any]]]:
        """Every request's contents, ``model_dump(mode="json", exclude_none=True)``."""
        return self._requests

    def queue(self, answers: Sequence[Answer]) -> None:
        self._queue.extend(answers)

    def check_drained(self) -> None:
        assert not self._queue, f"answers left over: {list(self._queue)}"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = [c.model_dump(mode="json", exclude_none=True) for c in llm_request.contents]
        self._requests.append(contents)
        assert self._queue, f"model call {len(self._requests)} has no scripted answer: {contents}"
        answer = self._queue.popleft()
        self._calls += 1
        # a deterministic prompt size, so a token threshold can trigger on both sides alike
        prompt_tokens = sum(len(str(c)) for c in contents) // 4
        yield LlmResponse(
            content=answer.content(),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt_tokens,
                candidates_token_count=5,
                total_token_count=prompt_tokens + 5,
            ),
        )


# ---- the agents -------------------------------------------------------------------------------
# Every tool payload has one key: ``google.protobuf.Struct`` keeps no key order, so the engine
# renders a payload of several keys (in a summarizer prompt, in another agent's quoted turn) in
# its own order, ADK in insertion order (see test_differential's xfail on it).


def lookup(city: str) -> dict[str, Any]:
    """Looks up the weather in a city."""
    return {"weather": f"sunny in {city}"}


def book(city: str) -> dict[str, Any]:
    """Books a trip to a city (asks the user first)."""
    return {"booked": city}


def start_refund(order: str) -> dict[str, Any]:
    """Starts a refund; the result arrives later."""
    return {"status": f"{order} pending"}


def convert(amount: int) -> dict[str, Any]:
    """Converts an amount of euros to dollars."""
    return {"usd": amount * 2}


def build_agents(model: BaseLlm) -> LlmAgent:
    """The root agent (tools lookup, book (confirmed), start_refund (long-running)) and its
    sub-agent ``helper`` (tool convert), both on ``model``."""
    helper = LlmAgent(
        name="helper",
        model=model,
        instruction="You convert currencies.",
        description="Converts currencies.",
        tools=[FunctionTool(convert)],
    )
    return LlmAgent(
        name="root",
        model=model,
        instruction="You plan trips.",
        tools=[
            FunctionTool(lookup),
            FunctionTool(book, require_confirmation=True),
            LongRunningFunctionTool(start_refund),
        ],
        sub_agents=[helper],
    )


# ---- conversations ----------------------------------------------------------------------------

#: what a turn's user message is made from: the session's events so far
Message = Callable[[Sequence[Event]], types.Content]


def user_text(value: str) -> Message:
    return lambda _events: types.Content(role="user", parts=[types.Part(text=value)])


def _last_call(events: Sequence[Event], name: str) -> types.FunctionCall:
    for event in reversed(events):
        for fc in event.get_function_calls():
            if fc.name == name:
                return fc
    raise AssertionError(f"no {name} call in the session")


def answer_long_running(response: dict[str, Any]) -> Message:
    def make(events: Sequence[Event]) -> types.Content:
        fc = _last_call(events, "start_refund")
        part = types.Part(
            function_response=types.FunctionResponse(id=fc.id, name=fc.name, response=response)
        )
        return types.Content(role="user", parts=[part])

    return make


def confirm(confirmed: bool) -> Message:
    def make(events: Sequence[Event]) -> types.Content:
        fc = _last_call(events, CONFIRMATION_CALL)
        part = types.Part(
            function_response=types.FunctionResponse(
                id=fc.id, name=fc.name, response={"confirmed": confirmed}
            )
        )
        return types.Content(role="user", parts=[part])

    return make


@dataclass(frozen=True)
class Turn:
    """One invocation: the user's message and the model's answers, in call order.
    ``rewind`` > 0: before this turn, rewind the session to before the turn that many turns
    back."""

    kind: str
    message: Message
    answers: tuple[Answer, ...]
    rewind: int = 0


@dataclass
class _Ids:
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def next(self, prefix: str) -> str:
        return f"{prefix}-{next(self.counter)}"


#: the kinds of turn, given the agent that answers the user ("root" or "helper")
KINDS = ("text", "tool", "parallel", "transfer", "long_running", "confirm", "rewind")


def _turns_of(kind: str, agent: str, ids: _Ids, n: int) -> tuple[list[Turn], str]:
    """The turn(s) of one ``kind`` when ``agent`` answers; and who answers afterwards."""
    other = "helper" if agent == "root" else "root"
    if kind == "text":
        return [Turn(kind, user_text(f"hello {n}"), (text(f"hi {n} from {agent}"),))], agent
    if kind == "transfer":
        answers = (transfer(ids.next("tr"), other), text(f"{other} here ({n})"))
        return [Turn(kind, user_text(f"ask {other} {n}"), answers)], other
    if agent == "helper":
        # the helper's own tool, alone or twice in parallel
        calls = [(ids.next("cv"), "convert", {"amount": n})]
        if kind == "parallel":
            calls.append((ids.next("cv"), "convert", {"amount": n + 1}))
        answers = (call(*calls), text(f"converted {n}"))
        return [Turn(kind, user_text(f"convert {n}"), answers)], agent
    if kind == "tool":
        answers = (call((ids.next("lk"), "lookup", {"city": f"city{n}"})), text(f"weather {n}"))
        return [Turn(kind, user_text(f"weather {n}?"), answers)], agent
    if kind == "parallel":
        answers = (
            call(
                (ids.next("lk"), "lookup", {"city": f"a{n}"}),
                (ids.next("lk"), "lookup", {"city": f"b{n}"}),
            ),
            text(f"both {n}"),
        )
        return [Turn(kind, user_text(f"compare {n}"), answers)], agent
    if kind == "long_running":
        started = Turn(
            kind,
            user_text(f"refund {n}"),
            (
                call((ids.next("rf"), "start_refund", {"order": f"o{n}"})),
                text(f"refund {n} pending"),
            ),
        )
        finished = Turn(
            kind + "_done",
            answer_long_running({"status": f"o{n} refunded"}),
            (text(f"refund {n} done"),),
        )
        return [started, finished], agent
    if kind == "confirm":
        asked = Turn(
            kind,
            user_text(f"book {n}"),
            # ADK asks for the confirmation itself: no second model call
            (call((ids.next("bk"), "book", {"city": f"c{n}"})),),
        )
        confirmed = Turn(kind + "_yes", confirm(True), (text(f"booked {n}"),))
        return [asked, confirmed], agent
    raise AssertionError(kind)


def script(kinds: Sequence[str]) -> list[Turn]:
    """The turns for a sequence of kinds, starting with the root agent answering. ``rewind``
    becomes a text turn preceded by a rewind of the last turn."""
    ids = _Ids()
    agent = "root"
    before = agent  # who answered before the last turn (a rewind of it goes back to them)
    out: list[Turn] = []
    for n, kind in enumerate(kinds, 1):
        if kind == "rewind":
            if not out:
                continue
            # the last turn's invocation (both halves of a long-running call or a confirmation:
            # the answer resumes the invocation) is undone, and with it a transfer
            agent = before
            made, agent = _turns_of("text", agent, ids, n)
            out.append(Turn("rewind", made[0].message, made[0].answers, rewind=1))
            continue
        before = agent
        made, agent = _turns_of(kind, agent, ids, n)
        out.extend(made)
    return out


def fixed_script(*, without: Sequence[str] = ()) -> list[Turn]:
    """Every kind (but those ``without``), and enough invocations to compact a few times."""
    kinds = [
        "text",
        "tool",
        "parallel",
        "long_running",
        "confirm",
        "transfer",
        "parallel",
        "text",
        "transfer",
        "tool",
        "rewind",
        "text",
        "parallel",
    ]
    return script([k for k in kinds if k not in without])


def turns(*, max_size: int = 10, without: Sequence[str] = ()) -> st.SearchStrategy[list[Turn]]:
    """Conversations of up to ``max_size`` kinds of turn (all of :data:`KINDS` but ``without``)."""
    kinds = tuple(k for k in KINDS if k not in without)
    return st.lists(st.sampled_from(kinds), min_size=1, max_size=max_size).map(script)


@contextlib.contextmanager
def deterministic_adk(start: float = 1_700_000_000.0) -> Iterator[None]:
    """ADK's clock ticks one second per reading and its ids count up, for this context."""
    clock = itertools.count()
    numbers = itertools.count(1)
    adk_time.set_time_provider(lambda: start + next(clock))
    adk_uuid.set_id_provider(lambda: f"00000000-0000-4000-8000-{next(numbers):012d}")
    try:
        yield
    finally:
        adk_time.reset_time_provider()
        adk_uuid.reset_id_provider()


@dataclass
class Run:
    """What one conversation run produced."""

    #: every model request's contents, in call order
    requests: list[list[dict[str, Any]]]
    #: the invocation id of each turn
    invocations: list[str]


async def run_conversation(
    runner: Any,
    model: ScriptedLlm,
    conversation: Sequence[Turn],
    *,
    user_id: str = "user",
    session_id: str = "session",
    after_turn: Callable[[], Awaitable[None]] | None = None,
) -> Run:
    """Runs each turn through ``runner.run_async`` (the session must exist), rewinding first
    where a turn says so; the model must use every answer. ``after_turn`` is awaited after each
    turn (to let background work settle)."""
    invocations: list[str] = []
    service = runner.session_service
    for turn in conversation:
        if turn.rewind:
            await runner.rewind_async(
                user_id=user_id,
                session_id=session_id,
                rewind_before_invocation_id=invocations[-turn.rewind],
            )
        session = await service.get_session(
            app_name=runner.app_name, user_id=user_id, session_id=session_id
        )
        assert session is not None
        model.queue(turn.answers)
        invocation = ""
        async for event in runner.run_async(
            user_id=user_id, session_id=session_id, new_message=turn.message(session.events)
        ):
            invocation = invocation or event.invocation_id
        invocations.append(invocation)
        model.check_drained()
        if after_turn is not None:
            await after_turn()
    return Run(model.requests, invocations)
