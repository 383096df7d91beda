"""What the observability tests share: a sidecar with the operations port, a scripted
summarizer, and reading ``/metrics`` with prometheus_client's own text parser."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import httpx
from opentelemetry.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families

from contextengine.compaction.summarizers.summarizer import (
    Summarizer,
    SummarizerError,
    Summary,
    SummaryInput,
)
from contextengine.settings import ServerSettings
from contextengine.store import EventStore
from contextengine.transport import ContextEngineServer
from contextengine.v1 import config_pb2, content_pb2

#: metric name (as exposed, with _total / _count / _sum) -> {frozenset(labels): value}
Samples = dict[str, dict[frozenset[tuple[str, str]], float]]


class ScriptedSummarizer:
    """Summarizes into one fixed sentence, or fails while ``failing``."""

    name = "scripted"

    def __init__(self) -> None:
        self.failing = False
        self.calls = 0

    async def summarize(self, request: SummaryInput) -> Summary | None:
        self.calls += 1
        if self.failing:
            raise SummarizerError("scripted failure")
        text = f"The user and the agent talked ({len(request.events)} events)."
        return Summary(content_pb2.Content(parts=[content_pb2.Part(text=text)]))


def factory(summarizer: ScriptedSummarizer) -> object:
    def make(config: config_pb2.SummarizerConfig | None) -> Summarizer | None:
        return summarizer

    return make


@asynccontextmanager
async def sidecar(
    db: Path | str,
    *,
    settings: ServerSettings | None = None,
    summarizer: ScriptedSummarizer | None = None,
    tracer_provider: TracerProvider | None = None,
    store: EventStore | None = None,
) -> AsyncIterator[ContextEngineServer]:
    """A started sidecar on free loopback ports, the operations port on."""
    base = settings if settings is not None else ServerSettings()
    server = ContextEngineServer(
        replace(base, db=str(db), listen="127.0.0.1:0", ops_listen="127.0.0.1:0"),
        store=store,
        summarizers=factory(summarizer) if summarizer is not None else None,  # type: ignore[arg-type]
        tracer_provider=tracer_provider,
    )
    try:
        await server.start()
        yield server
    finally:
        await server.stop(grace=1.0)


async def http_get(port: int, path: str) -> tuple[int, str, str]:
    """(status, content type, body) of ``GET http://127.0.0.1:<port><path>``."""
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}{path}")
    return response.status_code, response.headers.get("Content-Type", ""), response.text


async def scrape(port: int) -> Samples:
    """``/metrics`` parsed by prometheus_client's parser (which fails on malformed text)."""
    status, content_type, body = await http_get(port, "/metrics")
    assert status == 200, body
    assert content_type.startswith("text/plain; version=0.0.4"), content_type
    samples: Samples = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return samples


def value(samples: Samples, name: str, labels: Mapping[str, str] | None = None) -> float:
    """One sample's value (0 when the series does not exist yet)."""
    return samples.get(name, {}).get(frozenset((labels or {}).items()), 0.0)
