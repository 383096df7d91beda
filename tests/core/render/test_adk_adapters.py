"""The renderings against google-adk 2.13's own adapters, at every step of generated sessions.

OpenAI Chat against ``LiteLlm``'s request building (``openai/gpt-4o``), Anthropic Messages
against the ``Claude`` model's, both configured with google-adk's own words for the turns they
add (read from the installed package): equal, after the documented differences
(``adk_adapters.py``; each has a named test below showing google-adk's output and why the
provider refuses it). Every rendering is also validated against the provider SDK's own types.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import Iterator, Sequence
from typing import Any

import litellm
import pytest
from anthropic import NOT_GIVEN
from anthropic.types import MessageParam, TextBlockParam
from google.adk.agents.context_cache_config import ContextCacheConfig
from google.adk.models import anthropic_llm
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

from contextengine.core.context import build_contents
from contextengine.core.render import AnthropicCache, RenderFormat, render
from contextengine.core.render._parts import mime
from contextengine.v1 import content_pb2
from tests.core.context.adk_compare import to_proto
from tests.core.context.random_sessions import random_options, random_session
from tests.core.render.adk_adapters import (
    ADK_TEXTS,
    adk_anthropic,
    adk_chat,
    raw_adk_chat,
    to_genai,
)
from tests.core.render.random_contents import random_contents

pytestmark = [pytest.mark.unit, pytest.mark.timeout(300)]

SESSIONS = range(120)
AWKWARD = range(300)
SYSTEMS = (None, "Be brief.", "Système: ünïcödé")

CHAT = TypeAdapter(list[ChatCompletionMessageParam])
RESPONSES = TypeAdapter(ResponseInputParam)
ANTHROPIC_MESSAGES = TypeAdapter(list[MessageParam])
ANTHROPIC_SYSTEM = TypeAdapter(str | list[TextBlockParam])


def pipeline_steps() -> Iterator[tuple[str, list[content_pb2.Content], str | None]]:
    """The contents the context pipeline builds after every event of generated sessions."""
    for seed in SESSIONS:
        rng = random.Random(seed)
        events = random_session(rng, rng.randint(1, 25))
        options = random_options(rng)
        system = rng.choice(SYSTEMS)
        protos = to_proto(events)
        for step in range(1, len(protos) + 1):
            yield f"session {seed} step {step}", build_contents(protos[:step], options), system


def awkward() -> Iterator[tuple[str, list[content_pb2.Content], str | None]]:
    for seed in AWKWARD:
        rng = random.Random(seed)
        yield f"contents {seed}", random_contents(rng, rng.randint(0, 8)), rng.choice(SYSTEMS)


class FakeUpload:
    """``litellm.acreate_file`` without the network: records what google-adk would upload."""

    def __init__(self) -> None:
        self.uploads: dict[str, tuple[bytes, str]] = {}

    async def __call__(self, *, file: tuple[str, bytes, str], **_: Any) -> Any:
        file_id = f"file-uploaded-{len(self.uploads)}"
        self.uploads[file_id] = (file[1], file[2])

        class Created:
            id = file_id

        return Created()


@pytest.fixture
def upload(monkeypatch: pytest.MonkeyPatch) -> FakeUpload:
    fake = FakeUpload()
    monkeypatch.setattr(litellm, "acreate_file", fake)
    return fake


_OPENAI_IMAGES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


def _openai_readable(block: dict[str, Any]) -> bool:
    if block["type"] == "image_url":
        url = block["image_url"]["url"]
        return not url.startswith("data:") or mime(url[5:].split(";")[0]) in _OPENAI_IMAGES
    if block["type"] == "input_audio":
        return block["input_audio"]["format"] in ("wav", "mp3")
    return bool(block["type"] != "video_url")


def _as_openai_takes(messages: list[dict[str, Any]], upload: FakeUpload) -> list[dict[str, Any]]:
    """google-adk's messages with media OpenAI cannot read left out, and uploaded documents sent
    inline instead (docs/design/renderings.md)."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            kept = []
            for block in filter(_openai_readable, content):
                file = block.get("file", {})
                if file.get("file_id", "").startswith("file-uploaded-"):
                    data, kind = upload.uploads[file["file_id"]]
                    encoded = base64.b64encode(data).decode()
                    name = "document.pdf" if kind == "application/pdf" else "document.json"
                    block = {
                        "type": "file",
                        "file": {"file_data": f"data:{kind};base64,{encoded}", "filename": name},
                    }
                kept.append(block)
            if not kept and message["role"] == "user":
                continue
            message = dict(message, content=kept)
        out.append(message)
    return out


