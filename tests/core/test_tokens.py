"""Token counters: the offline tiktoken vocabulary and ADK's chars/4 estimate."""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest

from contextengine.core.structs import dict_to_struct
from contextengine.core.tokens import (
    CL100K_SHA256,
    CharsPerFourCounter,
    TiktokenCounter,
    content_chars,
    default_counter,
)
from contextengine.v1 import content_pb2

pytestmark = pytest.mark.unit


def _content() -> content_pb2.Content:
    return content_pb2.Content(
        role="model",
        parts=[
            content_pb2.Part(text="Let me check the weather."),
            content_pb2.Part(
                function_call=content_pb2.FunctionCall(
                    name="get_weather", args=dict_to_struct({"city": "Paris", "days": 3})
                )
            ),
            content_pb2.Part(
                function_response=content_pb2.FunctionResponse(
                    name="get_weather", response=dict_to_struct({"temp": "21°C"})
                )
            ),
            content_pb2.Part(inline_data=content_pb2.Blob(data=b"x" * 1000, mime_type="image/png")),
        ],
    )


def test_vocabulary_is_shipped_and_verified() -> None:
    data = resources.files("tiktoken_ext").joinpath("data/cl100k_base.tiktoken").read_bytes()
    assert hashlib.sha256(data).hexdigest() == CL100K_SHA256


def test_default_counter_is_tiktoken() -> None:
    assert default_counter().name == "tiktoken/cl100k_base"


def test_tiktoken_counts_known_text() -> None:
    counter = TiktokenCounter()
    hello = content_pb2.Content(parts=[content_pb2.Part(text="hello world")])
    assert counter.count_content(hello) == 2
    assert counter.count_content(_content()) > 10


def test_chars_estimate_matches_adk_rules() -> None:
    # text + name + json.dumps(args) (ASCII-escaped, default separators); media not counted
    expected = (
        len("Let me check the weather.")
        + len("get_weather")
        + len('{"city": "Paris", "days": 3}')
        + len("get_weather")
        + len('{"temp": "21\\u00b0C"}')
    )
    assert content_chars(_content()) == expected
    assert CharsPerFourCounter().count_content(_content()) == expected // 4


def test_batch_counts_equal_single_counts() -> None:
    contents = [_content()] * 3 + [
        content_pb2.Content(parts=[content_pb2.Part(text=f"message number {i} " * (i % 7))])
        for i in range(100)
    ]
    for counter in (TiktokenCounter(), CharsPerFourCounter()):
        assert counter.count_contents(contents) == [counter.count_content(c) for c in contents]
