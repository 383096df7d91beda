"""Contents since across two sidecars on one PostgreSQL database: equal contents have equal
digests on both (function arguments, whose map entries serialize in any order unless told, and
another agent's framing included), so an answer held from A is a delta on B."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2, context_service_pb2 as cpb, event_pb2
from tests.service.helpers import text_event
from tests.store.postgres.sidecars import APP, client, sidecars

pytestmark = [pytest.mark.scaling, pytest.mark.timeout(90)]


def _call(call_id: str) -> event_pb2.Event:
    args = dict_to_struct({"zeta": 1, "alpha": {"y": [1, 2], "b": "x", "m": None}, "k": True})
    return event_pb2.Event(
        author="agent",
        invocation_id="i1",
        content=content_pb2.Content(
            role="model",
            parts=[
                content_pb2.Part(
                    function_call=content_pb2.FunctionCall(id=call_id, name="f", args=args)
                )
            ],
        ),
    )


def _response(call_id: str) -> event_pb2.Event:
    result = dict_to_struct({"q": 2, "a": [{"z": 1, "c": 2}], "m": "done"})
    return event_pb2.Event(
        author="agent",
        invocation_id="i1",
        content=content_pb2.Content(
            role="user",
            parts=[
                content_pb2.Part(
                    function_response=content_pb2.FunctionResponse(
                        id=call_id, name="f", response=result
                    )
                )
            ],
        ),
    )


async def test_equal_contents_have_equal_digests_on_both_sidecars(
    tmp_path: Path, postgres_dsn: str
) -> None:
    async with sidecars(tmp_path, postgres_dsn) as (a, b), client(a) as ca, client(b) as cb:
        await ca.create_session(APP, "u", "s")
        await ca.append_events(
            APP,
            "u",
            "s",
            [
                text_event("question", invocation_id="i1"),
                _call("c1"),
                _response("c1"),
                text_event("aside", author="other", invocation_id="i1"),
            ],
        )
        for agent in ("agent", "helper"):
            on_a = await ca.build_context(APP, "u", "s", agent_name=agent, skip_compaction=True)
            on_b = await cb.build_context(APP, "u", "s", agent_name=agent, skip_compaction=True)
            assert list(on_a.contents) == list(on_b.contents)
            assert on_a.contents_digest == on_b.contents_digest != ""
        held = await ca.build_context(APP, "u", "s", agent_name="agent", skip_compaction=True)
        await cb.append_events(APP, "u", "s", [text_event("next", invocation_id="i2")])
        since = cpb.ContextSince(
            contents_count=len(held.contents), contents_digest=held.contents_digest
        )
        delta = await cb.build_context(
            APP, "u", "s", agent_name="agent", skip_compaction=True, since=since
        )
        assert delta.base_contents_count == len(held.contents)
        assert [c.parts[0].text for c in delta.contents] == ["next"]
        whole = await ca.build_context(APP, "u", "s", agent_name="agent", skip_compaction=True)
        assert list(held.contents) + list(delta.contents) == list(whole.contents)
        assert delta.contents_digest == whole.contents_digest
