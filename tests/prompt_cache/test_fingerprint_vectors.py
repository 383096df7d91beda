"""The golden fingerprint vectors (tests/golden/fingerprints/vectors.json), which the Java,
Kotlin and TypeScript clients check too: the Python implementation must reproduce every one,
both from the JSON documents and from the proto messages BuildContext returns."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from contextengine.core.prompt_cache import (
    Fingerprints,
    PromptPrefix,
    canonicalize,
    fingerprint,
    fingerprint_document,
)
from contextengine.v1 import content_pb2

pytestmark = pytest.mark.unit

VECTORS = json.loads(
    (Path(__file__).parents[1] / "golden" / "fingerprints" / "vectors.json").read_text("utf-8")
)


@pytest.mark.parametrize("case", VECTORS["jcs"], ids=lambda case: case["name"])
def test_jcs(case: dict[str, Any]) -> None:
    assert canonicalize(json.loads(case["input"])) == case["canonical"]
    # canonical text is a fixed point
    assert canonicalize(json.loads(case["canonical"])) == case["canonical"]


@pytest.mark.parametrize("case", VECTORS["numbers"], ids=lambda case: case["bits"])
def test_numbers(case: dict[str, Any]) -> None:
    value = struct.unpack(">d", bytes.fromhex(case["bits"]))[0]
    assert canonicalize(value) == case["canonical"]
    assert float(case["canonical"]) == value  # round-trips


def _prefix(case: dict[str, Any]) -> PromptPrefix:
    return PromptPrefix(
        model=case["model"],
        system_instruction=case["system_instruction"],
        tools=tuple(case["tools"]),
        tool_config=case["tool_config"],
    )


@pytest.mark.parametrize("case", VECTORS["fingerprints"], ids=lambda case: case["name"])
def test_fingerprints(case: dict[str, Any]) -> None:
    prefix = _prefix(case)
    document = fingerprint_document(prefix, case["contents"], case["n"])
    assert canonicalize(document) == case["canonical"]
    assert hashlib.sha256(case["canonical"].encode()).hexdigest() == case["sha256"]
    protos = [json_format.ParseDict(c, content_pb2.Content()) for c in case["contents"]]
    assert fingerprint(prefix, protos, case["n"]) == case["sha256"]
    assert Fingerprints(prefix, protos).of(case["n"]) == case["sha256"]


def test_vectors_cover_the_spec() -> None:
    names = {case["name"] for case in VECTORS["fingerprints"]}
    assert {"empty", "full_prefix", "tools_reordered_same_digest", "n_beyond_contents"} <= names
    digests = {case["name"]: case["sha256"] for case in VECTORS["fingerprints"]}
    assert digests["full_prefix"] == digests["tools_reordered_same_digest"]
    assert len(set(digests.values())) == len(digests) - 1
