"""Statuses always fit the peer's metadata limit, however long the echoed input."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest
from google.rpc import error_details_pb2, status_pb2
from hypothesis import given, settings, strategies as st

from contextengine.core.echo import echo, shorten
from contextengine.core.errors import ContextEngineError
from contextengine.service._status import (
    MAX_MESSAGE_BYTES,
    MAX_METADATA_BYTES,
    MAX_METADATA_VALUE_BYTES,
    to_status,
)

pytestmark = pytest.mark.unit

#: what the trailers of a status may take (gRPC's default soft limit is 8 KiB for all metadata)
BUDGET = 6 * 1024


def _trailer_bytes(error: ContextEngineError) -> int:
    status = to_status(error)
    details = dict(status.trailing_metadata)["grpc-status-details-bin"]
    assert isinstance(details, bytes)
    # grpc-message is percent-encoded: every byte outside printable ASCII (and '%') takes three
    message = quote(status.details.encode(), safe=bytes(range(0x20, 0x7F)).replace(b"%", b""))
    return len(message) + len(base64.b64encode(details)) + 200


def _info(error: ContextEngineError) -> tuple[status_pb2.Status, error_details_pb2.ErrorInfo]:
    status = status_pb2.Status.FromString(
        dict(to_status(error).trailing_metadata)["grpc-status-details-bin"]
    )
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return status, info


awkward = st.text(
    st.sampled_from(["a", "\x00", "%", "é", "\U0001f600", "\ud800", "\n"]), max_size=5000
)


@settings(max_examples=100)
@given(
    message=awkward,
    values=st.dictionaries(st.sampled_from(["field", "app_name", "user_id", "a", "b"]), awkward),
)
def test_any_status_fits(message: str, values: dict[str, str]) -> None:
    error = ContextEngineError("INVALID_ARGUMENT", message, **values)
    assert _trailer_bytes(error) <= BUDGET
    status, info = _info(error)
    assert len(status.message.encode()) <= MAX_MESSAGE_BYTES
    assert set(info.metadata) == set(values)
    assert sum(len(v.encode()) for v in info.metadata.values()) <= MAX_METADATA_BYTES
    for key, value in values.items():
        if "\ud800" not in value and len(value.encode()) <= 256:
            assert info.metadata[key] == value  # short values are kept whole


def test_worst_case_fits() -> None:
    huge = "\x00" * 100_000
    error = ContextEngineError("SESSION_NOT_FOUND", huge, **{f"k{i}": huge for i in range(10)})
    assert _trailer_bytes(error) <= BUDGET


def test_ids_are_kept_whole_when_they_fit() -> None:
    emoji = "\U0001f600" * 256  # the longest valid id, in bytes
    error = ContextEngineError("INVALID_ID", "x", field="session_id", session_id=emoji)
    assert _info(error)[1].metadata["session_id"] == emoji
    assert len(emoji.encode()) == MAX_METADATA_VALUE_BYTES


def test_shorten_says_how_long_the_original_was() -> None:
    assert shorten("abc", 3) == "abc"
    cut = shorten("x" * 1000, 40)
    assert cut.startswith("xxx")
    assert cut.endswith("… (1000 characters)")
    assert len(cut.encode()) <= 40
    assert len(shorten("\U0001f600" * 100, 41).encode()) <= 41  # cut between characters
    assert len(shorten("x" * 100, 5).encode()) <= 5  # even when the suffix does not fit


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("abc", "'abc'"),
        ("x" * 100, repr("x" * 80) + "… (100 characters)"),
        ([1, 2], "[1, 2]"),
        (list(range(1000)), None),
    ],
)
def test_echo(value: object, expected: str | None) -> None:
    text = echo(value)
    if expected is not None:
        assert text == expected
    assert len(text) < 200
