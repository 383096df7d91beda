"""Incremental materialization equals a full rebuild, on generated logs growing in random steps."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from contextengine.core.context import ContextOptions, build_contents
from contextengine.core.context.incremental import View, encode_contents_field, materialize
from contextengine.core.tokens import CharsPerFourCounter, content_chars
from contextengine.v1 import event_pb2
from tests.parity.context_compare import options_for, to_proto_events
from tests.parity.context_strategies import Session, sessions, views
from tests.service.helpers import text_event

COUNTER = CharsPerFourCounter()

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _check_growth(
    events: Sequence[event_pb2.Event], options: ContextOptions, cuts: list[int]
) -> None:
    """Materializes ``events`` in steps ending at each cut (views are extended in place) and
    compares every step with a full rebuild."""
    view: View | None = None
    for cut in [*sorted(set(cuts)), len(events)]:
        prefix = list(events[:cut])
        view = materialize(prefix, options, COUNTER, view)
        full = build_contents(prefix, options)
        assert view.contents == full, f"differs after {cut} events ({view.mode})"
        assert bytes(view.body) == b"".join(encode_contents_field(c) for c in full)
        assert view.tokens == [COUNTER.count_content(c) for c in full]
        assert view.total_tokens == sum(view.tokens)
        assert view.total_chars == sum(content_chars(c) for c in full)


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), session=sessions())
def test_incremental_equals_rebuild(data: st.DataObject, session: Session) -> None:
    events = to_proto_events(session.events)
    options = options_for(data.draw(views(session)))
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=6))
    _check_growth(events, options, cuts)


def test_plain_conversation_is_extended_not_rebuilt() -> None:
    options = ContextOptions(agent_name="agent")
    events: list[event_pb2.Event] = []
    view = None
    modes = []
    for i in range(30):
        author = "user" if i % 2 == 0 else "agent"
        event = text_event(
            f"m{i}", author=author, invocation_id=f"i{i // 2}", timestamp=float(i + 1)
        )
        event.sequence = i + 1
        events.append(event)
        view = materialize(events, options, COUNTER, view)
        modes.append(view.mode)
    assert modes[0] == "full"
    assert set(modes[1:]) == {"extended"}
    assert view is not None
    assert view.contents == build_contents(events, options)


def test_rewind_forces_rebuild() -> None:
    options = ContextOptions(agent_name="agent")
    events = [
        text_event("q", invocation_id="i1", timestamp=1.0),
        text_event("a", author="agent", invocation_id="i1", timestamp=2.0),
    ]
    view = materialize(events, options, COUNTER)
    rewind = event_pb2.Event(author="user", invocation_id="e-r", timestamp=3.0)
    rewind.actions.rewind_before_invocation_id = "i1"
    events.append(rewind)
    view = materialize(events, options, COUNTER, view)
    assert view.mode == "full"
    assert view.contents == []


def test_idless_response_to_a_call_in_the_view_forces_rebuild() -> None:
    """ADK pairs calls and responses without ids by name, across the whole history."""
    options = ContextOptions(agent_name="agent")
    call = event_pb2.Event(author="agent", invocation_id="i1", timestamp=2.0)
    call.content.role = "model"
    call.content.parts.add().function_call.name = "read_file"
    response = event_pb2.Event(author="agent", invocation_id="i1", timestamp=3.0)
    response.content.role = "user"
    response.content.parts.add().function_response.name = "read_file"
    events = [text_event("q", invocation_id="i1", timestamp=1.0), call]
    view = materialize(events, options, COUNTER)
    events.append(response)
    view = materialize(events, options, COUNTER, view)
    assert view.mode == "full"
    assert view.contents == build_contents(events, options)