def _check_chat(where: str, contents: Sequence[content_pb2.Content], system: str | None) -> None:
    ours = render(contents, RenderFormat.OPENAI_CHAT, system=system, texts=ADK_TEXTS).items
    CHAT.validate_python(ours)
    assert ours, where


def test_openai_chat_is_litellms_at_every_step(upload: FakeUpload) -> None:
    steps = 0
    for where, contents, system in pipeline_steps():
        ours = render(contents, RenderFormat.OPENAI_CHAT, system=system, texts=ADK_TEXTS).items
        theirs = asyncio.run(adk_chat(contents, system))
        assert ours == _as_openai_takes(theirs, upload), where
        CHAT.validate_python(ours)
        steps += 1
    assert steps > 1500


def test_openai_chat_is_litellms_for_awkward_contents(upload: FakeUpload) -> None:
    for where, contents, system in awkward():
        ours = render(contents, RenderFormat.OPENAI_CHAT, system=system, texts=ADK_TEXTS).items
        theirs = asyncio.run(adk_chat(contents, system))
        assert ours == _as_openai_takes(theirs, upload), where
        CHAT.validate_python(ours)


def test_openai_responses_carry_what_chat_carries() -> None:
    """The Responses items say what the Chat messages say, item type by item type, and are the
    ``openai`` SDK's own ``ResponseInputParam``."""
    for where, contents, system in [*pipeline_steps(), *awkward()]:
        chat = render(contents, RenderFormat.OPENAI_CHAT, texts=ADK_TEXTS).items
        responses = render(contents, RenderFormat.OPENAI_RESPONSES, system=system, texts=ADK_TEXTS)
        RESPONSES.validate_python(responses.items)
        assert responses.system == system
        assert _chat_of(responses.items) == _comparable_chat(chat), where


