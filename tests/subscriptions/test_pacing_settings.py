"""The pacing of batched subscribers is a deployment's choice: ``ServerSettings`` and the
``serve`` flags set the pacer's longest hold and target load, and reject what cannot run."""

from __future__ import annotations

import pytest

from contextengine import cli
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer

pytestmark = pytest.mark.service

SERVE = ["serve", "--db", ":memory:"]


def settings(*flags: str) -> ServerSettings:
    return cli.serve_settings(cli.parse([*SERVE, *flags]))


def test_the_defaults_are_the_pacers() -> None:
    defaults = settings()
    assert defaults.subscription_max_hold_seconds == ServerSettings().subscription_max_hold_seconds
    assert defaults.subscription_target_load == ServerSettings().subscription_target_load


def test_flags_set_the_hold_and_the_target_load() -> None:
    chosen = settings("--subscription-max-hold-ms", "20", "--subscription-target-load", "0.5")
    assert chosen.subscription_max_hold_seconds == pytest.approx(0.02)
    assert chosen.subscription_target_load == 0.5


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--subscription-max-hold-ms", "0"], "--subscription-max-hold-ms must be positive"),
        (["--subscription-max-hold-ms", "nan"], "--subscription-max-hold-ms must be positive"),
        (["--subscription-target-load", "0"], "--subscription-target-load must be in (0, 1]"),
        (["--subscription-target-load", "1.5"], "--subscription-target-load must be in (0, 1]"),
        (["--max-request-bytes", "0"], "--max-request-bytes must be positive"),
    ],
)
def test_values_no_server_can_run_with_are_refused(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="must be"):
        settings(*flags)
    assert cli.main([*SERVE, *flags]) == 2  # before anything starts
    assert message in capsys.readouterr().err


async def test_the_server_paces_with_its_settings() -> None:
    chosen = ServerSettings(subscription_max_hold_seconds=0.02, subscription_target_load=0.5)
    async with start_local_server(settings=chosen) as server:
        pacer = server.broadcaster.pacer
        assert pacer.max_hold_seconds == 0.02
        assert pacer.target_demand == 0.5


def test_a_server_cannot_be_built_with_an_impossible_pacer() -> None:
    with pytest.raises(ValueError, match="max_hold_seconds"):
        ContextEngineServer(ServerSettings(db=":memory:", subscription_max_hold_seconds=0.0))
    with pytest.raises(ValueError, match="target_demand"):
        ContextEngineServer(ServerSettings(db=":memory:", subscription_target_load=0.0))
