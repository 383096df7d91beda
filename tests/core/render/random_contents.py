"""Seeded random contents for the renderings, with every part kind on purpose: texts (empty,
unicode), thoughts (signed by Claude, by another model, unsigned), calls (ids Anthropic refuses,
empty ids, floats and ``-0.0`` in arguments), responses (google-adk's ``result`` wrapper,
``content`` lists and strings, attached media), images (the types the providers read and
others), audio, video, text files, documents, files by reference, code and its results,
signatures alone.

The contents the context pipeline builds (``tests/core/context/random_sessions``) are the
realistic half; these are the awkward half: a rendering is a function of the contents.
"""

from __future__ import annotations

import base64
import random
from typing import Any

from contextengine.core.structs import dict_to_struct
from contextengine.v1 import content_pb2

__all__ = ["DOCUMENTS", "random_contents"]

#: Document types google-adk uploads to OpenAI's file store first (network).
DOCUMENTS = ("application/pdf", "application/json")
_MEDIA = (
    "image/png",
    "image/jpeg",
    "image/bmp",
    "audio/mpeg",
    "audio/wav",
    "audio/ogg",
    "video/mp4",
    "text/plain",
    "text/csv; charset=latin-1",
)
_TEXTS = ("hi", "", " ", "ünïcödé ✓", "two\nlines", '{"json": "looking"}')
_VALUES: tuple[Any, ...] = (1, 2.5, -0.0, "x", "ü", None, True, [1, "a"], {"k": {"n": 3}})


class _Maker:
    def __init__(self, rng: random.Random, *, documents: bool, references: bool) -> None:
        self.rng = rng
        self.documents = documents
        self.references = references
        self.calls: list[tuple[str, str]] = []
        self.n = 0

    def call_id(self) -> str:
        self.n += 1
        return self.rng.choice(
            (f"c{self.n}", f"call {self.n}", "", f"ü{self.n}", f"toolu_{self.n}")
        )

    def args(self) -> dict[str, Any]:
        keys = self.rng.sample(("b", "a", "ü", "z"), self.rng.randint(0, 3))
        return {key: self.rng.choice(_VALUES) for key in keys}

    def blob(self, *, documents: bool) -> content_pb2.Blob:
        kinds = _MEDIA + (DOCUMENTS if documents else ())
        kind = self.rng.choice(kinds)
        data = "é,1\n".encode("latin-1") if "latin" in kind else b"\x89PNGabc"
        return content_pb2.Blob(mime_type=kind, data=data)

    def response(self) -> dict[str, Any]:
        roll = self.rng.random()
        if roll < 0.25:
            return {"result": self.rng.choice(_VALUES)}
        if roll < 0.4:
            return {"content": [{"type": "text", "text": "t"}, {"other": 1}, "s"]}
        if roll < 0.5:
            return {"content": "a text"}
        if roll < 0.6:
            return {}
        return self.args()

    def part(self, role: str) -> content_pb2.Part:
        rng = self.rng
        roll = rng.random()
        if roll < 0.3:
            return content_pb2.Part(text=rng.choice(_TEXTS))
        if roll < 0.4:
            signature = rng.choice((b"", b"claude-signature", b"\xff\xfe\x00"))
            part = content_pb2.Part(text=rng.choice(("thinking...", "")), thought=True)
            if signature:
                part.thought_signature = signature
            return part
        if roll < 0.55 and role == "model":
            call_id, name = self.call_id(), rng.choice(("lookup", "f"))
            self.calls.append((call_id, name))
            return content_pb2.Part(
                function_call=content_pb2.FunctionCall(
                    id=call_id, name=name, args=dict_to_struct(self.args())
                )
            )
        if roll < 0.7 and role == "user" and self.calls:
            call_id, name = self.calls.pop(rng.randrange(len(self.calls)))
            if rng.random() < 0.1:
                call_id = ""
            response = content_pb2.FunctionResponse(
                id=call_id, name=name, response=dict_to_struct(self.response())
            )
            if rng.random() < 0.2:
                blob = self.blob(documents=True)
                response.parts.add().update(
                    {
                        "inline_data": {
                            "mime_type": blob.mime_type,
                            "data": base64.b64encode(blob.data).decode(),
                        }
                    }
                )
            return content_pb2.Part(function_response=response)
        if roll < 0.8:
            return content_pb2.Part(inline_data=self.blob(documents=self.documents))
        if roll < 0.85 and self.references:
            uri = rng.choice(
                ("https://example.com/cat.png", "file-abc123", "https://x.org/a.jpg?size=2")
            )
            return content_pb2.Part(file_data=content_pb2.FileData(file_uri=uri))
        if roll < 0.9:
            return content_pb2.Part(executable_code=content_pb2.ExecutableCode(code="print(1)"))
        if roll < 0.95:
            return content_pb2.Part(
                code_execution_result=content_pb2.CodeExecutionResult(
                    outcome="OUTCOME_OK", output="1"
                )
            )
        return content_pb2.Part(thought_signature=b"sig-alone")


def random_contents(
    rng: random.Random, size: int, *, documents: bool = True, references: bool = True
) -> list[content_pb2.Content]:
    """``size`` contents, alternating roles mostly; ``documents``: inline PDF and JSON files
    (google-adk uploads them for OpenAI); ``references``: files by URI."""
    maker = _Maker(rng, documents=documents, references=references)
    out = []
    for index in range(size):
        role = "user" if index % 2 == 0 else "model"
        if rng.random() < 0.15:
            role = rng.choice(("user", "model", ""))
        parts = [maker.part(role) for _ in range(rng.choice((1, 1, 2, 3)))]
        out.append(content_pb2.Content(role=role, parts=parts))
    return out
