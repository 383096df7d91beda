"""Proof that google-adk 2.13 event JSON and ``contextengine.v1.Event`` convert into each other.

For every corpus event (see ``adk_corpus``): ADK JSON -> proto (``json_format``) -> ADK JSON
loads in ADK to an event equal to the original, the proto survives binary serialization, the
engine-only fields are dropped again, and every proto field is exercised by some event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from google.adk.events.event import Event, NodeInfo
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.models.cache_metadata import CacheMetadata
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings

from contextengine.core.adk_json import event_from_adk_json, event_to_adk_dict, event_to_adk_json
from contextengine.core.errors import ContextEngineError
from contextengine.v1 import content_pb2, event_pb2

from . import adk_corpus
from .adk_corpus import KNOWN_MISMATCHES, Case

pytestmark = [
    pytest.mark.parity,
    *(pytest.mark.filterwarnings(mark) for mark in adk_corpus.ADK_WARNING_MARKS),
]

#: Proto fields ADK does not have (the engine's own bookkeeping).
ENGINE_ONLY_FIELDS = frozenset(
    {
        ("contextengine.v1.Event", "sequence"),
        ("contextengine.v1.Event", "pinned"),
        ("contextengine.v1.Event", "context_edits"),
        ("contextengine.v1.EventCompaction", "start_sequence"),
        ("contextengine.v1.EventCompaction", "end_sequence"),
    }
)

#: The proto messages of the contract, paired with the ADK / google-genai model they mirror.
MIRRORED: tuple[tuple[type[Message], type[Any]], ...] = (
    (event_pb2.Event, Event),
    (event_pb2.EventActions, EventActions),
    (event_pb2.EventCompaction, EventCompaction),
    (event_pb2.ToolConfirmation, ToolConfirmation),
    (event_pb2.UsageMetadata, types.GenerateContentResponseUsageMetadata),
    (event_pb2.ModalityTokenCount, types.ModalityTokenCount),
    (event_pb2.CacheMetadata, CacheMetadata),
    (event_pb2.NodeInfo, NodeInfo),
    (content_pb2.Content, types.Content),
    (content_pb2.Part, types.Part),
    (content_pb2.FunctionCall, types.FunctionCall),
    (content_pb2.FunctionResponse, types.FunctionResponse),
    (content_pb2.Blob, types.Blob),
    (content_pb2.FileData, types.FileData),
    (content_pb2.ExecutableCode, types.ExecutableCode),
    (content_pb2.CodeExecutionResult, types.CodeExecutionResult),
    (content_pb2.VideoMetadata, types.VideoMetadata),
    (content_pb2.Transcription, types.Transcription),
)


def canonical(json_text: str) -> str:
    """JSON text with sorted keys; keeps the int/float distinction (``1`` vs ``1.0``)."""
    return json.dumps(json.loads(json_text), sort_keys=True)


def assert_round_trips(original: Event, *, adk_self_roundtrip: bool = True) -> None:
    adk_json = original.model_dump_json(exclude_none=True)
    adk_reload = Event.model_validate_json(adk_json)
    assert (adk_reload == original) is adk_self_roundtrip, "ADK's own JSON round-trip changed"
    expected = original if adk_self_roundtrip else adk_reload

    message = event_from_adk_json(adk_json)

    # 1. The contract, literally: json_format both ways, proto field names preserved.
    printed = json_format.MessageToJson(message, preserving_proto_field_name=True)
    assert Event.model_validate_json(printed) == expected

    # 2. The JSON-mode dict parses to the same message.
    assert event_from_adk_json(original.model_dump(mode="json", exclude_none=True)) == message

    # 3. Binary serialization.
    wire = message.SerializeToString(deterministic=True)
    decoded = event_pb2.Event.FromString(wire)
    assert decoded == message
    assert decoded.SerializeToString(deterministic=True) == wire

    # 4. event_to_adk_json: an equal event, and ADK then dumps exactly the JSON it started from.
    reloaded = Event.model_validate_json(event_to_adk_json(decoded))
    assert reloaded == expected
    assert canonical(reloaded.model_dump_json(exclude_none=True)) == canonical(adk_json)

    # 5. An engine event (sequence numbers set) still loads, and is not modified.
    engine = event_pb2.Event()
    engine.CopyFrom(decoded)
    engine.sequence = 42
    engine.pinned = True
    engine.context_edits.add().pin.first = 1
    if engine.actions.HasField("compaction"):
        engine.actions.compaction.start_sequence = 3
        engine.actions.compaction.end_sequence = 17
    before = engine.SerializeToString(deterministic=True)
    assert Event.model_validate_json(event_to_adk_json(engine)) == expected
    assert engine.SerializeToString(deterministic=True) == before


def _params(cases: Iterable[Case]) -> list[Any]:
    params = []
    for case in cases:
        marks = []
        if case.mismatch is not None:
            mismatch = KNOWN_MISMATCHES[case.mismatch]
            marks.append(
                pytest.mark.xfail(
                    strict=True,
                    raises=mismatch.raises,
                    reason=f"{case.mismatch}: {mismatch.reason}",
                )
            )
        params.append(pytest.param(case, id=case.name, marks=marks))
    return params


CONSTRUCTED = adk_corpus.constructed_cases()
RUNNER = adk_corpus.runner_cases()
MISMATCHES = adk_corpus.known_mismatch_cases()
FIXED = adk_corpus.fixed_mismatch_cases()


@pytest.mark.parametrize("case", _params(CONSTRUCTED))
def test_constructed_event_round_trips(case: Case) -> None:
    assert_round_trips(case.event, adk_self_roundtrip=case.adk_self_roundtrip)


@pytest.mark.parametrize("case", _params(RUNNER))
def test_runner_event_round_trips(case: Case) -> None:
    assert_round_trips(case.event, adk_self_roundtrip=case.adk_self_roundtrip)


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name) for c in RUNNER if c.mismatch is not None]
)
def test_runner_event_round_trips_but_for_its_known_mismatch(case: Case) -> None:
    """The runner events that hit a known mismatch differ in nothing else."""
    message = event_from_adk_json(case.event.model_dump_json(exclude_none=True))
    reloaded = Event.model_validate_json(event_to_adk_json(message))
    assert reloaded == adk_corpus.as_it_comes_back(case.event)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in FIXED])
def test_former_mismatch_now_round_trips(case: Case) -> None:
    """Regressions: these did not survive the proto until it gained the fields / presence."""
    assert_round_trips(case.event, adk_self_roundtrip=case.adk_self_roundtrip)


@pytest.mark.parametrize("case", _params(MISMATCHES))
def test_known_mismatch(case: Case) -> None:
    """Each case documents one way an ADK event does not survive the proto (strict xfail: fixing
    the contract turns these into failures to be removed)."""
    assert_round_trips(case.event, adk_self_roundtrip=case.adk_self_roundtrip)


def test_every_known_mismatch_has_a_case() -> None:
    assert {case.mismatch for case in MISMATCHES} == set(KNOWN_MISMATCHES)


def test_runner_corpus_covers_the_scenarios() -> None:
    labels = {case.name.split("-", 1)[0] + ":" + case.name.rsplit("-", 1)[1] for case in RUNNER}
    for expected in [
        "tools:call",
        "tools:response",
        "hitl:response",
        "transfer:error",
        "streaming:partial",
        "compaction:compaction",
        "compaction:rewind",
        "summarizer:compaction",
        "workflow:output",
    ]:
        assert expected in labels
    events = [case.event for case in RUNNER]
    assert any(e.long_running_tool_ids for e in events)
    assert any(e.actions.requested_tool_confirmations for e in events)
    assert any(e.actions.requested_auth_configs for e in events)
    assert any(e.actions.artifact_delta for e in events)
    assert any(e.actions.transfer_to_agent for e in events)
    assert any(e.actions.escalate and e.actions.skip_summarization for e in events)
    assert any(p.thought_signature for e in events if e.content for p in e.content.parts or [])
    assert any(e.usage_metadata and e.usage_metadata.prompt_token_count == 0 for e in events)


# Hypothesis warns while printing a large falsifying example; without this filter a failure would
# surface as that warning instead of the example.
@pytest.mark.filterwarnings(
    "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adk_corpus.events)
def test_generated_event_round_trips(event: Event) -> None:
    assert_round_trips(event)


# --------------------------------------------------------------------------------------------
# coverage: the corpus exercises every field of the contract
# --------------------------------------------------------------------------------------------


def _set_fields(message: Message, seen: set[tuple[str, str]]) -> None:
    for field, value in message.ListFields():
        seen.add((message.DESCRIPTOR.full_name, field.name))
        field_type = field.message_type
        if field_type is None:
            continue
        if field_type.GetOptions().map_entry:
            if field_type.fields_by_name["value"].message_type is not None:
                for item in value.values():
                    _set_fields(item, seen)
        elif field.is_repeated:
            for item in value:
                _set_fields(item, seen)
        else:
            _set_fields(value, seen)


def _reachable(descriptor: Descriptor, found: dict[str, Descriptor]) -> None:
    if descriptor.full_name in found or not descriptor.full_name.startswith("contextengine."):
        return
    if descriptor.GetOptions().map_entry:
        value_type = descriptor.fields_by_name["value"].message_type
        if value_type is not None:
            _reachable(value_type, found)
        return
    found[descriptor.full_name] = descriptor
    for field in descriptor.fields:
        if field.message_type is not None and (descriptor.full_name, field.name) not in (
            ENGINE_ONLY_FIELDS
        ):
            _reachable(field.message_type, found)


def test_corpus_sets_every_proto_field() -> None:
    seen: set[tuple[str, str]] = set()
    for case in adk_corpus.all_round_tripping_cases():
        _set_fields(event_from_adk_json(case.event.model_dump_json(exclude_none=True)), seen)
    required = {
        (proto.DESCRIPTOR.full_name, field.name)
        for proto, _ in MIRRORED
        for field in proto.DESCRIPTOR.fields
    } - ENGINE_ONLY_FIELDS
    assert sorted(required - seen) == []


def test_coverage_list_names_every_contract_message() -> None:
    reachable: dict[str, Descriptor] = {}
    _reachable(event_pb2.Event.DESCRIPTOR, reachable)
    assert set(reachable) == {proto.DESCRIPTOR.full_name for proto, _ in MIRRORED}


@pytest.mark.parametrize(
    ("proto", "model"),
    [
        pytest.param(
            proto,
            model,
            id=proto.DESCRIPTOR.name,
        )
        for proto, model in MIRRORED
    ],
)
def test_proto_fields_equal_adk_fields(proto: type[Message], model: type[Any]) -> None:
    proto_fields = {
        field.name
        for field in proto.DESCRIPTOR.fields
        if (proto.DESCRIPTOR.full_name, field.name) not in ENGINE_ONLY_FIELDS
    }
    assert proto_fields == set(model.model_fields)


# --------------------------------------------------------------------------------------------
# the adk_json module itself
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param('{"id": "a", "no_such_field": 1}', id="unknown-top-level-field"),
        pytest.param(
            '{"content": {"parts": [{"no_such_part_field": "AGENTIC"}]}}', id="unknown-nested"
        ),
        pytest.param({"actions": {"state_delta": {}, "nope": True}}, id="unknown-in-mapping"),
        pytest.param("{not json", id="not-json"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param("[1, 2]", id="not-an-object"),
        pytest.param('{"id": "a", "id": "b"}', id="duplicate-key"),
        pytest.param('{"output": NaN}', id="nan-literal"),
        pytest.param('{"timestamp": "yesterday"}', id="wrong-type"),
        pytest.param('{"usage_metadata": {"prompt_token_count": 2147483648}}', id="int32-range"),
        pytest.param('{"output": ' + "[" * 60 + "]" * 60 + "}", id="nested-too-deep"),
        pytest.param('{"output": ' + "[" * 100_000 + "]" * 100_000 + "}", id="nested-beyond-json"),
    ],
)
def test_event_from_adk_json_rejects(data: Any) -> None:
    with pytest.raises(ContextEngineError) as raised:
        event_from_adk_json(data)
    assert raised.value.reason == "INVALID_EVENT"
    assert raised.value.metadata == {"field": "event"}


def test_event_from_adk_json_accepts_str_bytes_mapping_and_camel_case() -> None:
    event = adk_corpus.find_case("thought-function-call").event
    text = event.model_dump_json(exclude_none=True)
    message = event_from_adk_json(text)
    assert event_from_adk_json(text.encode()) == message
    assert event_from_adk_json(json.loads(text)) == message
    assert event_from_adk_json(event.model_dump_json(exclude_none=True, by_alias=True)) == message


def test_event_to_adk_dict_drops_engine_fields_and_keeps_input() -> None:
    message = event_pb2.Event(id="e1", author="user", timestamp=1.5, sequence=9)
    message.actions.compaction.start_timestamp = 1.0
    message.actions.compaction.end_timestamp = 2.0
    message.actions.compaction.compacted_content.role = "model"
    message.actions.compaction.start_sequence = 1
    message.actions.compaction.end_sequence = 8
    before = message.SerializeToString(deterministic=True)
    data = event_to_adk_dict(message)
    assert "sequence" not in data
    assert set(data["actions"]["compaction"]) == {
        "start_timestamp",
        "end_timestamp",
        "compacted_content",
    }
    assert message.SerializeToString(deterministic=True) == before
    assert message.sequence == 9
    assert Event.model_validate(data).actions.compaction is not None


def test_event_to_adk_dict_restores_integers_only_in_json_values() -> None:
    message = event_from_adk_json(
        json.dumps(
            {
                "id": "e1",
                "timestamp": 5.0,
                "output": [1, 2.5, -0.0, 2**53, {"n": 3}],
                "actions": {"state_delta": {"n": 1, "f": 0.5}, "route": 4},
                "content": {
                    "parts": [
                        {"function_call": {"name": "f", "args": {"a": 2}}},
                        {"video_metadata": {"fps": 30.0}},
                    ]
                },
            }
        )
    )
    # What json_format itself prints: every JSON number is a double.
    raw = json_format.MessageToDict(message, preserving_proto_field_name=True)
    assert raw["actions"]["state_delta"]["n"] == 1.0
    assert isinstance(raw["actions"]["state_delta"]["n"], float)

    data = event_to_adk_dict(message)
    assert data["output"] == [1, 2.5, -0.0, float(2**53), {"n": 3}]
    assert [type(v) for v in data["output"][:4]] == [int, float, float, float]
    assert type(data["output"][4]["n"]) is int
    assert type(data["actions"]["state_delta"]["n"]) is int
    assert type(data["actions"]["route"]) is int
    assert type(data["content"]["parts"][0]["function_call"]["args"]["a"]) is int
    # Typed double fields stay floats.
    assert type(data["timestamp"]) is float
    assert type(data["content"]["parts"][1]["video_metadata"]["fps"]) is float


def test_event_to_adk_json_keeps_non_ascii_text() -> None:
    message = event_pb2.Event(id="ü", timestamp=1.0)
    assert event_to_adk_json(message) == '{"id":"ü","timestamp":1.0}'
