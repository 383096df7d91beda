"""Differential proof that the engine builds the same model contents as google-adk 2.13.

Hypothesis draws realistic ADK sessions (``context_strategies``) and one to three views of each
(agent, branch, isolation scope, include_contents, id preservation, other agents' thoughts, node
input); for every view the contents google-adk computes from its own events must be identical to
what each engine of ``context_compare.ENGINES`` (``pure``: the pipeline; ``grpc``: a real sidecar)
computes from the same events converted to protos, **after every appended event**, not only at
the end: the events are given to the engine one at a time and every prefix is judged against ADK
on that prefix (``pure``: its incremental view, extended step by step, and a fresh build;
``grpc``: one AppendEvents per event, BuildContext for every view after each). Incremental equals
fresh equals ADK, at every step. The generated sessions put, after half of their steps, an event
that shows the viewer nothing new (state only, empty text, no parts, error, thought, rewind to
an unknown invocation, summary, another branch's reply), so prefixes end in one as often as in a
message. A failure prints the shrunk session as one line per event, the step, the view, both
outputs and the seed (``print_blob`` adds ``@reproduce_failure``).

* property tests, one per kind of session (380 sessions, 5,100 steps, 9,300 judged
  (step, view) pairs per engine; 60-80 s for both engines on 2 cores): tool calls,
  multi-agent, compaction, rewinds, include_contents='none', mixed;
* ``test_harness_self_check``: ADK against ADK run on the proto events converted back, so the
  conversion and the comparison are known to hide nothing;
* ``test_pinned_scenario``: fixed sessions for ADK's rare paths (compacted long-running calls,
  HITL resumes, stale progress chatter, batched results, posted orphans, transcription, live,
  rewinds, tool sub-branches, task agents), each under many views; every pipeline rule that was
  deliberately broken (30 mutations) made some test here fail;
* ``test_known_mismatch_*``: what the proto contract cannot carry (payload key order, 1.0 vs 1),
  ``xfail(strict=False)``.

Run: ``.venv/bin/pytest tests/core/context/test_context_differential.py`` (``make test`` runs it on a
fixed, code-derived example set).

Hunting profile (by hand): ``CONTEXT_DIFF_SCALE=<n>`` multiplies every property test's number of
examples and ``HYPOTHESIS_PROFILE=explore`` draws fresh ones on every run; lift the per-test
timeout, e.g. ``HYPOTHESIS_PROFILE=explore CONTEXT_DIFF_SCALE=20 .venv/bin/pytest
tests/core/context/test_context_differential.py -k "sessions or only" --timeout=0 -x -q`` (about 10
minutes per engine on 2 cores). Add ``-k pure`` to leave the sidecar out (faster; the ``pure``
engine checks the same incremental views the service keeps). Every divergence found so becomes a
named regression test (pinned here or in ``tests/core/context/test_incremental.py``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types
from google.protobuf import json_format
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from contextengine.core.adk_json import event_to_adk_json
from contextengine.core.context import ContextOptions
from contextengine.v1 import content_pb2, event_pb2

from .context_compare import (
    ENGINES,
    Engine,
    Outcome,
    adk_contents,
    adk_outcome,
    describe_events,
    describe_view,
    engine_outcome,
    grow,
    options_for,
    to_proto_events,
)
from .context_strategies import T0, Session, View, sessions, sorted_keys, views

pytestmark = [
    pytest.mark.parity,
    # AuthConfig.__init__ calls its own deprecated get_credential_key() (auth/auth_tool.py).
    pytest.mark.filterwarnings(
        r"ignore:This method is deprecated\. Use credential_key instead\.:DeprecationWarning"
    ),
]

ENGINE_PARAMS = [pytest.param(engine, id=engine.name) for engine in ENGINES]


#: the hunting profile's multiplier of every property test's examples (see the module docstring)
SCALE = int(os.environ.get("CONTEXT_DIFF_SCALE", "1"))


def _settings(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples * SCALE,
        database=None,
        deadline=None,
        print_blob=True,
        # no Phase.explain: on Python 3.11 it traces every line and a failing run then takes minutes
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@st.composite
def scenarios(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    profile: str,
    include_contents: str | None = None,
) -> tuple[Session, list[View]]:
    session = draw(sessions(profile, quiet=True))
    drawn = draw(st.lists(views(session, include_contents), min_size=1, max_size=3))
    return session, drawn


def _seed_hint(test: Callable[..., Any] | None) -> str:
    seed = getattr(test, "_hypothesis_internal_use_generated_seed", None)
    if seed is None:
        return "seed: none (a fixed example, or a derandomized / @seed run)"
    return f"seed: add @seed({seed}) or run pytest --hypothesis-seed={seed}"


@contextlib.contextmanager
def _quiet_adk_logs() -> Iterator[None]:
    """ADK logs a warning for every orphan it drops; generated sessions have many."""
    logger = logging.getLogger("google_adk")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _agree(expected: Outcome, actual: Outcome) -> bool:
    if expected.error is None:
        return actual == expected
    return actual.error is not None  # ADK fails on this session; so does the engine.


def check(
    engine: Engine,
    scenario: tuple[Session, list[View]],
    test: Callable[..., Any] | None = None,
) -> None:
    """Asserts ``engine`` agrees with google-adk on every view of the session, *after every
    appended event*: the events are given to the engine one at a time (``context_compare.grow``)
    and each of its answers (incremental, and fresh where the engine has both) must equal ADK's
    on that prefix.

    On a mismatch the message holds the session (one line per event) and the step, the view,
    both outputs and how to replay the run (``test`` is the hypothesis test, for its seed).
    """
    session, drawn_views = scenario
    events: Sequence[Event] = session.events
    proto_events = to_proto_events(events)
    if not engine.accepts(proto_events):
        return  # outside the engine's input contract; the pure engine covers the session
    options = [options_for(view) for view in drawn_views]

    def fail(step: int, view: View, how: str, expected: Outcome, actual: Outcome) -> None:
        what = "ADK raised but the engine answered" if expected.error else "differs from google-adk"
        raise AssertionError(
            f"engine {engine} ({how}) {what} after event [{step - 1}] ({step} of {len(events)})\n"
            f"session ({len(events)} events):\n{describe_events(events)}\n"
            f"view: {describe_view(view)}\n"
            f"ADK:\n{expected}\n"
            f"ours ({engine}, {how}):\n{actual}\n"
            f"{_seed_hint(test)}"
        )

    with _quiet_adk_logs():
        if not events:
            for view, view_options in zip(drawn_views, options, strict=True):
                expected = adk_outcome(events, view)
                actual = engine_outcome(engine, proto_events, view_options)
                if not _agree(expected, actual):
                    fail(0, view, "fresh", expected, actual)
            return
        for step, answers in enumerate(grow(engine, proto_events, options), start=1):
            prefix = events[:step]
            for view, view_answers in zip(drawn_views, answers, strict=True):
                expected = adk_outcome(prefix, view)
                for how, actual in view_answers:
                    if not _agree(expected, actual):
                        fail(step, view, how, expected, actual)


# ------------------------------------------------------------------------------ property tests


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@_settings(90)
@given(scenario=scenarios("tools"))
def test_tool_call_sessions(engine: Engine, scenario: tuple[Session, list[View]]) -> None:
    """Parallel, long-running, orphaned, id-less, reused-id and HITL calls and responses."""
    check(engine, scenario, test_tool_call_sessions)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@_settings(80)
@given(scenario=scenarios("agents"))
def test_multi_agent_sessions(engine: Engine, scenario: tuple[Session, list[View]]) -> None:
    """Several agents, branches, transfers, tool sub-branches, isolated task agents, live."""
    check(engine, scenario, test_multi_agent_sessions)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@_settings(70)
@given(scenario=scenarios("compaction"))
def test_compaction_sessions(engine: Engine, scenario: tuple[Session, list[View]]) -> None:
    """Nested, overlapping, identical, disjoint, reversed and late compaction ranges."""
    check(engine, scenario, test_compaction_sessions)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@_settings(40)
@given(scenario=scenarios("rewind"))
def test_rewind_sessions(engine: Engine, scenario: tuple[Session, list[View]]) -> None:
    """Rewinds to earlier, unknown, own and later invocations, rewinds over rewinds."""
    check(engine, scenario, test_rewind_sessions)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@_settings(50)
@given(scenario=scenarios("turn", include_contents="none"))
def test_current_turn_only(engine: Engine, scenario: tuple[Session, list[View]]) -> None:
    """include_contents='none': the current-turn anchor, then the full pipeline on the slice."""
    check(engine, scenario, test_current_turn_only)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@_settings(50)
@given(scenario=scenarios("mixed"))
def test_mixed_sessions(engine: Engine, scenario: tuple[Session, list[View]]) -> None:
    """Every kind of step in any order."""
    check(engine, scenario, test_mixed_sessions)


# ------------------------------------------------------------------------ the harness itself


def _adk_through_protos(
    events: Sequence[event_pb2.Event], options: ContextOptions
) -> list[content_pb2.Content]:
    """ADK run on the proto events converted back: proves the conversion and the comparison
    lose nothing the contents depend on, so a mismatch of a real engine is the engine's.

    Struct keys come back in no particular order; they are put in sorted order, which is the
    order the generated payloads were written in (``context_strategies.sorted_keys``)."""
    adk_events = [
        Event.model_validate(sorted_keys(json.loads(event_to_adk_json(e)))) for e in events
    ]
    user_content = None
    if options.user_content is not None:
        user_content = types.Content.model_validate(
            json_format.MessageToDict(options.user_content, preserving_proto_field_name=True)
        )
    view = View(
        agent_name=options.agent_name,
        branch=options.branch,
        isolation_scope=options.isolation_scope,
        include_contents=options.include_contents.value,
        preserve_function_call_ids=options.preserve_function_call_ids,
        include_thoughts_from_other_agents=options.include_thoughts_from_other_agents,
        user_content=user_content,
    )
    return [
        json_format.Parse(c.model_dump_json(exclude_none=True), content_pb2.Content())
        for c in adk_contents(adk_events, view)
    ]


@_settings(20)
@given(scenario=scenarios("mixed"))
def test_harness_self_check(scenario: tuple[Session, list[View]]) -> None:
    """ADK against ADK-through-the-proto-conversion: must always agree."""
    check(Engine("adk-through-protos", _adk_through_protos), scenario, test_harness_self_check)


# ------------------------------------------------------------- pinned scenarios and regressions
#
# Fixed sessions for the rare paths of ADK's pipeline that random sessions reach only now and
# then (each was seen to catch a deliberately broken pipeline). Every one is compared with ADK
# under many views, like the generated ones; nothing here states an expected output by hand.


def _text(text: str, **kwargs: Any) -> types.Part:
    return types.Part(text=text, **kwargs)


def _fc(call_id: str | None, name: str, args: dict[str, Any] | None = None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args or {}))


def _fr(call_id: str | None, name: str, response: dict[str, Any]) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(id=call_id, name=name, response=response)
    )


class _Log:
    """A hand-written session: ``add`` appends an event ``dt`` seconds after the previous."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.clock = 0.0

    def add(
        self, *parts: types.Part, dt: float = 1.0, role: str | None = None, **kwargs: Any
    ) -> Event:
        self.clock += dt
        kwargs.setdefault("invocation_id", "e-1")
        kwargs.setdefault("author", "root")
        if parts:
            # ADK's conventions: the user and function responses speak as 'user'
            speaks_as_user = kwargs["author"] == "user" or any(p.function_response for p in parts)
            kwargs["content"] = types.Content(
                role=role or ("user" if speaks_as_user else "model"), parts=list(parts)
            )
        event = Event(id=f"ev-{len(self.events) + 1}", timestamp=T0 + self.clock, **kwargs)
        self.events.append(event)
        return event

    def compaction(self, start: Event, end: Event, *, dt: float = 1.0, text: str = "S") -> None:
        self.add(
            dt=dt,
            author="user",
            invocation_id=f"c-{len(self.events)}",
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=start.timestamp,
                    end_timestamp=end.timestamp,
                    compacted_content=types.Content(role="model", parts=[_text(text)]),
                )
            ),
        )


