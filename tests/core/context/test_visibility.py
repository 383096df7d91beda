"""Per-event visibility (section 6.3 with the part rules of 1.4), checked against ADK."""

from __future__ import annotations

import pytest
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context._contents import _is_event_belongs_to_branch
from google.genai import types

from contextengine.core.context._visibility import branch_is_visible, is_tool_sub_branch
from tests.core.context.adk_compare import adk_options, assert_matches_adk
from tests.core.context.builders import call, describe, event, response, text

pytestmark = pytest.mark.unit

AGENT = adk_options(agent_name="agent")


def test_branch_ancestry_spec_example_root_a_b() -> None:
    branches = [None, "root", "root.a", "root.a.b", "root.a.c", "root.ab", "root.a.b.d"]
    events = [event(i, "agent", text(b or "none"), branch=b) for i, b in enumerate(branches, 1)]
    contents = assert_matches_adk(events, adk_options(agent_name="agent", branch="root.a.b"))
    assert describe(contents) == ["model: none", "model: root", "model: root.a", "model: root.a.b"]


@pytest.mark.parametrize(
    ("viewer", "branch"),
    [
        ("root.a.b", "root.a"),
        ("root.a.b", "root.ab"),
        ("root.a", "root.a.b"),
        ("a..b", "a."),
        ("a..b", "a"),
        ("a.b", "a.b"),
        ("", "x"),
        (None, "x"),
        ("x", ""),
        ("x", None),
    ],
)
def test_branch_rule_is_adks(viewer: str | None, branch: str | None) -> None:
    expected = _is_event_belongs_to_branch(viewer, Event(author="a", branch=branch))
    assert branch_is_visible(viewer, branch) is expected


def test_unbranched_viewer_sees_every_branch() -> None:
    events = [event(1, "agent", text("deep"), branch="x.y.z"), event(2, "agent", text("top"))]
    assert describe(assert_matches_adk(events, AGENT)) == ["model: deep", "model: top"]


@pytest.mark.parametrize("scope", [None, "", "t1", "t2"])
def test_isolation_scope_is_exact(scope: str | None) -> None:
    events = [
        event(1, "agent", text("unscoped")),
        event(2, "agent", text("empty"), isolation_scope=""),
        event(3, "agent", text("t1"), isolation_scope="t1"),
    ]
    contents = assert_matches_adk(events, adk_options(agent_name="agent", isolation_scope=scope))
    expected = {None: ["model: unscoped"], "": ["model: empty"], "t1": ["model: t1"], "t2": []}
    assert describe(contents) == expected[scope]


def test_user_message_to_a_workflow_node_is_hidden() -> None:
    events = [
        event(1, "user", text("to node"), node_path="wf@1/node@2"),
        event(2, "user", response("f", "c0", r=1), node_path="wf@1"),  # responses stay
        event(3, "agent", text("agent on a node"), node_path="wf@1"),
        event(4, "user", text("plain")),
    ]
    contents = assert_matches_adk(events, AGENT)
    assert describe(contents) == ["model: agent on a node", "user: plain"]


@pytest.mark.parametrize(
    ("name", "content", "visible"),
    [
        ("no role", types.Content(parts=[types.Part(text="x")]), False),
        ("empty role", types.Content(role="", parts=[types.Part(text="x")]), False),
        ("no parts", types.Content(role="model", parts=[]), False),
        ("empty text", types.Content(role="model", parts=[types.Part(text="")]), False),
        ("empty part", types.Content(role="model", parts=[types.Part()]), False),
        (
            "thought only",
            types.Content(role="model", parts=[types.Part(text="t", thought=True)]),
            False,
        ),
        (
            "signature only",
            types.Content(role="model", parts=[types.Part(thought_signature=b"s")]),
            True,
        ),
        (
            "thought with signature",
            types.Content(
                role="model", parts=[types.Part(text="t", thought=True, thought_signature=b"s")]
            ),
            True,
        ),
        (
            "inline data",
            types.Content(
                role="model",
                parts=[types.Part(inline_data=types.Blob(data=b"x", mime_type="image/png"))],
            ),
            True,
        ),
        (
            "code",
            types.Content(
                role="model",
                parts=[
                    types.Part(
                        executable_code=types.ExecutableCode(
                            code="1", language=types.Language.PYTHON
                        )
                    )
                ],
            ),
            True,
        ),
        (
            "thought function call",
            types.Content(
                role="model",
                parts=[
                    types.Part(function_call=types.FunctionCall(name="f", id="c1"), thought=True)
                ],
            ),
            True,
        ),
    ],
)
def test_empty_content_rules(name: str, content: types.Content, visible: bool) -> None:
    events = [
        Event(id="e1", timestamp=1, author="agent", content=content, long_running_tool_ids={"c1"}),
        event(2, "user", text("after")),
    ]
    contents = assert_matches_adk(events, AGENT)
    assert len(contents) == (2 if visible else 1), name


