"""The real ``contextengine serve --config FILE``, out of process: it serves with the file's
settings (address, database, port file, request limit, log level), a variable overrides the
file, and a bad file stops it before it starts (status 2, the key named)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.v1 import content_pb2, event_pb2
from tests.config.serving import START_TIMEOUT, environment, serving

pytestmark = pytest.mark.process

LIMIT = 64 * 1024


def _event(size: int) -> event_pb2.Event:
    content = content_pb2.Content(role="user", parts=[content_pb2.Part(text="x" * size)])
    return event_pb2.Event(author="user", content=content)


def _write_config(tmp_path: Path, log_level: str) -> tuple[Path, Path, Path]:
    db, port_file = tmp_path / "from-file.db", tmp_path / "serve.port"
    path = tmp_path / "contextengine.toml"
    path.write_text(
        f"listen = '127.0.0.1:0'\n"
        f"db = '{db}'\n"
        f"port_file = '{port_file}'\n"
        f"max_request_bytes = {LIMIT}\n"
        f"log_level = '{log_level}'\n"
    )
    return path, db, port_file


async def test_serve_runs_with_the_files_settings(tmp_path: Path) -> None:
    path, db, port_file = _write_config(tmp_path, "WARNING")
    log = tmp_path / "serve.log"
    async with (
        serving(["--config", str(path)], port_file, log) as port,
        ContextEngineClient(f"127.0.0.1:{port}", attempts=1) as client,
    ):
        await client.wait_ready(START_TIMEOUT)
        await client.create_session("app", "u", "s")
        await client.append_event("app", "u", "s", _event(LIMIT // 2))
        with pytest.raises(ContextEngineError) as raised:
            await client.append_event("app", "u", "s", _event(LIMIT + 1024))
        assert raised.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert raised.value.reason == "REQUEST_TOO_LARGE"
    assert db.exists()
    # log_level WARNING: none of INFO's one line per RPC
    assert "CreateSession" not in log.read_text()


async def test_a_variable_overrides_the_file_out_of_process(tmp_path: Path) -> None:
    path, _, port_file = _write_config(tmp_path, "WARNING")
    log = tmp_path / "serve.log"
    env = {"CONTEXTENGINE_MAX_REQUEST_BYTES": str(4 * LIMIT), "CONTEXTENGINE_LOG_LEVEL": "INFO"}
    async with (
        serving(["--config", str(path)], port_file, log, env) as port,
        ContextEngineClient(f"127.0.0.1:{port}", attempts=1) as client,
    ):
        await client.wait_ready(START_TIMEOUT)
        await client.create_session("app", "u", "s")
        await client.append_event("app", "u", "s", _event(LIMIT + 1024))
    assert "CreateSession" in log.read_text()


def test_a_bad_file_stops_serve_before_it_starts(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("listen = '127.0.0.1:0'\nmax_request_bytes = -1\n")
    done = subprocess.run(
        [sys.executable, "-m", "contextengine", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment({}),
        check=False,
    )
    assert done.returncode == 2
    assert f"{path}: max_request_bytes must be positive (got -1)" in done.stderr
