"""The operations port: ``/healthz``, ``/readyz`` (failing while the store cannot write, as the
gRPC health does), ``/metrics``; off by default; and the real ``contextengine serve`` out of
process, at its default log level, with the port on and JSON logs."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import httpx
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.store import WriteTx
from contextengine.store.memory import MemoryStore
from contextengine.store.sqlite import SqliteStore
from contextengine.transport import ContextEngineServer
from tests.observability.helpers import Samples, http_get, scrape, sidecar, value
from tests.service.helpers import text_event
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.process

APP, USER = "ops-app", "u1"
PADDING = "z" * 8000


def _limit_pages(extra: int | None) -> Callable[[WriteTx], None]:
    """Lets the database grow by ``extra`` pages only (None: lifts the limit): SQLITE_FULL."""

    def op(tx: WriteTx) -> None:
        (pages,) = tx.db.execute("PRAGMA page_count").fetchone()
        limit = 2**31 - 2 if extra is None else pages + extra
        tx.db.execute(f"PRAGMA max_page_count = {limit}")

    return op


async def _until(check: Callable[[], Awaitable[bool]], seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if await check():
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"not within {seconds} s")


async def test_readyz_fails_while_the_store_cannot_write(tmp_path: Path) -> None:
    free = [1 << 30]
    store = SqliteStore(tmp_path / "ce.db", probe_seconds=0.05, free_bytes=lambda: free[0])
    async with (
        sidecar(tmp_path / "ce.db", store=store) as server,
        ContextEngineClient(server.target, attempts=1) as client,
    ):
        port = server.ops_port
        assert await http_get(port, "/healthz") == (200, "text/plain; charset=utf-8", "ok\n")
        assert (await http_get(port, "/readyz"))[::2] == (200, "ready\n")
        await client.create_session(APP, USER, "s1")
        await store.write(_limit_pages(4))
        free[0] = 0
        refused: ContextEngineError | None = None
        for n in range(100):
            try:
                await client.append_event(APP, USER, "s1", text_event(PADDING, event_id=f"e{n}"))
            except ContextEngineError as error:
                refused = error
                break
        assert refused is not None
        assert refused.code == grpc.StatusCode.RESOURCE_EXHAUSTED

        async def not_ready() -> bool:
            return (await http_get(port, "/readyz"))[0] == 503

        await _until(not_ready)
        status, _, body = await http_get(port, "/readyz")
        assert (status, body.split(":")[0]) == (503, "not ready")
        assert "STORAGE_FULL" in body
        assert (await http_get(port, "/healthz"))[0] == 200  # alive all the same
        assert value(await scrape(port), "contextengine_store_writable") == 0

        await store.write(_limit_pages(None))
        free[0] = 1 << 30

        async def ready() -> bool:
            return (await http_get(port, "/readyz"))[0] == 200

        await _until(ready)
        assert value(await scrape(port), "contextengine_store_writable") == 1
        await client.append_event(APP, USER, "s1", text_event("after"))
        assert (await http_get(port, "/nothing-here"))[0] == 404


async def test_the_ops_port_is_off_by_default(tmp_path: Path) -> None:
    settings = ServerSettings(db=str(tmp_path / "ce.db"), listen="127.0.0.1:0")
    assert settings.ops_listen == ""
    server = ContextEngineServer(settings)
    await server.start()
    try:
        assert server.ops_port == 0
    finally:
        await server.stop(grace=0.5)


def test_a_bad_ops_listen_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="ops_listen"):
        ContextEngineServer(ServerSettings(ops_listen="no-port"))


def _ops_port(process: Sidecar) -> int:
    """The operations port a sidecar started with ``--ops-listen 127.0.0.1:0`` logged."""
    found = re.search(r"operations on http://127\.0\.0\.1:(\d+)", process.log())
    assert found is not None, process.log()
    return int(found.group(1))


async def test_the_real_sidecar_serves_the_ops_port(tmp_path: Path) -> None:
    sidecar_process = Sidecar(
        tmp_path,
        tmp_path / "ce.db",
        "ops",
        ["--ops-listen", "127.0.0.1:0", "--log-format", "json", "--auth-token", "s3cr3t-tok"],
    )
    await sidecar_process.start()
    try:
        port = _ops_port(sidecar_process)
        assert (await http_get(port, "/healthz"))[0] == 200
        assert (await http_get(port, "/readyz"))[0] == 200
        async with ContextEngineClient(
            sidecar_process.target, attempts=1, token="s3cr3t-tok"
        ) as client:
            await client.create_session(APP, USER, "s1")
            await client.append_event(APP, USER, "s1", text_event("secret words"))
        samples = await scrape(port)
        assert value(samples, "contextengine_events_appended_total") == 1
        append = {"method": "contextengine.v1.SessionService/AppendEvent", "code": "OK"}
        assert value(samples, "contextengine_rpcs_handled_total", append) == 1
        async with httpx.AsyncClient() as http:
            response = await http.post(f"http://127.0.0.1:{port}/metrics")
        assert response.status_code == 405  # read-only
        assert response.headers["allow"] == "GET"
    finally:
        assert await sidecar_process.stop() == 0
    log = sidecar_process.log()
    assert "s3cr3t-tok" not in log
    assert "secret words" not in log
    lines = [json.loads(line) for line in log.splitlines()]
    rpc = [line for line in lines if line["logger"] == "contextengine.rpc"]
    assert [line["method"].rsplit(".", 1)[1] for line in rpc] == ["CreateSession", "AppendEvent"]
    assert all(line["session"] == "s1" and line["app"] == APP for line in rpc)


class _SlowToOpen(MemoryStore):
    """A store whose ``open`` (where a real one migrates) waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def open(self) -> None:
        await self.release.wait()
        await super().open()