def _comparable_chat(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for message in messages:
        if message["role"] == "tool":
            out.append(("output", message["tool_call_id"], message["content"]))
        elif message["role"] == "assistant":
            if "content" in message:
                out.append(("assistant", message["content"]))
            out.extend(
                ("call", c["id"], c["function"]["name"], c["function"]["arguments"])
                for c in message.get("tool_calls", [])
            )
        else:
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            out.append(("user", [_chat_block(b) for b in blocks if b["type"] != "input_audio"]))
    return [item for item in out if item != ("user", [])]


def _chat_block(block: dict[str, Any]) -> Any:
    if block["type"] == "image_url":
        return ("image", block["image_url"]["url"])
    if block["type"] == "file":
        return ("file", block["file"].get("file_id") or block["file"]["file_data"])
    return ("text", block["text"])


def _chat_of(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for item in items:
        kind = item["type"]
        if kind == "function_call_output":
            out.append(("output", item["call_id"], item["output"]))
        elif kind == "function_call":
            out.append(("call", item["call_id"], item["name"], item["arguments"]))
        elif item["role"] == "assistant":
            out.append(("assistant", item["content"]))
        else:
            blocks = []
            for block in item["content"]:
                if block["type"] == "input_text":
                    blocks.append(("text", block["text"]))
                elif block["type"] == "input_image":
                    blocks.append(("image", block["image_url"]))
                else:
                    blocks.append(("file", block.get("file_id") or block["file_data"]))
            out.append(("user", blocks))
    return out


def _anthropic_readable(part: content_pb2.Part, role: str) -> bool:
    """Parts google-adk's Claude model can send (it raises on the others, which the rendering
    leaves out: media it cannot read, files by reference, a thought signed by another model in
    bytes that are not text)."""
    if part.thought and part.thought_signature:
        try:
            part.thought_signature.decode("utf-8")
        except UnicodeDecodeError:
            return False
    if part.HasField("inline_data"):
        kind = mime(part.inline_data.mime_type)
        if role != "user":  # google-adk skips an assistant turn's images and PDFs itself
            return kind.startswith("image/") or kind == "application/pdf"
        return kind in {"image/jpeg", "image/png", "image/gif", "image/webp", "application/pdf"}
    return not part.HasField("file_data")


def _for_claude(contents: Sequence[content_pb2.Content]) -> list[content_pb2.Content]:
    out = []
    for content in contents:
        parts = [p for p in content.parts if _anthropic_readable(p, content.role)]
        out.append(content_pb2.Content(role=content.role, parts=parts))
    return out


def _check_anthropic(
    where: str, contents: Sequence[content_pb2.Content], system: str | None
) -> None:
    rendering = render(contents, RenderFormat.ANTHROPIC_MESSAGES, system=system, texts=ADK_TEXTS)
    assert rendering.items == adk_anthropic(_for_claude(contents)), where
    assert rendering.system == (system or None), where
    ANTHROPIC_MESSAGES.validate_python(rendering.items)


def test_anthropic_is_claudes_at_every_step() -> None:
    for where, contents, system in pipeline_steps():
        _check_anthropic(where, contents, system)


def test_anthropic_is_claudes_for_awkward_contents() -> None:
    for where, contents, system in awkward():
        _check_anthropic(where, contents, system)


def test_anthropic_breakpoints_are_claudes_and_one_more() -> None:
    """With the app caching, google-adk's Claude puts a breakpoint on the system instruction and
    one at the end of the conversation; the rendering puts the same two, and one at the end of
    the engine's cacheable prefix (what the next call sends again). Never more than Anthropic's
    four, and never on a thinking block."""
    for where, contents, system in [*pipeline_steps(), *awkward()]:
        if not contents:
            continue
        theirs = adk_anthropic(_for_claude(contents))
        adk_system = anthropic_llm._apply_cache_breakpoints(
            cache_config=ContextCacheConfig(),
            system=system or NOT_GIVEN,
            messages=theirs,  # type: ignore[arg-type]
            tools=NOT_GIVEN,
        )
        end = render(
            contents,
            RenderFormat.ANTHROPIC_MESSAGES,
            system=system,
            texts=ADK_TEXTS,
            cache=AnthropicCache(cacheable_count=0),
        )
        assert end.items == theirs, where
        assert end.system == (adk_system if system else None), where
        prefix = random.Random(where).randint(0, len(contents))
        both = render(
            contents,
            RenderFormat.ANTHROPIC_MESSAGES,
            system=system,
            texts=ADK_TEXTS,
            cache=AnthropicCache(cacheable_count=prefix, one_hour=True),
        )
        marked = [
            (i, j)
            for i, message in enumerate(both.items)
            for j, block in enumerate(message["content"])
            if "cache_control" in block
        ]
        assert 1 <= len(marked) + (1 if system else 0) <= 3, where
        assert all(
            both.items[i]["content"][j]["type"] not in ("thinking", "redacted_thinking")
            for i, j in marked
        )
        assert all(
            both.items[i]["content"][j]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
            for i, j in marked
        )
        ANTHROPIC_MESSAGES.validate_python(both.items)


def test_the_prefix_breakpoint_ends_the_cacheable_prefix() -> None:
    contents = [
        content_pb2.Content(role="user", parts=[content_pb2.Part(text="question")]),
        content_pb2.Content(role="model", parts=[content_pb2.Part(text="answer")]),
        content_pb2.Content(role="user", parts=[content_pb2.Part(text="next question")]),
    ]
    items = render(
        contents, RenderFormat.ANTHROPIC_MESSAGES, cache=AnthropicCache(cacheable_count=2)
    ).items
    assert [("cache_control" in m["content"][-1]) for m in items] == [False, True, True]


# ---- the documented differences, with google-adk's own output --------------------------------


def _user(*parts: content_pb2.Part) -> content_pb2.Content:
    return content_pb2.Content(role="user", parts=list(parts))


def _model(*parts: content_pb2.Part) -> content_pb2.Content:
    return content_pb2.Content(role="model", parts=list(parts))


def test_litellm_sends_nulls_and_its_extensions_openai_does_not_take() -> None:
    contents = [
        _user(content_pb2.Part(text="hi")),
        _model(
            content_pb2.Part(text="thinking", thought=True),
            content_pb2.Part(text="hello"),
        ),
    ]
    theirs = asyncio.run(raw_adk_chat(contents, None))
    assert theirs[1] == {
        "role": "assistant",
        "content": "hello",
        "tool_calls": None,
        "reasoning_content": "thinking",
    }
    ours = render(contents, RenderFormat.OPENAI_CHAT, texts=ADK_TEXTS).items
    assert ours[1] == {"role": "assistant", "content": "hello"}


def test_a_user_turn_with_nothing_to_send_is_not_sent() -> None:
    """google-adk sends ``content: None``; the ``openai`` SDK's type refuses it."""
    contents = [
        _user(content_pb2.Part(text="hi")),
        _model(content_pb2.Part(text="ok")),
        _user(content_pb2.Part(text="private", thought=True), content_pb2.Part(text="next")),
        _user(content_pb2.Part(text="only a thought", thought=True)),
    ]
    theirs = asyncio.run(raw_adk_chat(contents, None))
    assert theirs[-1] == {"role": "user", "content": None}
    with pytest.raises(ValueError, match="content"):
        CHAT.validate_python([{"role": "user", "content": None}])
    ours = render(contents, RenderFormat.OPENAI_CHAT, texts=ADK_TEXTS).items
    assert ours[-1] == {"role": "user", "content": "next"}


def test_documents_are_sent_inline_where_litellm_uploads_them(upload: FakeUpload) -> None:
    pdf = content_pb2.Part(inline_data=content_pb2.Blob(mime_type="application/pdf", data=b"%PDF"))
    contents = [_user(content_pb2.Part(text="read this"), pdf)]
    theirs = asyncio.run(raw_adk_chat(contents, None))
    assert theirs[0]["content"][1] == {
        "type": "file",
        "file": {"file_id": "file-uploaded-0", "format": "application/pdf"},
    }
    ours = render(contents, RenderFormat.OPENAI_CHAT, texts=ADK_TEXTS).items
    assert ours[0]["content"][1] == {
        "type": "file",
        "file": {"file_data": "data:application/pdf;base64,JVBERg==", "filename": "document.pdf"},
    }


def test_media_openai_cannot_read_are_left_out() -> None:
    parts = [
        content_pb2.Part(inline_data=content_pb2.Blob(mime_type=kind, data=b"x"))
        for kind in ("image/bmp", "audio/ogg", "video/mp4", "image/png")
    ]
    contents = [_user(content_pb2.Part(text="look"), *parts)]
    theirs = asyncio.run(raw_adk_chat(contents, None))
    assert [block["type"] for block in theirs[0]["content"]] == [
        "text",
        "image_url",
        "input_audio",
        "video_url",
        "image_url",
    ]
    ours = render(contents, RenderFormat.OPENAI_CHAT, texts=ADK_TEXTS).items
    assert ours[0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,eA=="}},
    ]


def test_claude_refuses_unsigned_thinking_and_parts_it_cannot_read() -> None:
    contents = [
        _user(content_pb2.Part(text="hi")),
        _model(
            content_pb2.Part(text="another model's thought", thought=True),
            content_pb2.Part(text="hello"),
        ),
        _user(content_pb2.Part(inline_data=content_pb2.Blob(mime_type="audio/wav", data=b"x"))),
    ]
    sanitizer = anthropic_llm._ToolUseIdSanitizer()
    thinking: Any = anthropic_llm._content_to_message_param(to_genai(contents[1]), sanitizer)
    assert thinking["content"][0] == {
        "type": "thinking",
        "thinking": "another model's thought",
        "signature": "",
    }
    with pytest.raises(NotImplementedError):
        anthropic_llm._content_to_message_param(to_genai(contents[2]), sanitizer)
    ours = render(contents, RenderFormat.ANTHROPIC_MESSAGES).items
    assert ours == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]


def test_claude_gets_a_user_turn_when_there_is_nothing_else() -> None:
    assert adk_anthropic_raw([]) == []
    rendering = render([], RenderFormat.ANTHROPIC_MESSAGES, texts=ADK_TEXTS)
    assert rendering.items == [
        {"role": "user", "content": [{"type": "text", "text": ADK_TEXTS.empty_text}]}
    ]
    ANTHROPIC_MESSAGES.validate_python(rendering.items)


def adk_anthropic_raw(contents: Sequence[content_pb2.Content]) -> list[Any]:
    sanitizer = anthropic_llm._ToolUseIdSanitizer()
    return [
        m
        for m in (anthropic_llm._content_to_message_param(to_genai(c), sanitizer) for c in contents)
        if m["content"]
    ]