def _pinned_views(
    *, branches: Sequence[str | None] = (None,), scopes: Sequence[str | None] = (None,)
) -> list[View]:
    """Every agent (and none) x branch x scope x include_contents x id preservation."""
    node_input = types.Content(role="user", parts=[_text("node input")])
    return [
        View(
            agent_name=agent,
            branch=branch,
            isolation_scope=scope,
            include_contents=include,
            preserve_function_call_ids=preserve,
            include_thoughts_from_other_agents=preserve,
            user_content=node_input if scope is not None and preserve else None,
        )
        for agent in ("root", "planner", "coder", "")
        for branch in branches
        for scope in scopes
        for include in ("default", "none")
        for preserve in (False, True)
    ]


def _late_event_inside_summary() -> tuple[list[Event], list[View]]:
    """A summary re-sorts the history by timestamp; an event appended later but timestamped
    inside the summarised range is hidden."""
    log = _Log()
    first = log.add(_text("a"), author="user")
    second = log.add(_text("b"))
    log.compaction(first, second, dt=2.0)
    log.add(_text("c"), dt=-1.0)
    log.add(_text("d"), author="user", invocation_id="e-2")
    return log.events, _pinned_views()


def _compacted_long_running_call() -> tuple[list[Event], list[View]]:
    """Parallel calls (two long-running) compacted with their merged acknowledgement and a
    progress update at the same instant; the long-running result arrives after the summary, so
    the call and the latest responses of its siblings are recovered."""
    log = _Log()
    log.add(_text("go"), author="user")
    calls = log.add(
        _fc("adk-a", "long_job"),
        _fc("adk-b", "long_job"),
        _fc("call_c", "search", {"query": "x"}),
        long_running_tool_ids={"adk-a", "adk-b"},
    )
    log.add(
        _fr("adk-a", "long_job", {"status": "pending"}),
        _fr("adk-b", "long_job", {"status": "pending"}),
        _fr("call_c", "search", {"result": 3}),
    )
    last = log.add(_fr("adk-b", "long_job", {"progress": 50}), dt=0.0)
    log.compaction(calls, last)
    log.add(_text("any news?"), author="user", invocation_id="e-2")
    log.add(_fr("adk-a", "long_job", {"result": "done"}), author="user", invocation_id="e-3")
    return log.events, _pinned_views()


