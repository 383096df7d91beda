"""``contextengine events tail`` as a child process: it follows a live append, survives a
sidecar restart on the same port and database (the client resubscribes from the last event it
printed), and Ctrl-C (SIGINT) ends it with status 130 and no traceback."""

from __future__ import annotations

import asyncio
import json
import queue
import signal
import subprocess
import threading
from typing import IO

import pytest

from contextengine.client import ContextEngineClient
from contextengine.v1 import content_pb2, event_pb2
from tests.console.conftest import USER
from tests.console.helpers import Sidecar, spawn

pytestmark = pytest.mark.process

WAIT = 30.0
#: the tail tests' own app: the sessions they make stay out of the other tests' listings
APP = "live"


class Lines:
    """The lines of a child's stream, read by a thread, waited for with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._stream = stream
        self._queue: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def close(self) -> list[str]:
        """Every line left once the child has exited (its stream ends), the stream closed."""
        self._thread.join(WAIT)
        while not self._queue.empty():
            self.seen.append(self._queue.get())
        self._stream.close()
        return self.seen

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))

    def until(self, text: str) -> str:
        """The first line from now on that contains ``text`` (fails after WAIT seconds)."""
        while True:
            try:
                line = self._queue.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} in {self.seen}") from None
            self.seen.append(line)
            if text in line:
                return line


def _said(text: str) -> event_pb2.Event:
    return event_pb2.Event(
        author="user",
        invocation_id="live",
        content=content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)]),
    )


def _append(target: str, session: str, text: str, *, create: bool = False) -> None:
    async def go() -> None:
        async with ContextEngineClient(target) as client:
            if create:
                await client.create_session(APP, USER, session)
            await client.append_event(APP, USER, session, _said(text))

    asyncio.run(go())


def _interrupt(process: subprocess.Popen[str], out: Lines, err: Lines) -> tuple[int, str]:
    """Ctrl-C: the exit status and everything written to stderr."""
    process.send_signal(signal.SIGINT)
    status = process.wait(WAIT)
    out.close()
    return status, "\n".join(err.close())


def test_tail_follows_a_live_append_and_ctrl_c_ends_it(console_sidecar: Sidecar) -> None:
    target = console_sidecar.target
    _append(target, "tailed", "first words", create=True)
    _append(target, "tailed", "second words")
    process = spawn("events", "tail", APP, USER, "tailed", "--last", "1", "--target", target)
    assert process.stdout is not None
    assert process.stderr is not None
    out, err = Lines(process.stdout), Lines(process.stderr)
    try:
        assert out.until("#2 ").endswith("| second words")
        err.until("caught up")
        _append(target, "tailed", "a live one")
        assert out.until("#3 ") == "#3   user         | a live one"
        assert not any("first words" in line for line in out.seen)  # --last 1
    finally:
        status, rest = _interrupt(process, out, err)
    assert status == 130
    assert "Traceback" not in rest


def test_tail_resumes_after_the_sidecar_restarts(console_sidecar: Sidecar) -> None:
    """The tests' sidecar is stopped and started again on its port and SQLite file (what it holds
    stays for the other tests)."""
    running = console_sidecar
    _append(running.target, "restarted", "before", create=True)
    process = spawn("events", "tail", APP, USER, "restarted", "--json", "--target", running.target)
    assert process.stdout is not None
    assert process.stderr is not None
    out, err = Lines(process.stdout), Lines(process.stderr)
    try:
        assert json.loads(out.until('"before"'))["sequence"] == 1
        err.until("caught up")
        running.stop()
        running.start()  # the same port and database
        _append(running.target, "restarted", "after")
        after = json.loads(out.until('"after"'))
        assert after["sequence"] == 2  # a JSON number
        assert after["content"]["parts"] == [{"text": "after"}]
    finally:
        status, rest = _interrupt(process, out, err)
    assert status == 130
    assert "Traceback" not in rest
    printed = [json.loads(line) for line in out.seen]
    assert [event["sequence"] for event in printed] == [1, 2]  # nothing missed or repeated


def test_tail_of_a_user_prints_only_new_events_of_every_session(console_sidecar: Sidecar) -> None:
    target = console_sidecar.target
    _append(target, "elsewhere", "already there", create=True)
    process = spawn("events", "tail", APP, USER, "--target", target)
    assert process.stdout is not None
    assert process.stderr is not None
    out, err = Lines(process.stdout), Lines(process.stderr)
    try:
        err.until("caught up")
        _append(target, "elsewhere", "new in one session")
        _append(target, "another", "new in another", create=True)
        assert (
            out.until("new in one session")
            == f"{USER}/elsewhere #2   user         | new in one session"
        )
        assert out.until("new in another").startswith(f"{USER}/another #1 ")
    finally:
        status, _ = _interrupt(process, out, err)
    assert status == 130
    assert not any("already there" in line for line in out.seen)  # the replay is skipped
