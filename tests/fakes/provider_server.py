"""A local fake of OpenAI's and Anthropic's HTTP APIs, for the renderings' examples (offline).

``start_fake_providers()`` serves HTTP on ``127.0.0.1:<free port>`` from a thread and yields a
:class:`FakeProviders`; ``python -m tests.fakes.provider_server --port-file FILE`` serves the same
as a process (for the TypeScript, Java and Kotlin examples), until stopped.

* ``POST /v1/chat/completions`` (OpenAI Chat Completions), ``POST /v1/responses`` (the Responses
  API) and ``POST /v1/messages`` (Anthropic Messages): the body is checked against the provider
  SDK's own parameter types (``openai.types.chat.ChatCompletionMessageParam``,
  ``openai.types.responses.ResponseInputParam``, ``anthropic.types.MessageParam`` and the
  ``system`` parameter's type); a body they refuse is answered 400 with the provider's error
  shape, naming what was wrong. A valid one is answered with the provider's response JSON: one
  assistant text, ``Seen <n> messages; the last said: <its text, cut>.`` (``n``: messages or input
  items), with usage counts.
* Every request is recorded in ``fake.requests`` (path and parsed JSON body), and with
  ``record_to`` (``--record FILE``) appended to that file as a JSON line (``path``, ``status``,
  ``body``), for a test that runs the fake as a process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from anthropic.types import MessageParam, TextBlockParam
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter, ValidationError

__all__ = ["FakeProviders", "Recorded", "start_fake_providers"]


class _Checked:
    """A TypeAdapter whose result is validated all the way down: the SDKs type many lists as
    ``Iterable`` (Chat content parts and tool calls, Anthropic content blocks), which pydantic
    validates lazily, only when iterated; the result is drained here so that ValidationError is
    raised for a bad block too, not only for a bad message."""

    def __init__(self, adapter: TypeAdapter[Any]) -> None:
        self._adapter = adapter

    def validate_python(self, value: Any) -> Any:
        return _drained(self._adapter.validate_python(value))


def _drained(value: Any) -> Any:
    """``value`` with every lazily validated iterable in it iterated (validated) into a list."""
    if isinstance(value, dict):
        return {key: _drained(item) for key, item in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (list, tuple)) or hasattr(value, "__next__"):
        return [_drained(item) for item in value]
    return value


_CHAT = _Checked(TypeAdapter(list[ChatCompletionMessageParam]))
_RESPONSES = _Checked(TypeAdapter(ResponseInputParam))
_MESSAGES = _Checked(TypeAdapter(list[MessageParam]))
_SYSTEM = _Checked(TypeAdapter(str | list[TextBlockParam]))


@dataclass(frozen=True)
class Recorded:
    path: str
    body: dict[str, Any]


@dataclass
class FakeProviders:
    """The running fake: its base URLs and what it received."""

    port: int
    requests: list[Recorded] = field(default_factory=list)

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _last_text(items: list[Any]) -> str:
    for item in reversed(items):
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            for block in reversed(content):
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    return str(block["text"])
    return ""


def _answer(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The status and JSON answer of a request to ``path``."""
    items: Any
    try:
        if path == "/v1/chat/completions":
            items = _CHAT.validate_python(body["messages"])
        elif path == "/v1/responses":
            items = _RESPONSES.validate_python(body["input"])
        elif path == "/v1/messages":
            items = _MESSAGES.validate_python(body["messages"])
            if "system" in body:
                _SYSTEM.validate_python(body["system"])
        else:
            return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}
    except (KeyError, ValidationError) as error:
        return 400, {"error": {"message": str(error)[:2000], "type": "invalid_request_error"}}
    # The text is read from the body as sent: validation turns Anthropic's content blocks into
    # a lazy iterator.
    sent = body["input" if path == "/v1/responses" else "messages"]
    text = f"Seen {len(list(items))} messages; the last said: {_last_text(sent)[:40]}."
    usage = {"input": len(json.dumps(body)) // 4, "output": len(text) // 4}
    if path == "/v1/chat/completions":
        return 200, {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {
                "prompt_tokens": usage["input"],
                "completion_tokens": usage["output"],
                "total_tokens": usage["input"] + usage["output"],
            },
        }
    if path == "/v1/responses":
        return 200, {
            "id": "resp-fake",
            "object": "response",
            "created_at": 0,
            "model": body.get("model", ""),
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "id": "msg-fake",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": usage["input"],
                "output_tokens": usage["output"],
                "total_tokens": usage["input"] + usage["output"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    return 200, {
        "id": "msg-fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": usage["input"], "output_tokens": usage["output"]},
    }


@contextlib.contextmanager
def start_fake_providers(port: int = 0, record_to: Path | None = None) -> Iterator[FakeProviders]:
    """Serves the fake on ``127.0.0.1:port`` (0: a free one) until the block ends; with
    ``record_to``, each request is also appended to that file as a JSON line."""
    recorded: list[Recorded] = []

    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 with keep-alive, as the providers speak it. Under HTTP/1.0 the server closes
        # each connection after its answer, and the JDK's HttpClient, which pools the
        # connection anyway, now and then sent the next request on the closed one ("header
        # parser received no bytes").
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                body = {}
            path = self.path.split("?", 1)[0]
            recorded.append(Recorded(path, body))
            status, answer = _answer(path, body if isinstance(body, dict) else {})
            if record_to is not None:
                line = json.dumps({"path": path, "status": status, "body": body})
                with record_to.open("a") as out:
                    out.write(line + "\n")
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield FakeProviders(server.server_address[1], recorded)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", type=Path, help="write the port here once serving")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", type=Path, help="append each request here as a JSON line")
    args = parser.parse_args()
    with start_fake_providers(args.port, args.record) as fake:
        if args.port_file is not None:
            args.port_file.write_text(str(fake.port))
        print(f"fake providers on 127.0.0.1:{fake.port}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
