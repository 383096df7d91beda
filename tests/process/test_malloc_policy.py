"""glibc's malloc thresholds (``process.malloc_policy``): what ``tune_malloc`` asks of
``mallopt``, and the real ``contextengine serve`` (out of process, default log level) answering
large grown contexts without faulting in fresh pages for each answer."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from contextengine.process.malloc_policy import (
    MMAP_THRESHOLD_BYTES,
    TRIM_THRESHOLD_BYTES,
    tune_malloc,
)
from contextengine.settings import ServerSettings
from contextengine.testing.proc import minor_faults
from contextengine.v1 import content_pb2, event_pb2
from tests.service.helpers import text_event
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.process

APP, USER, SESSION = "malloc-app", "u1", "big"
GLIBC = platform.libc_ver()[0] == "glibc"
#: inline data is carried into the context but not tokenized: a big answer, built quickly
BLOB_BYTES = 1024 * 1024
BLOBS = 12


def test_tune_malloc_sets_the_trim_threshold_then_the_mmap_threshold() -> None:
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    assert tune_malloc(mallopt) is True
    assert calls == [(-1, TRIM_THRESHOLD_BYTES), (-3, MMAP_THRESHOLD_BYTES)]


def test_tune_malloc_reports_a_refused_setting() -> None:
    assert tune_malloc(lambda param, value: 0 if param == -3 else 1) is False


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_glibc_takes_the_thresholds() -> None:
    assert tune_malloc() is True


def test_serve_tunes_malloc_by_default() -> None:
    assert ServerSettings().malloc_tuning is True


def _blob_event(n: int) -> event_pb2.Event:
    data = bytes([n]) * BLOB_BYTES
    part = content_pb2.Part(inline_data=content_pb2.Blob(mime_type="image/png", data=data))
    return event_pb2.Event(
        author="user",
        invocation_id=f"inv-{n}",
        content=content_pb2.Content(role="user", parts=[part]),
    )


async def _faults_per_grown_answer(tmp_path: Path, name: str, args: list[str]) -> float:
    """Serves with ``args``; a session whose context is ~12 MB; then, four times, one small
    event appended and the full context built: the sidecar's minor page faults per build."""
    process = Sidecar(tmp_path, tmp_path / f"{name}.db", name, args)
    await process.start()
    try:
        async with ContextEngineClient(process.target, attempts=1, timeout=60.0) as client:
            await client.create_session(APP, USER, SESSION)
            for n in range(BLOBS):
                await client.append_event(APP, USER, SESSION, _blob_event(n))
            await client.build_context(APP, USER, SESSION)
            faults = 0
            rounds = 4
            for n in range(rounds):
                await client.append_event(APP, USER, SESSION, text_event(f"more {n}"))
                before = minor_faults(process.pid)
                answer = await client.build_context(APP, USER, SESSION)
                faults += minor_faults(process.pid) - before
                assert len(answer.contents) == BLOBS + n + 1
        process.check_alive("after the builds")
        return faults / rounds
    finally:
        assert await process.stop() == 0


@pytest.mark.skipif(not GLIBC or not Path("/proc/self/stat").exists(), reason="glibc, /proc")
async def test_large_answers_reuse_the_heap_instead_of_fresh_pages(tmp_path: Path) -> None:
    tuned = await _faults_per_grown_answer(tmp_path, "tuned", [])
    untuned = await _faults_per_grown_answer(tmp_path, "untuned", ["--no-malloc-tuning"])
    pages = BLOBS * BLOB_BYTES // 4096
    # glibc's own thresholds map (and fault in) the answer's pages again for every answer;
    # tuned, the pages freed by the previous answer are reused
    assert untuned > pages, (tuned, untuned)
    assert tuned < pages / 10, (tuned, untuned)