async def test_readyz_waits_for_the_store_to_open() -> None:
    store = _SlowToOpen()
    settings = ServerSettings(listen="127.0.0.1:0", ops_listen="127.0.0.1:0")
    server = ContextEngineServer(settings, store=store)
    starting = asyncio.create_task(server.start())
    try:

        async def serving_http() -> bool:
            await asyncio.sleep(0)
            return server.ops_port != 0

        await _until(serving_http)
        assert (await http_get(server.ops_port, "/healthz"))[0] == 200  # alive meanwhile
        assert (await http_get(server.ops_port, "/readyz"))[::2] == (503, "not ready: starting\n")
        store.release.set()
        await starting
        assert (await http_get(server.ops_port, "/readyz"))[::2] == (200, "ready\n")
    finally:
        store.release.set()
        await starting
        await server.stop(grace=0.5)


async def _gc_after_a_growing_cache(tmp_path: Path, args: list[str]) -> tuple[float, Samples]:
    """Serves with ``args`` and grows a cached session (batches of 100 events appended, its
    context built after each: new long-lived objects) until the metrics show a full collection
    since start-up; the frozen objects right after start-up, and the samples then."""
    process = Sidecar(tmp_path, tmp_path / "ce.db", "gc", ["--ops-listen", "127.0.0.1:0", *args])
    await process.start()
    try:
        port = _ops_port(process)
        samples = await scrape(port)
        frozen_at_start = value(samples, "contextengine_gc_frozen_objects")
        full = {"generation": "2"}
        async with ContextEngineClient(process.target, attempts=1) as client:
            await client.create_session(APP, USER, "big")
            for batch in range(500):
                events = [text_event(f"event {batch}-{n} {PADDING[:50]}") for n in range(100)]
                await client.append_events(APP, USER, "big", events)
                await client.build_context(APP, USER, "big")
                if batch % 10 == 9:
                    samples = await scrape(port)
                    if value(samples, "contextengine_gc_pause_seconds_count", full) > 0:
                        return frozen_at_start, samples
        pytest.fail("no full collection after 50,000 events")
    finally:
        assert await process.stop() == 0


async def test_the_real_sidecar_freezes_what_full_collections_keep(tmp_path: Path) -> None:
    frozen_at_start, samples = await _gc_after_a_growing_cache(tmp_path, [])
    assert frozen_at_start > 0  # what start-up made
    full = {"generation": "2"}
    assert value(samples, "contextengine_gc_pause_seconds_sum", full) > 0
    assert value(samples, "contextengine_gc_pause_seconds_count", {"generation": "0"}) >= 1
    # the cached session's events (and their pipeline items) were frozen
    assert value(samples, "contextengine_gc_frozen_objects") > frozen_at_start + 1000
    assert value(samples, "contextengine_gc_thaws_total") == 0


async def test_no_gc_freeze_keeps_cpythons_collector(tmp_path: Path) -> None:
    frozen_at_start, samples = await _gc_after_a_growing_cache(tmp_path, ["--no-gc-freeze"])
    # nothing frozen after start-up (some of what start-up froze was freed since)
    assert 0 < value(samples, "contextengine_gc_frozen_objects") <= frozen_at_start
