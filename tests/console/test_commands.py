"""The operator CLI against a real sidecar: every command's plain rendering (snapshots at 120
columns; ``CONSOLE_SNAPSHOTS=update`` rewrites them, see helpers.py), ``--json`` parsed, errors
as one line with a hint and their exit status, and the help naming what the commands need."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from contextengine.client import ContextEngineClient
from tests.auth import certs
from tests.console.conftest import AGENT, APP, COMPACTED, PLAIN, SCRATCH, USER, script
from tests.console.helpers import T0, Sidecar, check_snapshot, cli, free_port, sidecar

pytestmark = pytest.mark.process


@pytest.fixture(autouse=True)
def _plain_120_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.delenv("NO_COLOR", raising=False)
    for name in ("CONTEXTENGINE_TARGET", "CONTEXTENGINE_TOKEN", "CONTEXTENGINE_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)


def _ok(*argv: str) -> str:
    run = cli(*argv)
    assert run.status == 0, run.err
    assert "\x1b[" not in run.out  # plain text when not on a terminal
    return run.out


def test_sessions_list(console_sidecar: Sidecar) -> None:
    out = _ok("sessions", "list", APP, "--target", console_sidecar.target)
    check_snapshot("sessions_list", out)
    data = json.loads(
        _ok("sessions", "list", APP, USER, "--json", "--target", console_sidecar.target)
    )
    listed = {session["id"]: session for session in data["sessions"]}
    assert {PLAIN, COMPACTED, SCRATCH} <= set(listed)
    assert listed[PLAIN]["last_sequence"] == 7  # an integer, not proto3 JSON's string
    assert listed[PLAIN]["state"] == {"tier": "gold", "trip": "Rome"}


def test_sessions_show(console_sidecar: Sidecar) -> None:
    out = _ok("sessions", "show", APP, USER, PLAIN, "--target", console_sidecar.target)
    check_snapshot("sessions_show", out)
    data = json.loads(
        _ok(
            "sessions",
            "show",
            APP,
            USER,
            PLAIN,
            "--events",
            "2",
            "--json",
            "--target",
            console_sidecar.target,
        )
    )
    assert [event["sequence"] for event in data["events"]] == [6, 7]
    assert data["events"][0]["timestamp"] == T0 + 6


def test_events_list(console_sidecar: Sidecar) -> None:
    out = _ok("events", "list", APP, USER, COMPACTED, "--target", console_sidecar.target)
    check_snapshot("events_list_compacted", out)
    data = json.loads(
        _ok(
            "events",
            "list",
            APP,
            USER,
            PLAIN,
            "--after",
            "4",
            "--json",
            "--target",
            console_sidecar.target,
        )
    )
    assert [event["sequence"] for event in data["events"]] == [5, 6, 7]
    assert data["last_sequence"] == 7
    assert data["events"][1]["author"] == "booker"
    last = json.loads(
        _ok(
            "events",
            "list",
            APP,
            USER,
            PLAIN,
            "--last",
            "1",
            "--json",
            "--target",
            console_sidecar.target,
        )
    )
    assert [event["id"] for event in last["events"]] == [f"{PLAIN}-e7"]


def test_context_of_a_shared_session(console_sidecar: Sidecar) -> None:
    """Each content with its author (the other agent's reframed turn said so), the parts in
    short, the cacheable prefix as a rule."""
    argv = ("context", APP, USER, PLAIN, "--agent", AGENT, "--model", "gemini-2.5-flash")
    out = _ok(*argv, "--target", console_sidecar.target)
    check_snapshot("context_plain", out)
    assert "booker (reframed)" in out
    assert "said: Booked AZ123, seat 12A." in out
    assert "search_flights(passengers=2, to='FCO')" in out
    assert "search_flights → {'flights': ['AZ123', 'FR9']}" in out
    assert "<image/png, 32 bytes>" in out
    assert "(thought) Rome has two airports" in out
    data = json.loads(_ok(*argv, "--json", "--target", console_sidecar.target))
    assert len(data["contents"]) == 7
    assert data["token_estimate"]["tokens"] > 0
    rule = next(line for line in out.splitlines() if "cacheable prefix" in line)
    assert f"cacheable prefix: {data['cacheable_contents_count']} contents" in rule
    assert data["fingerprint"][:12] in rule


def test_context_with_a_summary(console_sidecar: Sidecar) -> None:
    argv = ("context", APP, USER, COMPACTED, "--agent", AGENT, "--model", "gemini-2.5-flash")
    out = _ok(*argv, "--target", console_sidecar.target)
    check_snapshot("context_compacted", out)
    lines = out.splitlines()
    summary = next(i for i, line in enumerate(lines) if "summary #7" in line)
    assert lines[summary].lstrip().startswith("0  model  summary #7")
    assert "↳ covers events #1-#6, 2023-11-14T22:13:21.000Z → 22:13:26.000Z" in lines[summary + 1]


def test_context_does_not_compact_unless_asked(console_sidecar: Sidecar) -> None:
    """A look changes nothing: BuildContext with skip_compaction, unless --compact."""
    before = json.loads(
        _ok("events", "list", APP, USER, PLAIN, "--json", "--target", console_sidecar.target)
    )
    _ok("context", APP, USER, PLAIN, "--agent", AGENT, "--target", console_sidecar.target)
    after = json.loads(
        _ok("events", "list", APP, USER, PLAIN, "--json", "--target", console_sidecar.target)
    )
    assert after == before


def test_compaction_status_compact_and_expand(console_sidecar: Sidecar) -> None:
    target = ("--target", console_sidecar.target)
    status = json.loads(_ok("compaction", "status", APP, USER, SCRATCH, "--json", *target))
    assert status.get("running", False) is False
    check_snapshot("compaction_status", _ok("compaction", "status", APP, USER, SCRATCH, *target))
    out = _ok("compaction", "compact", APP, USER, SCRATCH, "--trigger", "sliding-window", *target)
    assert out.startswith("★ summary #8 (appended): replaces events #1-#7")
    again = _ok("compaction", "compact", APP, USER, SCRATCH, "--trigger", "sliding-window", *target)
    assert again.startswith("no summary: ")
    expanded = _ok("compaction", "expand", APP, USER, COMPACTED, "7", *target)
    check_snapshot("compaction_expand", expanded)
    data = json.loads(_ok("compaction", "expand", APP, USER, COMPACTED, "7", "--json", *target))
    assert [event["sequence"] for event in data["events"]] == [1, 2, 3, 4, 5, 6]
    assert data["summary"]["actions"]["compaction"]["end_sequence"] == 6


def test_memory_search(console_sidecar: Sidecar) -> None:
    target = ("--target", console_sidecar.target)
    out = _ok("memory", "search", APP, USER, "flight to Rome", *target)
    check_snapshot("memory_search", out)
    data = json.loads(_ok("memory", "search", APP, USER, "flight to Rome", "--json", *target))
    assert data["memories"][0]["sequence"] == 1
    assert data["memories"][0]["session_id"] == PLAIN


def test_config_get_and_set(console_sidecar: Sidecar, tmp_path: Path) -> None:
    target = ("--target", console_sidecar.target)
    shown = _ok("config", "get", APP, *target)
    assert "compaction_interval: 2" in shown
    assert "extractive: {}" in shown
    yaml_file = tmp_path / "app.yaml"
    yaml_file.write_text(
        "events_compaction_config:\n  compaction_interval: 4\n  overlap_size: 1\n"
        "summarizer:\n  extractive: {}\nmemory:\n  max_results: 3\n"
    )
    stored = _ok("config", "set", "other-app", "-f", str(yaml_file), *target)
    assert "app_name: other-app" in stored
    assert "compaction_interval: 4" in stored
    data = json.loads(_ok("config", "get", "other-app", "--json", *target))
    assert data["events_compaction_config"] == {"compaction_interval": 4, "overlap_size": 1}
    assert data["memory"]["max_results"] == 3
    json_file = tmp_path / "session.json"
    json_file.write_text(
        json.dumps({"events_compaction_config": {"compaction_interval": 9, "overlap_size": 0}})
    )
    _ok("config", "set", APP, USER, SCRATCH, "--file", str(json_file), *target)
    session = json.loads(_ok("config", "get", APP, USER, SCRATCH, "--json", *target))
    assert session["effective_compaction_config"]["compaction_interval"] == 9
    bad = tmp_path / "bad.yaml"
    bad.write_text("events_compaction_config:\n  compaction_intervals: 4\n")
    run = cli("config", "set", APP, "-f", str(bad), *target)
    assert run.status == 2
    assert "compaction_intervals" in run.err
    run = cli("config", "get", APP, USER, *target)
    assert run.status == 2
    assert "give both USER and SESSION" in run.err


def test_sessions_delete(console_sidecar: Sidecar) -> None:
    target = ("--target", console_sidecar.target)
    _ok("config", "get", APP, *target)
    assert cli("sessions", "delete", APP, USER, "gone", "--yes", *target).status == 1
    assert _ok("sessions", "delete", APP, USER, "gone", "--yes", "--allow-missing", *target)

    async def make() -> None:
        async with ContextEngineClient(console_sidecar.target) as client:
            await client.create_session(APP, USER, "doomed")
            await client.append_events(APP, USER, "doomed", script("doomed")[:2])

    asyncio.run(make())
    assert (
        _ok("sessions", "delete", APP, USER, "doomed", "--yes", *target)
        == f"deleted {APP}/{USER}/doomed\n"
    )
    run = cli("sessions", "show", APP, USER, "doomed", *target)
    assert run.status == 1


def test_an_unknown_session_is_one_line_and_a_hint(console_sidecar: Sidecar) -> None:
    run = cli("events", "list", APP, USER, "nope", "--target", console_sidecar.target)
    assert run.status == 1
    assert run.out == ""
    first, hint = run.err.splitlines()
    assert first.startswith("error: NOT_FOUND SESSION_NOT_FOUND: ")
    assert "'nope'" in first
    assert hint.startswith("hint: ")
    assert "sessions list" in hint
    run = cli("compaction", "expand", APP, USER, PLAIN, "3", "--target", console_sidecar.target)
    assert run.status == 1
    assert run.err.startswith("error: ")
    assert "NOT_A_SUMMARY" in run.err


def test_a_sidecar_that_is_not_running() -> None:
    target = f"127.0.0.1:{free_port()}"
    run = cli("sessions", "list", APP, "--target", target, "--timeout", "2")
    assert run.status == 1
    first, hint = run.err.splitlines()
    assert first.startswith(f"error: UNAVAILABLE: {target}: ")
    assert f"is a sidecar running at {target}?" in hint
    assert "Traceback" not in run.err


def test_usage_errors_exit_with_2() -> None:
    run = cli("context", APP, USER)
    assert run.status == 2
    assert "Missing argument" in run.err
    run = cli("events", "tail", APP, USER, PLAIN, "--last", "x")
    assert run.status == 2


def test_the_help_names_the_connection_options_and_what_lists_need() -> None:
    out = _ok("sessions", "list", "--help")
    assert "CONTEXTENGINE_TARGET" in out
    assert "CONTEXTENGINE_TOKEN" in out
    assert "--token-file" in out
    assert "--ca-file" in out
    group = _ok("sessions", "--help")
    assert "no RPC that lists apps or users" in " ".join(group.split())


def test_tls_and_tokens_against_a_secured_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sidecar with TLS and a token: --ca-file verifies it, and the token comes from
    --token-file, --token or CONTEXTENGINE_TOKEN; without them, one line says what is missing."""
    pki = certs.write(tmp_path / "pki")
    tls = ("--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key))
    with sidecar(tmp_path, "--auth-token", "s3cret-token", *tls) as secured:
        target = ("--target", secured.target, "--timeout", "3")
        run = cli("sessions", "list", APP, *target)  # plaintext to a TLS port
        assert run.status == 1
        assert run.err.startswith(f"error: UNAVAILABLE: {secured.target}: ")
        verified = (*target, "--ca-file", str(pki.ca))
        run = cli("sessions", "list", APP, *verified)
        assert run.status == 1
        assert run.err.startswith("error: UNAUTHENTICATED UNAUTHENTICATED: ")
        assert "--token-file" in run.err
        run = cli("sessions", "list", APP, "--token", "wrong-token", *verified)
        assert run.status == 1
        assert run.err.startswith("error: UNAUTHENTICATED TOKEN_INVALID: ")
        token_file = tmp_path / "token"
        token_file.write_text("s3cret-token\n")
        listed = _ok("sessions", "list", APP, "--token-file", str(token_file), *verified)
        assert "0 sessions of shop" in listed
        monkeypatch.setenv("CONTEXTENGINE_TOKEN", "s3cret-token")
        monkeypatch.setenv("CONTEXTENGINE_TARGET", secured.target)
        assert "0 sessions of shop" in _ok("sessions", "list", APP, "--ca-file", str(pki.ca))


def test_context_options_reach_build_context(console_sidecar: Sidecar) -> None:
    """--model and --provider name the model the prompt cache's fingerprint covers."""
    target = ("--target", console_sidecar.target)
    base = ("context", APP, USER, PLAIN, "--agent", AGENT, "--json", *target)
    gemini = json.loads(_ok(*base, "--model", "gemini-2.5-flash"))
    claude = json.loads(_ok(*base, "--provider", "anthropic", "--model", "claude-sonnet-4"))
    assert [c["parts"] for c in claude["contents"]] == [c["parts"] for c in gemini["contents"]]
    assert claude["fingerprint"] != gemini["fingerprint"]
    again = json.loads(_ok(*base, "--model", "gemini-2.5-flash"))
    assert again["fingerprint"] == gemini["fingerprint"]


def test_config_set_reads_standard_input(
    console_sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('{"memory": {"max_results": 7}}'))
    stored = json.loads(
        _ok("config", "set", "stdin-app", "-f", "-", "--json", "--target", console_sidecar.target)
    )
    assert stored["app_name"] == "stdin-app"
    assert stored["memory"]["max_results"] == 7


def test_sessions_delete_asks_first(
    console_sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    run = cli("sessions", "delete", APP, USER, PLAIN, "--target", console_sidecar.target)
    assert run.status == 1
    assert "aborted" in run.err
    assert _ok("sessions", "show", APP, USER, PLAIN, "--json", "--target", console_sidecar.target)


def test_connection_options_before_the_command(
    console_sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``contextengine --target HOST sessions list`` works as the flag after the command does;
    the command's own flag wins over the one before it, and the one before it over the
    environment."""
    after = _ok("sessions", "list", APP, USER, "--json", "--target", console_sidecar.target)
    assert _ok("--target", console_sidecar.target, "sessions", "list", APP, USER, "--json") == after
    assert (
        _ok(f"--target={console_sidecar.target}", "sessions", "list", APP, USER, "--json") == after
    )
    nowhere = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("CONTEXTENGINE_TARGET", nowhere)
    assert _ok("--target", console_sidecar.target, "sessions", "list", APP, USER, "--json") == after
    argv = ("--timeout", "2", "--target", nowhere, "sessions", "list", APP, USER, "--json")
    assert _ok(*argv, "--target", console_sidecar.target) == after
    refused = cli("--timeout", "2", "--target", nowhere, "sessions", "list", APP, USER)
    assert refused.status == 1
    assert nowhere in refused.err
    config = _ok("--target", console_sidecar.target, "config", "get", APP)
    assert "app_name" in config
