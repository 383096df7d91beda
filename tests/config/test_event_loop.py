"""``contextengine serve --event-loop uvloop``, out of process: it serves an append, a live
subscription and a BuildContext on uvloop (the class of the running loop, which it logs at
start); asyncio stays the default; uvloop chosen but not installed stops ``serve`` before it
starts, with the setting and the extra named."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from contextengine.settings import ServerSettings
from contextengine.v1 import content_pb2, event_pb2
from tests.config.serving import START_TIMEOUT, environment, serving

pytestmark = pytest.mark.process


def _event(text: str) -> event_pb2.Event:
    content = content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)])
    return event_pb2.Event(author="user", content=content)


async def _serve_and_use(tmp_path: Path, argv: list[str]) -> str:
    """Serves with ``argv``, appends, follows the session live and builds its context; returns
    the log."""
    port_file, log = tmp_path / "serve.port", tmp_path / "serve.log"
    args = ["--listen", "127.0.0.1:0", "--db", str(tmp_path / "loop.db")]
    args += ["--port-file", str(port_file), "--log-level", "INFO", *argv]
    async with (
        serving(args, port_file, log) as port,
        ContextEngineClient(f"127.0.0.1:{port}", attempts=1) as client,
    ):
        await client.wait_ready(START_TIMEOUT)
        await client.create_session("app", "u", "s")
        await client.append_event("app", "u", "s", _event("first"))
        received: list[str] = []
        stream = client.subscribe_events("app", "u", "s")

        async def follow() -> None:
            async for frame in stream:
                if frame.WhichOneof("frame") == "event":
                    received.append(frame.event.event.content.parts[0].text)
                    if len(received) == 2:
                        return

        following = asyncio.create_task(follow())
        await client.append_event("app", "u", "s", _event("second"))
        await asyncio.wait_for(following, START_TIMEOUT)
        await stream.aclose()
        assert received == ["first", "second"]
        built = await client.build_context("app", "u", "s")
        assert [content.parts[0].text for content in built.contents] == ["first", "second"]
    return await asyncio.to_thread(log.read_text)


async def test_serve_on_uvloop(tmp_path: Path) -> None:
    log = await _serve_and_use(tmp_path, ["--event-loop", "uvloop"])
    assert "loop=uvloop" in log


async def test_asyncio_is_the_default(tmp_path: Path) -> None:
    assert ServerSettings().event_loop == "asyncio"
    log = await _serve_and_use(tmp_path, [])
    assert "loop=asyncio" in log


def test_uvloop_not_installed_stops_serve() -> None:
    # None in sys.modules: the package cannot be found or imported, as when it is not installed.
    script = (
        "import sys\n"
        "sys.modules['uvloop'] = None\n"
        "from contextengine.cli import main\n"
        "sys.exit(main(['serve', '--listen', '127.0.0.1:0', '--db', ':memory:', "
        "'--event-loop', 'uvloop']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment({}),
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "event_loop uvloop needs the uvloop package" in done.stderr
    assert "contextengine[uvloop]" in done.stderr
