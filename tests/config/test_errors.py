"""Values no sidecar can run with are refused before anything starts, and the message names the
setting and the source it came from: the flag, the ``CONTEXTENGINE_`` variable or the file's key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contextengine import cli, config

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _no_contextengine_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(config.ENV_PREFIX)]:
        monkeypatch.delenv(name)


#: (setting, bad raw value as a string, TOML literal of the same, what the message says)
BAD = [
    ("max_request_bytes", "0", "0", "must be positive"),
    ("max_request_bytes", "lots", '"lots"', "must be a valid integer"),
    ("subscription_target_load", "1.5", "1.5", "must be in (0, 1]"),
    ("subscription_max_hold_ms", "-5", "-5", "must be positive"),
    ("durability", "sometimes", '"sometimes"', "must be 'normal' or 'full'"),
    ("insecure", "maybe", '"maybe"', "must be a valid boolean"),
    ("grace_seconds", "-1", "-1", "must be zero or more"),
]


#: bool flags take no value (``--insecure`` / ``--no-insecure``): their bad values come from the
#: environment and the file only
BAD_FLAGS = [row for row in BAD if row[0] != "insecure"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@pytest.mark.parametrize(("name", "raw", "literal", "says"), BAD_FLAGS)
def test_a_bad_flag_is_named(
    name: str, raw: str, literal: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--db", ":memory:", f"{_flag(name)}={raw}"]
    with pytest.raises(config.ConfigError) as raised:
        cli.serve_settings(cli.parse(argv))
    assert str(raised.value).startswith(f"{_flag(name)} {says}"), raised.value
    assert cli.main(argv) == 2
    assert f"{_flag(name)} {says}" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "raw", "literal", "says"), BAD)
def test_a_bad_variable_is_named(
    name: str, raw: str, literal: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = f"CONTEXTENGINE_{name.upper()}"
    monkeypatch.setenv(env, raw)
    with pytest.raises(config.ConfigError) as raised:
        cli.serve_settings(cli.parse(["serve"]))
    assert str(raised.value).startswith(f"{env} {says}"), raised.value


@pytest.mark.parametrize(("name", "raw", "literal", "says"), BAD)
def test_a_bad_file_value_is_named(
    name: str, raw: str, literal: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f"{name} = {literal}\n")
    with pytest.raises(config.ConfigError) as raised:
        cli.serve_settings(cli.parse(["serve", "--config", str(path)]))
    assert str(raised.value).startswith(f"{path}: {name} {says}"), raised.value


def test_a_good_flag_hides_a_bad_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the value that wins is read: the precedence rule decides before validation."""
    monkeypatch.setenv("CONTEXTENGINE_MAX_REQUEST_BYTES", "0")
    settings = cli.serve_settings(cli.parse(["serve", "--max-request-bytes", "10"]))
    assert settings.max_request_bytes == 10


def test_an_unknown_file_key_is_refused_with_the_nearest_setting(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('listen = "127.0.0.1:0"\nmax_request_byte = 5\n')
    with pytest.raises(config.ConfigError, match="'max_request_byte' is not a setting; did you "):
        cli.serve_settings(cli.parse(["serve", "--config", str(path)]))
    # the field's name of a setting with an older flag is not its key either
    path.write_text("subscription_max_hold_seconds = 0.02\n")
    with pytest.raises(config.ConfigError, match="did you mean 'subscription_max_hold_ms'"):
        cli.serve_settings(cli.parse(["serve", "--config", str(path)]))


def test_tables_are_no_settings(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[server]\nlisten = '127.0.0.1:0'\n")
    with pytest.raises(config.ConfigError, match="'server' is not a setting"):
        cli.serve_settings(cli.parse(["serve", "--config", str(path)]))


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"listen = \n", "is not valid TOML"),
        (b"\xff\xfe", "is not UTF-8"),
        (None, "cannot be read"),
    ],
)
def test_an_unreadable_file_is_named(
    content: bytes | None, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.toml"
    if content is not None:
        path.write_bytes(content)
    assert cli.main(["serve", "--config", str(path)]) == 2
    assert f"{path}: {says}" in capsys.readouterr().err


def test_a_secret_is_never_echoed_in_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = [s for s in config.settings_fields() if s.secret]
    assert secret, "no secret setting to check"
    monkeypatch.setenv("CONTEXTENGINE_DB", "postgresql://u:hunter2@127.0.0.1/x")
    monkeypatch.setenv("CONTEXTENGINE_MAX_REQUEST_BYTES", "0")
    with pytest.raises(config.ConfigError) as raised:
        cli.serve_settings(cli.parse(["serve"]))
    assert "hunter2" not in str(raised.value)