def _confirmation_then_resumed() -> tuple[list[Event], list[View]]:
    """A tool asks for confirmation, the model says it waits, the user confirms and the tool
    runs in the same invocation: the waiting text sits between two responses of one call, but
    the first one is a HITL request, so it is not a stale reply."""
    log = _Log()
    log.add(_text("delete it"), author="user")
    log.add(_fc("adk-w", "delete_file", {"path": "/tmp/x"}))
    log.add(
        _fr("adk-w", "delete_file", {"error": "needs confirmation"}),
        actions=EventActions(
            requested_tool_confirmations={"adk-w": ToolConfirmation(hint="Delete /tmp/x?")}
        ),
    )
    log.add(
        _fc("adk-r", "adk_request_confirmation", {"originalFunctionCall": {"id": "adk-w"}}),
        long_running_tool_ids={"adk-r"},
    )
    log.add(_text("I need your approval first."))
    log.add(_fr("adk-r", "adk_request_confirmation", {"confirmed": True}), author="user")
    log.add(_fr("adk-w", "delete_file", {"result": "deleted"}))
    log.add(_text("thanks"), author="user", invocation_id="e-2")
    log.add(_text("You are welcome."), invocation_id="e-2")
    return log.events, _pinned_views()


def _progress_with_chatter() -> tuple[list[Event], list[View]]:
    """A long-running tool reports progress within the invocation; text replies between two
    updates are stale (dropped), a code-only reply is not."""
    log = _Log()
    log.add(_text("run the job"), author="user")
    log.add(_fc("adk-p", "long_job"), long_running_tool_ids={"adk-p"})
    log.add(_fr("adk-p", "long_job", {"progress": 25}))
    log.add(
        types.Part(
            executable_code=types.ExecutableCode(code="poll()", language=types.Language.PYTHON)
        )
    )
    log.add(_fr("adk-p", "long_job", {"progress": 50}))
    log.add(_text("Still working."))
    log.add(_fr("adk-p", "long_job", {"progress": 100, "result": "done"}))
    log.add(_text("ok"), author="user", invocation_id="e-2")
    return log.events, _pinned_views()


