"""JSON logs (``log_format = "json"``): one object per line, the RPC lines with method, code,
latency, app, user, session and trace id, and never a request's contents or a bearer token."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.observability import JsonFormatter, use_log_format
from contextengine.settings import ServerSettings
from tests.observability.helpers import sidecar
from tests.service.helpers import text_event

pytestmark = pytest.mark.unit

APP, USER = "logged-app", "u1"
#: planted where a careless log line would show them
SECRET = "tok-3f9a1c-never-logged"
CONTENT = "the user's private words 7d1e"


@pytest.fixture
def rpc_log() -> Iterator[io.StringIO]:
    """What the per-RPC logger writes, through the JSON formatter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("contextengine.rpc")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


async def test_rpc_lines_are_json_with_ids_and_no_secrets(
    tmp_path: Path, rpc_log: io.StringIO
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = ServerSettings(auth_token=SECRET, log_format="json")
    async with (
        sidecar(tmp_path / "ce.db", settings=settings, tracer_provider=provider) as server,
        ContextEngineClient(server.target, attempts=1, token=SECRET) as client,
    ):
        await client.create_session(APP, USER, "s1")
        await client.append_event(APP, USER, "s1", text_event(CONTENT))
        await client.build_context(APP, USER, "s1")
        with pytest.raises(ContextEngineError) as missing:
            await client.get_session(APP, USER, "nope")
        assert missing.value.code == grpc.StatusCode.NOT_FOUND
    text = rpc_log.getvalue()
    assert SECRET not in text
    assert CONTENT not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [(line["method"].rsplit(".", 1)[1], line["code"]) for line in lines] == [
        ("CreateSession", "OK"),
        ("AppendEvent", "OK"),
        ("BuildContext", "OK"),
        ("GetSession", "NOT_FOUND"),
    ]
    spans = {format(s.context.trace_id, "032x") for s in exporter.get_finished_spans() if s.context}
    for line in lines:
        assert line["level"] == "INFO"
        assert line["logger"] == "contextengine.rpc"
        assert line["app"] == APP
        assert line["user"] == USER
        assert isinstance(line["ms"], float)
        assert line["ms"] >= 0
        assert line["peer"].startswith("ipv4:127.0.0.1:")
        assert line["trace_id"] in spans
    assert [line["session"] for line in lines] == ["s1", "s1", "s1", "nope"]


def test_the_formatter_renders_any_record_and_text_leaves_handlers_alone() -> None:
    logger = logging.getLogger("tests.observability.formatter")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    plain = logging.Formatter("%(message)s")
    handler.setFormatter(plain)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        use_log_format("text", logger)
        assert handler.formatter is plain
        use_log_format("json", logger)
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed %s", "here")
        line = json.loads(stream.getvalue())
        assert line["message"] == "failed here"
        assert line["level"] == "ERROR"
        assert "ValueError: boom" in line["exception"]
        with pytest.raises(ValueError, match="log_format"):
            use_log_format("xml", logger)  # type: ignore[arg-type]
    finally:
        logger.removeHandler(handler)
