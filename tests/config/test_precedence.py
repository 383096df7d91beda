"""One precedence rule for every setting: a flag over its ``CONTEXTENGINE_`` variable over the
configuration file over the default, through the real command line (``cli.parse`` and
``cli.serve_settings``), for a number, a string, a bool, an optional and a scaled setting."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from contextengine import cli, config
from contextengine.settings import ServerSettings

pytestmark = pytest.mark.unit

SERVE = ["serve"]


@dataclass(frozen=True)
class Case:
    """One setting given at every level: the field's value each level must produce."""

    #: the setting's name (file key, variable, flag)
    name: str
    #: the field it sets
    field: str
    #: the TOML line's value and the field value it gives
    file: tuple[str, Any]
    #: the variable's raw value and the field value it gives
    env: tuple[str, Any]
    #: the flag's arguments and the field value they give
    flag: tuple[list[str], Any]


CASES = [
    Case(
        "max_request_bytes",
        "max_request_bytes",
        ("1000", 1000),
        ("2000", 2000),
        (["--max-request-bytes", "3000"], 3000),
    ),
    Case(
        "listen",
        "listen",
        ('"127.0.0.1:1001"', "127.0.0.1:1001"),
        ("127.0.0.1:1002", "127.0.0.1:1002"),
        (["--listen", "127.0.0.1:1003"], "127.0.0.1:1003"),
    ),
    Case("insecure", "insecure", ("true", True), ("false", False), (["--insecure"], True)),
    Case(
        "gemini_base_url",
        "gemini_base_url",
        ('"http://127.0.0.1:9/file"', "http://127.0.0.1:9/file"),
        # an empty variable unsets an optional setting
        ("", None),
        (["--gemini-base-url", "http://127.0.0.1:9/flag"], "http://127.0.0.1:9/flag"),
    ),
    Case(
        "subscription_max_hold_ms",
        "subscription_max_hold_seconds",
        ("20", 0.02),
        ("30", 0.03),
        (["--subscription-max-hold-ms", "40"], 0.04),
    ),
]


def _settings(argv: list[str]) -> ServerSettings:
    return cli.serve_settings(cli.parse([*SERVE, *argv]))


@pytest.fixture(autouse=True)
def _no_contextengine_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's own variables only (a developer's shell may export some)."""
    for name in [n for n in os.environ if n.startswith(config.ENV_PREFIX)]:
        monkeypatch.delenv(name)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_flag_over_env_over_file_over_default(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = getattr(ServerSettings(), case.field)
    assert getattr(_settings([]), case.field) == default

    path = tmp_path / "contextengine.toml"
    path.write_text(f"{case.name} = {case.file[0]}\n")
    assert getattr(_settings(["--config", str(path)]), case.field) == pytest.approx(case.file[1])
    assert case.file[1] != default

    env = f"CONTEXTENGINE_{case.name.upper()}"
    monkeypatch.setenv(env, case.env[0])
    assert getattr(_settings(["--config", str(path)]), case.field) == case.env[1]

    chosen = _settings(["--config", str(path), *case.flag[0]])
    assert getattr(chosen, case.field) == pytest.approx(case.flag[1])

    # and where each value came from, as `config show` reports it
    loaded = cli.load_config(cli.parse([*SERVE, "--config", str(path), *case.flag[0]]))
    (value,) = [v for v in loaded.values if v.setting.name == case.name]
    assert (value.kind, value.where) == ("flag", case.flag[0][0])


def test_the_config_file_can_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_env = tmp_path / "env.toml"
    from_env.write_text("grace_seconds = 3\n")
    from_flag = tmp_path / "flag.toml"
    from_flag.write_text("grace_seconds = 4\n")
    monkeypatch.setenv("CONTEXTENGINE_CONFIG", str(from_env))
    assert _settings([]).grace_seconds == 3.0
    assert _settings(["--config", str(from_flag)]).grace_seconds == 4.0  # --config wins


def test_a_no_flag_turns_a_bool_off_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTENGINE_INSECURE", "true")
    assert _settings([]).insecure is True
    assert _settings(["--no-insecure"]).insecure is False


def test_unknown_contextengine_variables_are_left_to_their_owners(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``CONTEXTENGINE_TARGET`` is the clients' variable, not a setting."""
    monkeypatch.setenv("CONTEXTENGINE_TARGET", "127.0.0.1:1")
    assert _settings([]) == ServerSettings()


def test_every_field_is_a_setting_with_its_own_names() -> None:
    found = config.settings_fields()
    assert [s.field for s in found] == list(ServerSettings.__dataclass_fields__)
    names = [s.name for s in found]
    assert len(set(names)) == len(names)
    for item in found:
        assert item.env == "CONTEXTENGINE_" + item.name.upper()
        assert item.flag == "--" + item.name.replace("_", "-")
        assert item.help.strip()