def _batch_of_results() -> tuple[list[Event], list[View]]:
    """Two long-running calls from separate model turns; the user posts both results (with a
    remark) in one trailing event, which is split back to its calls."""
    log = _Log()
    log.add(_text("book it"), author="user")
    log.add(_fc("adk-a", "approve"), long_running_tool_ids={"adk-a"})
    log.add(_text("Waiting."))
    log.add(_fc("adk-b", "long_job"), long_running_tool_ids={"adk-b"})
    log.add(
        _fr("adk-b", "long_job", {"result": 2}),
        _fr("adk-a", "approve", {"approved": True}),
        _text("(both done)"),
        author="user",
        invocation_id="e-2",
    )
    return log.events, _pinned_views()


def _posted_orphan_ends_turn() -> tuple[list[Event], list[View]]:
    """include_contents='none': a user-posted result for a call that never happened is not a
    turn start and waits for nothing."""
    log = _Log()
    log.add(_text("q1"), author="user")
    log.add(_text("a1"))
    log.add(_text("q2"), author="user", invocation_id="e-2")
    log.add(_fc("call_x", "search", {"query": "q2"}), invocation_id="e-2")
    log.add(_fr("call_x", "search", {"result": 1}), invocation_id="e-2")
    log.add(_fr("call_ghost", "search", {"result": "?"}), author="user", invocation_id="e-3")
    return log.events, _pinned_views()


