"""Token files: TOML, YAML and JSON, hashed or plain tokens, globs and users, and errors that
name the file, the entry and the problem (never the token)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from contextengine.auth import Grant, Role, TokenTable, hash_token, load_token_file

pytestmark = pytest.mark.service

DIGEST = hash_token("tok-1")

TOML = f"""
[[tokens]]
name = "agent"
sha256 = "{DIGEST}"
role = "write"
apps = ["billing", "support-*"]

[[tokens]]
name = "alice"
token = "plain-token"
role = "read"
apps = "*"
users = ["alice", "team-?"]
"""

YAML = f"""
tokens:
  - name: agent
    sha256: "{DIGEST}"
    role: write
    apps: [billing, "support-*"]
  - name: alice
    token: plain-token
    role: read
    apps: "*"
    users: [alice, "team-?"]
"""

JSON = f"""{{"tokens": [
  {{"name": "agent", "sha256": "{DIGEST}", "role": "write", "apps": ["billing", "support-*"]}},
  {{"name": "alice", "token": "plain-token", "role": "read", "apps": "*",
    "users": ["alice", "team-?"]}}
]}}"""


def test_hash_token_is_the_hex_sha256() -> None:
    assert hashlib.sha256(b"tok-1").hexdigest() == DIGEST
    for bad in ("", "has space", "tab\t", "caf\u00e9"):
        with pytest.raises(ValueError, match="printable ASCII"):
            hash_token(bad)


@pytest.mark.parametrize(("suffix", "text"), [(".toml", TOML), (".yaml", YAML), (".json", JSON)])
def test_the_three_formats_load_the_same_grants(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"tokens{suffix}"
    path.write_text(text)
    grants = load_token_file(path)
    assert grants == {
        DIGEST: Grant("agent", Role.WRITE, ("billing", "support-*")),
        hash_token("plain-token"): Grant("alice", Role.READ, ("*",), ("alice", "team-?")),
    }
    table = TokenTable(grants)
    agent = table.lookup("tok-1")
    assert agent is not None
    assert agent.covers_app("billing")
    assert agent.covers_app("support-eu")
    assert not agent.covers_app("billing2")
    assert not agent.covers_app("support")
    assert agent.covers_user(None)  # no user restriction: every user, app-wide RPCs too
    alice = table.lookup("plain-token")
    assert alice is not None
    assert alice.covers_user("alice")
    assert alice.covers_user("team-1")
    assert not alice.covers_user("bob")
    assert not alice.covers_user(None)
    assert table.lookup("tok-2") is None
    assert table.lookup("") is None


BAD_FILES = [
    ("tokens.txt", "x", "must end in .toml"),
    ("t.toml", "tokens = [", "not valid TOML"),
    ("t.yaml", "tokens: [", "not valid YAML"),
    ("t.json", "{", "not valid JSON"),
    ("t.json", "[]", "expected a list 'tokens'"),
    ("t.json", '{"tokens": {}}', "expected a list 'tokens'"),
    ("t.json", '{"tokens": [1]}', r"tokens\[0\]: expected a table"),
    ("t.json", '{"tokens": [{"role": "read", "apps": ["a"]}]}', "exactly one of 'sha256'"),
    (
        "t.json",
        '{"tokens": [{"token": "a-token", "sha256": "'
        + DIGEST
        + '", "role": "read", "apps": ["a"]}]}',
        "exactly one of 'sha256'",
    ),
    ("t.json", '{"tokens": [{"sha256": "abc", "role": "read", "apps": ["a"]}]}', "64 hexadecimal"),
    (
        "t.json",
        '{"tokens": [{"token": "a-token", "role": "owner", "apps": ["a"]}]}',
        "unknown role",
    ),
    ("t.json", '{"tokens": [{"token": "a-token", "apps": ["a"]}]}', "'role' is required"),
    ("t.json", '{"tokens": [{"token": "a-token", "role": "read"}]}', "'apps' is required"),
    ("t.json", '{"tokens": [{"token": "a-token", "role": "read", "apps": []}]}', "non-empty list"),
    (
        "t.json",
        '{"tokens": [{"token": "a-token", "role": "read", "apps": ["a"], "app": "b"}]}',
        "unknown keys",
    ),
    (
        "t.json",
        '{"tokens": [{"token": "a-token", "role": "read", "apps": ["a"]},'
        ' {"token": "a-token", "role": "admin", "apps": ["*"]}]}',
        r"tokens\[1\]: the same token as 'tokens\[0\]'",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_FILES)
def test_a_bad_file_names_the_problem(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as caught:
        load_token_file(path)
    assert "auth_tokens_file" in str(caught.value)
    assert "a-token" not in str(caught.value)


def test_a_missing_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"auth_tokens_file .* cannot be read"):
        TokenTable.from_settings(str(tmp_path / "none.toml"), "")


def test_the_settings_token_joins_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(TOML)
    table = TokenTable.from_settings(str(path), "env-token")
    assert len(table) == 3
    assert table.lookup("env-token") == Grant("auth_token", Role.ADMIN, ("*",))
    with pytest.raises(ValueError, match="auth_token: "):
        TokenTable.from_settings("", "with space")


async def test_the_token_file_is_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokens added to or removed from the file take effect without a restart; a file that no
    longer loads keeps the previous tokens."""
    from contextengine.auth import _tokens
    from contextengine.client import ContextEngineClient, ContextEngineError
    from contextengine.settings import ServerSettings
    from contextengine.testing import start_local_server
    from tests.auth.helpers import Token, write_tokens

    monkeypatch.setattr(_tokens, "RELOAD_SECONDS", 0.0)
    path = write_tokens(tmp_path / "tokens.json", {"old": Token("old-token", "write", ["a"])})

    async def reason(srv_target: str, token: str) -> str:
        async with ContextEngineClient(srv_target, attempts=1, token=token) as client:
            try:
                await client.get_user_state("a", "u")
            except ContextEngineError as error:
                return error.reason
            return "OK"

    settings = ServerSettings(auth_tokens_file=str(path), auth_token="settings-token")
    async with start_local_server(settings=settings) as srv:
        assert await reason(srv.target, "old-token") == "OK"
        assert await reason(srv.target, "new-token") == "TOKEN_INVALID"
        write_tokens(path, {"new": Token("new-token", "read", ["a"])})
        assert await reason(srv.target, "new-token") == "OK"
        assert await reason(srv.target, "old-token") == "TOKEN_INVALID"
        assert await reason(srv.target, "settings-token") == "OK"  # auth_token stays
        path.write_text('{"tokens": [')  # half written
        assert await reason(srv.target, "new-token") == "OK"
