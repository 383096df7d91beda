"""Writes tests/golden/fingerprints/vectors.json: golden vectors of the prompt-cache fingerprint
(docs/design/prompt-cache.md) that every client checks.

    .venv/bin/python scripts/gen_fingerprint_vectors.py [--check-node]

``--check-node`` also canonicalizes every JCS and number case with an independent JavaScript
implementation (``JSON.stringify`` for strings and numbers, ``Array.prototype.sort`` for keys)
and fails on any difference. The file is regenerated only when a vector is added: an existing
vector never changes (that would be a breaking change of the fingerprint).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from contextengine.core.prompt_cache import (
    PromptPrefix,
    canonicalize,
    content_json,
    fingerprint,
    fingerprint_document,
)
from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2

OUT = Path(__file__).resolve().parent.parent / "tests" / "golden" / "fingerprints" / "vectors.json"

JCS_CASES: list[tuple[str, str]] = [
    (
        "rfc8785_example",
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}',
    ),
    (
        "rfc8785_key_order",
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With'
        ' Dagesh", "1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control",'
        ' "\\u00f6": "Latin Small Letter O With Diaeresis"}',
    ),
    (
        "utf16_order_differs_from_code_points",
        '{"\\uff5e": 1, "\\ud83d\\ude00": 2, "z": 3, "\\u00e9": 4, "": 5}',
    ),
    (
        "string_escapes",
        '["\\u0000\\u0001\\u001f", "\\b\\f\\n\\r\\t", "\\u007f\\u0080\\u2028\\u2029", "\\"\\\\/",'
        ' "caf\\u00e9 \\u6f22\\u5b57 \\ud83d\\ude00"]',
    ),
    ("nested_and_empty", '{"b": [], "a": {}, "c": [{"y": null, "x": [true, {"k": false}]}]}'),
    (
        "numbers",
        "[0, -0, 1, -1, 1.0, 1.5, 0.1, 100, 1e21, 1e20, 123456789012345680000, 1e-6, 1e-7,"
        " 0.000001, 0.0000001, 5e-324, 1.7976931348623157e308, -1.7976931348623157e308,"
        " 9007199254740992, 9007199254740993, 0.30000000000000004, 1E3, 2.5e+25, 4.35e-10]",
    ),
]

#: IEEE 754 doubles (big-endian hex) whose shortest form needs care; canonical form computed.
NUMBER_BITS = [
    "0000000000000000",
    "8000000000000000",
    "0000000000000001",
    "8000000000000001",
    "7fefffffffffffff",
    "ffefffffffffffff",
    "4340000000000000",
    "c340000000000000",
    "4430000000000000",
    "44b52d02c7e14af5",
    "44b52d02c7e14af6",
    "44b52d02c7e14af7",
    "444b1ae4d6e2ef4e",
    "444b1ae4d6e2ef4f",
    "444b1ae4d6e2ef50",
    "3eb0c6f7a0b5ed8c",
    "3eb0c6f7a0b5ed8d",
    "41b3de4355555553",
    "41b3de4355555554",
    "41b3de4355555555",
    "41b3de4355555556",
    "41b3de4355555557",
    "becbf647612f3696",
    "43143ff3c1cb0959",
    "3fb999999999999a",
    "3ff0000000000001",
]

_TOOLS_UNSORTED: list[dict[str, Any]] = [
    {
        "function_declarations": [
            {
                "name": "get_weather",
                "description": "Weather of a city.",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"city": {"type": "STRING"}, "days": {"type": "INTEGER"}},
                    "required": ["city"],
                },
            },
            {"name": "get_time", "description": "Local time."},
            {"description": "A declaration without a name sorts first."},
        ]
    },
    {"google_search": {}},
    {"code_execution": {}},
]


def _content(data: dict[str, Any]) -> content_pb2.Content:
    return json_format.ParseDict(data, content_pb2.Content())


_CONTENTS = [
    {"role": "user", "parts": [{"text": "Weather in Paris? caf\u00e9 \u6f22\u5b57 \U0001f600"}]},
    {
        "role": "model",
        "parts": [
            {"text": "Let me look.", "thought": True, "thought_signature": "c2lnLTE="},
            {
                "function_call": {
                    "id": "call-1",
                    "name": "get_weather",
                    "args": {
                        "city": "Paris",
                        "days": 3.0,
                        "ratio": 0.1,
                        "big": 1e21,
                        "tiny": 1e-7,
                        "neg_zero": -0.0,
                        "\uff5e": "fullwidth tilde",
                        "\U0001f600": "emoji key",
                        "nested": {"b": [1, 2.5, None, True], "a": "\u2028\u0001"},
                    },
                }
            },
        ],
    },
    {
        "role": "user",
        "parts": [
            {
                "function_response": {
                    "id": "call-1",
                    "name": "get_weather",
                    "response": {"result": "sunny", "temperature_c": 21.5},
                }
            }
        ],
    },
    {
        "role": "model",
        "parts": [
            {"text": "It is sunny."},
            {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}},
        ],
    },
    {"role": "user", "parts": [{"text": "Thanks!"}]},
]


def _fingerprint_case(
    name: str,
    *,
    model: str = "",
    system_instruction: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_config: dict[str, Any] | None = None,
    contents: list[dict[str, Any]] | None = None,
    n: int = 0,
) -> dict[str, Any]:
    protos = [_content(c) for c in contents or []]
    contents_json = [content_json(c) for c in protos]
    instruction = content_json(_content(system_instruction)) if system_instruction else None
    tool_structs = [dict(json_format.MessageToDict(dict_to_struct(t))) for t in tools or []]
    config = (
        dict(json_format.MessageToDict(dict_to_struct(tool_config)))
        if tool_config is not None
        else None
    )
    prefix = PromptPrefix(
        model=model,
        system_instruction=instruction,
        tools=tuple(tool_structs),
        tool_config=config,
    )
    canonical = canonicalize(fingerprint_document(prefix, contents_json, n))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    assert digest == fingerprint(prefix, protos, n), name
    return {
        "name": name,
        "model": model,
        "system_instruction": instruction,
        "tools": tool_structs,
        "tool_config": config,
        "contents": contents_json,
        "n": n,
        "canonical": canonical,
        "sha256": digest,
    }


def fingerprint_cases() -> list[dict[str, Any]]:
    instruction = {"parts": [{"text": "You report the weather.\nBe brief."}]}
    return [
        _fingerprint_case("empty"),
        _fingerprint_case("model_only", model="gemini-2.5-flash"),
        _fingerprint_case(
            "no_contents_counted",
            model="gemini-2.5-flash",
            system_instruction=instruction,
            contents=_CONTENTS,
            n=0,
        ),
        _fingerprint_case(
            "full_prefix",
            model="gemini-2.5-flash",
            system_instruction=instruction,
            tools=_TOOLS_UNSORTED,
            tool_config={"function_calling_config": {"mode": "AUTO"}},
            contents=_CONTENTS,
            n=4,
        ),
        _fingerprint_case(
            "tools_reordered_same_digest",
            model="gemini-2.5-flash",
            system_instruction=instruction,
            tools=[
                _TOOLS_UNSORTED[2],
                {
                    "function_declarations": list(
                        reversed(_TOOLS_UNSORTED[0]["function_declarations"])
                    )
                },
                _TOOLS_UNSORTED[1],
            ],
            tool_config={"function_calling_config": {"mode": "AUTO"}},
            contents=_CONTENTS,
            n=4,
        ),
        _fingerprint_case(
            "n_beyond_contents",
            model="models/gemini-3-pro-preview",
            contents=_CONTENTS[:2],
            n=10,
        ),
        _fingerprint_case(
            "empty_system_instruction_and_tool_config_omitted",
            model="gemini-2.0-flash",
            system_instruction={},
            tool_config={},
            contents=_CONTENTS[:1],
            n=1,
        ),
        _fingerprint_case(
            "camel_case_tool_declarations_sorted_too",
            model="gemini-2.0-flash",
            tools=[{"functionDeclarations": [{"name": "b"}, {"name": "a"}]}],
            n=0,
        ),
    ]


def jcs_cases() -> list[dict[str, Any]]:
    return [
        {"name": name, "input": text, "canonical": canonicalize(json.loads(text))}
        for name, text in JCS_CASES
    ]


def number_cases() -> list[dict[str, Any]]:
    out = []
    for bits in NUMBER_BITS:
        value = struct.unpack(">d", bytes.fromhex(bits))[0]
        out.append({"bits": bits, "canonical": canonicalize(value)})
    return out


_NODE_JCS = r"""
const data = JSON.parse(require('fs').readFileSync(0, 'utf8'));
function jcs(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
  return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}';
}
const out = {
  jcs: data.jcs.map(c => jcs(JSON.parse(c.input))),
  numbers: data.numbers.map(c => jcs(Buffer.from(c.bits, 'hex').readDoubleBE(0))),
  fingerprints: data.fingerprints.map(c => {
    const doc = {v: 1};
    if (c.model) doc.model = c.model;
    if (c.system_instruction && Object.keys(c.system_instruction).length)
      doc.system_instruction = c.system_instruction;
    if (c.tools.length) {
      const key = s => s;  // JS strings compare by UTF-16 code units
      const tools = c.tools.map(t => {
        const copy = Object.assign({}, t);
        for (const f of ['function_declarations', 'functionDeclarations'])
          if (Array.isArray(copy[f]))
            copy[f] = copy[f].slice().sort((a, b) => {
              const x = typeof a.name === 'string' ? a.name : '';
              const y = typeof b.name === 'string' ? b.name : '';
              return x < y ? -1 : x > y ? 1 : 0;
            });
        return copy;
      });
      tools.sort((a, b) => { const x = jcs(a), y = jcs(b); return x < y ? -1 : x > y ? 1 : 0; });
      doc.tools = tools;
    }
    if (c.tool_config && Object.keys(c.tool_config).length) doc.tool_config = c.tool_config;
    const n = Math.min(c.n, c.contents.length);
    if (n > 0) doc.contents = c.contents.slice(0, n);
    const text = jcs(doc);
    return [text, require('crypto').createHash('sha256').update(text, 'utf8').digest('hex')];
  }),
};
console.log(JSON.stringify(out));
"""


def check_with_node(vectors: dict[str, Any]) -> None:
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is not installed")
    result = subprocess.run(
        [node, "-e", _NODE_JCS],
        input=json.dumps(vectors),
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = json.loads(result.stdout)
    for case, text in zip(vectors["jcs"], theirs["jcs"], strict=True):
        assert case["canonical"] == text, (case["name"], case["canonical"], text)
    for case, text in zip(vectors["numbers"], theirs["numbers"], strict=True):
        assert case["canonical"] == text, (case["bits"], case["canonical"], text)
    for case, (text, digest) in zip(vectors["fingerprints"], theirs["fingerprints"], strict=True):
        assert case["canonical"] == text, (case["name"], case["canonical"], text)
        assert case["sha256"] == digest, case["name"]
    print("node agrees on every vector", file=sys.stderr)


def build() -> dict[str, Any]:
    return {
        "description": (
            "Golden vectors of the contextengine prompt-cache fingerprint (docs/design/"
            "prompt-cache.md): RFC 8785 canonical JSON (jcs: input JSON text -> canonical text; "
            "numbers: IEEE 754 bits -> canonical text) and fingerprints (inputs as proto3 JSON "
            "with original field names -> canonical document -> lowercase hex SHA-256 of its "
            "UTF-8). Every client checks all of them."
        ),
        "version": 1,
        "jcs": jcs_cases(),
        "numbers": number_cases(),
        "fingerprints": fingerprint_cases(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check-node", action="store_true")
    args = parser.parse_args()
    vectors = build()
    if args.check_node:
        check_with_node(vectors)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(vectors, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
