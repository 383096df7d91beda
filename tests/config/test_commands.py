"""``contextengine serve --help`` lists every setting; ``contextengine config show`` prints the
effective configuration (TOML that loads back) with each value's source and secrets masked;
``contextengine config check FILE`` checks a file alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contextengine import cli, config
from contextengine._compat import tomllib
from contextengine.settings import ServerSettings

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _no_contextengine_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(config.ENV_PREFIX)]:
        monkeypatch.delenv(name)


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["serve", "--help"]) == 0
    # click wraps lines: compare without line breaks inside a help text
    return " ".join(capsys.readouterr().out.split())


def test_serve_help_lists_every_setting_with_its_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys)
    for item in config.settings_fields():
        assert f"{item.flag} " in text, item.flag
        assert f"env {item.env})" in text, item.env
        assert " ".join(item.help.split())[:40] in text, item.name
    assert "--config FILE" in text
    assert "CONTEXTENGINE_CONFIG" in text


def test_help_shows_defaults_in_the_flags_unit(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    assert "(default: 50.0; env CONTEXTENGINE_SUBSCRIPTION_MAX_HOLD_MS)" in text


def _show(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["config", "show", *argv]) == 0
    return capsys.readouterr().out


def test_config_show_names_each_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.toml"
    path.write_text('listen = "127.0.0.1:7001"\ngrace_seconds = 3\n')
    monkeypatch.setenv("CONTEXTENGINE_GRACE_SECONDS", "4")
    out = _show(["--config", str(path), "--max-request-bytes", "99"], capsys)
    lines = out.splitlines()
    assert f'listen = "127.0.0.1:7001"  # file {path}' in lines
    assert "grace_seconds = 4.0  # CONTEXTENGINE_GRACE_SECONDS" in lines
    assert "max_request_bytes = 99  # --max-request-bytes" in lines
    assert 'durability = "normal"  # default' in lines
    assert "subscription_max_hold_ms = 50.0  # default" in lines
    assert "# gemini_base_url is unset  # default" in lines


def test_config_show_is_a_configuration_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What it prints loads back to the same settings (nothing secret set here)."""
    out = _show(["--db", ":memory:", "--subscription-max-hold-ms", "20", "--insecure"], capsys)
    path = tmp_path / "shown.toml"
    path.write_text(out)
    tomllib.loads(out)
    assert cli.main(["config", "check", str(path)]) == 0
    again = config.load({}, environ={}, config_file=path).settings
    assert again == ServerSettings(db=":memory:", subscription_max_hold_seconds=0.02, insecure=True)


def test_config_show_masks_secrets_and_database_passwords(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secrets = [s for s in config.settings_fields() if s.secret and s.optional is False]
    assert secrets, "no secret setting to check"
    for item in secrets:
        monkeypatch.setenv(item.env, "planted-secret-value")
    out = _show(["--db", "postgresql://ce:hunter2@127.0.0.1:5432/ce"], capsys)
    assert "planted-secret-value" not in out
    assert "hunter2" not in out
    assert 'db = "postgresql://ce:***@127.0.0.1:5432/ce"  # --db' in out.splitlines()
    for item in secrets:
        assert f'{item.name} = "***"  # {item.env}' in out.splitlines()


def test_config_check_ignores_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.toml"
    path.write_text("max_request_bytes = 0\n")
    monkeypatch.setenv("CONTEXTENGINE_MAX_REQUEST_BYTES", "10")
    assert cli.main(["config", "check", str(path)]) == 2
    assert f"{path}: max_request_bytes must be positive" in capsys.readouterr().err
    path.write_text("max_request_bytes = 10\nlisten = '127.0.0.1:0'\n")
    assert cli.main(["config", "check", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: ok (2 of ")