def _transcriptions_and_live() -> tuple[list[Event], list[View]]:
    """Audio: input and output transcription runs are folded into one text turn each; in a live
    session every agent event, the viewer's own included, is another agent's turn."""
    log = _Log()
    log.add(author="user", input_transcription=types.Transcription(text="hel"))
    log.add(author="user", input_transcription=types.Transcription(text="lo "))
    log.add(output_transcription=types.Transcription(text="hi "), live_session_id="live-1")
    log.add(output_transcription=types.Transcription(text="there"), live_session_id="live-1")
    log.add(author="user", input_transcription=types.Transcription(text=""))
    log.add(_text("Hi!"), live_session_id="live-1")
    log.add(_text("from the planner"), author="planner", live_session_id="live-1")
    log.add(_text("and the user"), author="user", live_session_id="live-1")
    return log.events, _pinned_views()


def _rewinds() -> tuple[list[Event], list[View]]:
    """Rewinds to an earlier, an unknown, a later and its own invocation, and a rewind that
    removes other rewinds."""
    log = _Log()

    def rewind(invocation: str, target: str) -> None:
        log.add(
            author="user",
            invocation_id=invocation,
            actions=EventActions(rewind_before_invocation_id=target),
        )

    log.add(_text("q1"), author="user", invocation_id="e-1")
    log.add(_text("a1"), invocation_id="e-1")
    log.add(_text("q2"), author="user", invocation_id="e-2")
    log.add(_text("a2"), invocation_id="e-2")
    rewind("e-3", "e-2")
    log.add(_text("q4"), author="user", invocation_id="e-4")
    rewind("e-5", "e-unknown")
    rewind("e-6", "e-7")
    rewind("e-6b", "e-6b")
    log.add(_text("q7"), author="user", invocation_id="e-7")
    log.add(_text("a7"), invocation_id="e-7")
    rewind("e-8", "e-4")
    log.add(_text("q9"), author="user", invocation_id="e-9")
    return log.events, _pinned_views()


def _branches_and_tools() -> tuple[list[Event], list[View]]:
    """Sub-agents on their branches, an agent run as a tool on ``<agent>@<call id>``, a tool's
    progress on ``<tool>@<call id>`` (deeper too) and on a run-id branch."""
    log = _Log()
    log.add(_text("plan and code"), author="user")
    log.add(_fc("call_t", "coder", {"request": "write"}), branch="root")
    log.add(_text("coding"), author="coder", branch="root.coder@call_t")
    log.add(_fc("call_s", "search"), author="coder", branch="root.coder@call_t")
    log.add(_text("searching 50%"), author="coder", branch="root.coder@call_t.search@call_s")
    log.add(_text("deeper"), author="coder", branch="root.coder@call_t.search@call_s.step@r1")
    log.add(_text("node run"), author="coder", branch="root.coder@call_t.job@r7")
    log.add(_fr("call_s", "search", {"result": 1}), author="coder", branch="root.coder@call_t")
    log.add(_fr("call_t", "coder", {"result": "done"}), branch="root")
    log.add(_text("planning"), author="planner", branch="root.planner")
    log.add(_text("elsewhere"), author="planner", branch="root.plannerx")
    branches = (
        None,
        "root",
        "root.coder@call_t",
        "root.planner",
        "root.plannerx",
        "root.coder@call_t.search@call_s",
    )
    return log.events, _pinned_views(branches=branches)