def test_server_side_tool_parts_are_visible() -> None:
    tool_call = types.Part.model_validate({"tool_call": {"id": "s1"}})
    events = [
        Event(
            id="e1",
            timestamp=1,
            author="agent",
            content=types.Content(role="model", parts=[tool_call]),
        )
    ]
    assert len(assert_matches_adk(events, AGENT)) == 1


def test_event_without_content_is_hidden() -> None:
    events = [event(1, "agent", state={"k": 1}), event(2, "user", text("q"))]
    assert describe(assert_matches_adk(events, AGENT)) == ["user: q"]


@pytest.mark.parametrize(
    "name", ["adk_framework", "adk_request_credential", "adk_request_confirmation"]
)
def test_framework_exchanges_are_hidden(name: str) -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call(name, "c1"), text("visible text in the same event")),
        event(3, "user", response(name, "c1", ok=True)),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == ["user: q"]


def test_adk_request_input_is_not_hidden() -> None:
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("adk_request_input", "c1")),
        event(3, "user", response("adk_request_input", "c1", answer="yes")),
    ]
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC adk_request_input({})#c1",
        "user: FR adk_request_input={'answer': 'yes'}#c1",
    ]


def test_tool_sub_branch_messages_are_hidden() -> None:
    options = adk_options(agent_name="agent", branch="root.agent")
    events = [
        event(1, "user", text("q")),
        event(2, "agent", call("tool", "c1"), branch="root.agent"),
        event(3, "agent", text("progress 50%"), branch="root.agent.tool@c1"),
        event(4, "agent", text("nested"), branch="root.agent.tool@c1.node@7"),
        event(5, "agent", response("tool", "c1", r=1), branch="root.agent"),
        event(6, "agent", text("not a call id"), branch="root.agent.tool@zz"),
    ]
    contents = assert_matches_adk(events, options)
    assert describe(contents) == ["user: q", "model: FC tool({})#c1", "user: FR tool={'r': 1}#c1"]
    # from no branch every branch is an ancestor-or-equal, but tool sub-branches stay hidden
    assert describe(assert_matches_adk(events, AGENT)) == [
        "user: q",
        "model: FC tool({})#c1",
        "user: FR tool={'r': 1}#c1",
        "model: not a call id",
    ]


def test_agent_run_as_a_tool_sees_its_own_branch() -> None:
    # an agent on <agent>@<call id> is not a tool message for itself
    options = adk_options(agent_name="helper", branch="root.helper@c1")
    events = [
        event(1, "root", call("helper", "c1"), branch="root"),
        event(2, "helper", text("working"), branch="root.helper@c1"),
    ]
    contents = assert_matches_adk(events, options)
    # root's call is another agent's (framed as text); helper's own message stays its own
    assert describe(contents)[1] == "model: working"
    assert "[root] called tool `helper`" in contents[0].parts[1].text


def test_is_tool_sub_branch_checks_every_segment_below_the_viewer() -> None:
    ids = {"c1"}
    assert is_tool_sub_branch("a", "a.t@c1.n@2", "agent", ids)
    assert is_tool_sub_branch(None, "t@c1", "agent", ids)
    assert not is_tool_sub_branch("a.t@c1", "a.t@c1.n@2", "agent", ids)  # at/above the viewer
    assert not is_tool_sub_branch("a", "a.agent@c1", "agent", ids)
    assert not is_tool_sub_branch("a", "b.t@c1", "agent", ids)
    assert not is_tool_sub_branch("a", "a", "agent", ids)


def test_other_agents_thoughts_only_when_asked() -> None:
    events = [event(1, "other", text("hmm", thought=True)), event(2, "user", text("q"))]
    assert describe(assert_matches_adk(events, AGENT)) == ["user: q"]
    with_thoughts = adk_options(agent_name="agent", include_thoughts_from_other_agents=True)
    contents = assert_matches_adk(events, with_thoughts)
    assert len(contents) == 2
    assert contents[0].parts[1].text.startswith("[other] thought:\n")


def test_own_thoughts_inside_a_visible_event_are_kept() -> None:
    events = [event(1, "agent", text("think2", thought=True), text("answer"))]
    assert describe(assert_matches_adk(events, AGENT)) == ["model: (thought) think2 | answer"]
