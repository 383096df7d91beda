"""The configuration page (docs/operations/configuration.md) is true: its example file loads, and
its two error examples are what ``contextengine serve`` prints."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest

from contextengine import cli, config

pytestmark = pytest.mark.unit

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "configuration.md"


def _section() -> str:
    return PAGE.read_text()


@pytest.fixture(autouse=True)
def _no_contextengine_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(config.ENV_PREFIX)]:
        monkeypatch.delenv(name)


def test_the_example_file_loads(tmp_path: Path) -> None:
    (example,) = re.findall(r"```toml\n(.*?)```", _section(), flags=re.S)
    path = tmp_path / "contextengine.toml"
    path.write_text(example)
    settings = config.load({}, environ={}, config_file=path).settings
    assert settings.durability == "full"
    assert settings.subscription_max_hold_seconds == pytest.approx(0.02)
    assert settings.listen.startswith("unix:")


def test_the_error_examples_are_what_serve_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (console,) = re.findall(r"```console\n(.*?)```", _section(), flags=re.S)
    lines = console.splitlines()
    monkeypatch.setenv("CONTEXTENGINE_MAX_REQUEST_BYTES", "0")
    assert cli.main(["serve"]) == 2
    assert capsys.readouterr().err.strip() == lines[1]
    monkeypatch.delenv("CONTEXTENGINE_MAX_REQUEST_BYTES")
    monkeypatch.chdir(tmp_path)
    Path("contextengine.toml").write_text("max_request_byte = 5\n")
    assert cli.main(["serve", "--config", "contextengine.toml"]) == 2
    assert capsys.readouterr().err.strip() == lines[3]


def test_hash_token_prints_the_digest_a_token_file_takes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("replace-me-agent-token-0123456789\n"))
    assert cli.main(["hash-token"]) == 0
    digest = "335748af1c4eb9364d7b4ee77125d9297c39f390a69873b117941014a4a57d1a"
    assert capsys.readouterr().out.strip() == digest
