"""The database file as a fault: a second sidecar on it, and a disk that fills up.

Both run the real ``contextengine serve`` as a child process at its default log level.

* A second sidecar on a file another one serves refuses to start: exit status 1, one log line
  naming the other process's pid and the lock file, no traceback; the first one goes on serving.
* A full disk (a small tmpfs mounted by the test, so only as root): appends fail with
  RESOURCE_EXHAUSTED / STORAGE_FULL and an ErrorInfo, health turns NOT_SERVING, reads go on and
  every acknowledged event is there; once space is freed writes succeed again and health returns
  to SERVING without a restart, and a restart finds everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from tests.service.helpers import text_event
from tests.support.sidecar import NOT_SERVING, SERVING, Sidecar, running_sidecar

pytestmark = [pytest.mark.process, pytest.mark.slow]

APP, USER, SESSION = "storage", "u1", "s1"
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
TIMEOUT = 10.0
#: the tmpfs's size, and the room the filler file leaves on it for the database
TMPFS_BYTES = 24 * 1024 * 1024
ROOM_BYTES = 3 * 1024 * 1024
#: text of each appended event (the disk fills after a few hundred)
PADDING = "y" * 8000


async def test_a_second_sidecar_on_the_same_file_refuses_to_start(tmp_path: Path) -> None:
    db = tmp_path / "ce.db"
    async with running_sidecar(tmp_path, db, "first") as first:
        async with ContextEngineClient(first.target, attempts=1, timeout=TIMEOUT) as client:
            await client.create_session(APP, USER, SESSION)
            await client.append_event(APP, USER, SESSION, text_event("before", event_id="a"))
        # Another working directory and a relative path: the same file all the same.
        other = tmp_path / "elsewhere"
        other.mkdir()
        second = Sidecar(tmp_path, Path("..") / db.name, "second", cwd=other)
        status = await second.run_to_exit()
        log = second.log()
        assert status == 1, log
        assert f"pid {first.pid}" in log, log
        assert f"{db}.lock" in log, log
        assert "Traceback" not in log, log
        assert len(log.strip().splitlines()) == 1, log

        first.check_alive("after the second sidecar's attempt")
        assert await first.health() == SERVING
        async with ContextEngineClient(first.target, attempts=1, timeout=TIMEOUT) as client:
            for n in range(20):  # every append through the first still works
                await client.append_event(APP, USER, SESSION, text_event("x", event_id=f"b{n}"))
            stored = [e.id async for e in client.list_events(APP, USER, SESSION)]
        assert stored == ["a", *(f"b{n}" for n in range(20))]
        assert await first.stop() == 0

    # Once the first has stopped, the file is free again (after a kill -9 too: test_crash).
    async with (
        running_sidecar(tmp_path, db, "third") as third,
        ContextEngineClient(third.target, attempts=1, timeout=TIMEOUT) as client,
    ):
        assert len([e async for e in client.list_events(APP, USER, SESSION)]) == 21


@contextlib.contextmanager
def _small_disk(path: Path) -> Iterator[Path]:
    """A tmpfs of ``TMPFS_BYTES`` mounted on ``path``; skips the test where that is not possible."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(filler: Path, room: int) -> None:
    """Writes ``filler`` until the file system has about ``room`` bytes left (0: until it is
    full)."""
    stat = os.statvfs(filler.parent)
    size = max(stat.f_bavail * stat.f_frsize - room, 0)
    with filler.open("wb", buffering=0) as out:
        chunk = b"\0" * 65536
        with contextlib.suppress(OSError):  # ENOSPC: full
            while size > 0 or room == 0:
                size -= out.write(chunk[: max(min(size, len(chunk)), 512)])


async def _health_becomes(server: Sidecar, status: int, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while (current := await server.health()) != status:
        assert time.monotonic() < deadline, f"health is {current}, not {status}"
        await asyncio.sleep(0.05)


async def _stored(client: ContextEngineClient) -> list[str]:
    return [e.id async for e in client.list_events(APP, USER, SESSION, page_size=1000)]


async def test_a_full_disk_is_storage_full_and_writes_resume(tmp_path: Path) -> None:
    with _small_disk(tmp_path / "disk") as disk:
        db = disk / "ce.db"
        filler = disk / "filler"
        async with running_sidecar(tmp_path, db, "full") as server:
            async with ContextEngineClient(server.target, attempts=1, timeout=TIMEOUT) as client:
                await client.create_session(APP, USER, SESSION)
                _fill(filler, ROOM_BYTES)
                acknowledged: list[str] = []
                refused: ContextEngineError | None = None
                for n in range(10_000):
                    try:
                        await client.append_event(
                            APP, USER, SESSION, text_event(PADDING, event_id=f"e{n}")
                        )
                    except ContextEngineError as error:
                        refused = error
                        break
                    acknowledged.append(f"e{n}")
                assert refused is not None, "the disk never filled up"
                assert acknowledged, "not one append before the disk was full"
                assert (refused.code, refused.reason) == (RESOURCE_EXHAUSTED, "STORAGE_FULL")
                assert refused.metadata["sqlite_error"].startswith("SQLITE_FULL")
                await _health_becomes(server, NOT_SERVING)
                assert await server.health("contextengine.v1.SessionService") == NOT_SERVING

                # The last few kB too: now no write of any size can succeed.
                _fill(disk / "filler2", 0)
                # Reads go on; writes of every kind keep failing the same way.
                assert await _stored(client) == acknowledged
                with pytest.raises(ContextEngineError) as again:
                    await client.append_events(
                        APP,
                        USER,
                        SESSION,
                        [text_event(PADDING, event_id=f"x{n}") for n in range(3)],
                    )
                assert again.value.reason == "STORAGE_FULL"
                await asyncio.sleep(1.5)  # probe writes may fit in the WAL's slack: no flapping
                assert await server.health() == NOT_SERVING
                server.check_alive("while the disk is full")

                filler.unlink()
                (disk / "filler2").unlink()
                await _health_becomes(server, SERVING)
                for n in range(20):
                    event_id = f"after{n}"
                    await client.append_event(
                        APP, USER, SESSION, text_event("z", event_id=event_id)
                    )
                    acknowledged.append(event_id)
                assert await _stored(client) == acknowledged
            assert await server.stop() == 0
        log = server.log()
        assert "Traceback" not in log, log[-6000:]
        assert log.count("ERROR contextengine.store storage:") == 1, log[-6000:]
        assert "can be written again" in log

        async with (
            running_sidecar(tmp_path, db, "restarted") as server,
            ContextEngineClient(server.target, attempts=1, timeout=TIMEOUT) as client,
        ):
            assert await _stored(client) == acknowledged


async def test_a_sidecar_that_cannot_open_its_database_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    """A full disk at start-up (no room for the WAL), and a directory that does not exist: exit
    status 1 and one ERROR line naming the database, no traceback."""
    with _small_disk(tmp_path / "disk") as disk:
        _fill(disk / "filler", 0)
        cases = [disk / "ce.db", tmp_path / "missing" / "ce.db"]
        for n, db in enumerate(cases):
            sidecar = Sidecar(tmp_path, db, f"unopened-{n}")
            status = await sidecar.run_to_exit()
            log = sidecar.log()
            assert status == 1, log
            assert f"the database {db} cannot be used" in log, log
            assert "Traceback" not in log, log
            assert len(log.strip().splitlines()) == 1, log