def _isolated_task_agents() -> tuple[list[Event], list[View]]:
    """Task agents under ``isolation_scope=<call id>``: the originating call's arguments become
    the first user turn, or the node input when the call has no arguments."""
    log = _Log()
    log.add(_text("do two tasks"), author="user")
    log.add(_fc("call_t1", "coder", {"task": "tests"}), _fc("call_t2", "coder"))
    log.add(_text("working on tests"), author="coder", isolation_scope="call_t1")
    log.add(_text("scoped question"), author="user", isolation_scope="call_t2")
    log.add(_text("working on the other"), author="coder", isolation_scope="call_t2")
    log.add(_fr("call_t1", "coder", {"result": 1}), _fr("call_t2", "coder", {"result": 2}))
    log.add(_text("empty scope"), author="coder", isolation_scope="")
    return log.events, _pinned_views(scopes=(None, "call_t1", "call_t2", "", "call_zzz"))


PINNED: dict[str, Callable[[], tuple[list[Event], list[View]]]] = {
    "late_event_inside_summary": _late_event_inside_summary,
    "compacted_long_running_call": _compacted_long_running_call,
    "confirmation_then_resumed": _confirmation_then_resumed,
    "progress_with_chatter": _progress_with_chatter,
    "batch_of_results": _batch_of_results,
    "posted_orphan_ends_turn": _posted_orphan_ends_turn,
    "transcriptions_and_live": _transcriptions_and_live,
    "rewinds": _rewinds,
    "branches_and_tools": _branches_and_tools,
    "isolated_task_agents": _isolated_task_agents,
}


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("name", sorted(PINNED))
def test_pinned_scenario(engine: Engine, name: str) -> None:
    events, pinned_views = PINNED[name]()
    check(engine, (Session(events=tuple(events), branches=(), scopes=()), pinned_views))


# ------------------------------------------------------------------------- known mismatches
#
# What the proto contract cannot carry: google.protobuf.Struct keeps no key order and stores
# every number as a double. ADK prints payload dicts with str() / json.dumps() in the order their
# keys were written and keeps 1.0 apart from 1; the engine sees sorted keys and integral numbers
# as ints. The generated sessions avoid both (sorted keys, no integral floats); these pin them.

_KNOWN_PAYLOAD_MISMATCH = pytest.mark.xfail(
    strict=False,
    reason="proto Struct payloads: no key order, integral doubles become ints (see above)",
)


def _payload_session(args: dict[str, Any], response: dict[str, Any]) -> list[Event]:
    log = _Log()
    log.add(_text("go"), author="user")
    log.add(_fc("call_1", "coder", args))
    log.add(_fr("call_1", "coder", response))
    log.add(_text("scoped"), author="coder", isolation_scope="call_1")
    return log.events


_PAYLOAD_VIEWS = [
    pytest.param(View(agent_name="planner"), id="other-agent-framing"),
    pytest.param(View(agent_name="coder", isolation_scope="call_1"), id="task-input-json"),
]


@_KNOWN_PAYLOAD_MISMATCH
@pytest.mark.parametrize("view", _PAYLOAD_VIEWS)
@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_known_mismatch_unsorted_payload_keys(engine: Engine, view: View) -> None:
    """Another agent's tool response and nested arguments, and a task's arguments, written with
    keys out of order: ADK quotes them in that order, the engine in sorted order."""
    events = _payload_session(
        {"zeta": 1, "alpha": {"y": 2, "b": 3}}, {"status": "ok", "data": {"z": 1, "a": 2}}
    )
    check(engine, (Session(events=tuple(events), branches=(), scopes=()), [view]))


@_KNOWN_PAYLOAD_MISMATCH
@pytest.mark.parametrize("view", _PAYLOAD_VIEWS)
@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_known_mismatch_integral_float_payload(engine: Engine, view: View) -> None:
    """Tool arguments and results holding 2.0 / 1.0: ADK prints ``2.0``, the engine ``2``."""
    events = _payload_session({"limit": 2.0}, {"score": 1.0})
    check(engine, (Session(events=tuple(events), branches=(), scopes=()), [view]))
