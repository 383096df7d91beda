"""Every role against every RPC, and every RPC across tenants, through a real server with
tokens on: a role below what the RPC needs, another app, another user, or every user of an app
with a user-restricted grant is PERMISSION_DENIED; everything else gets past the check.

The expected roles are the brief's (``helpers.EXPECTED_ROLE``), not read from the server's
table, so a wrong entry in ``contextengine.auth.RULES`` fails here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from contextengine.auth import RULES
from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.settings import ServerSettings
from contextengine.testing import start_local_server
from contextengine.transport import ContextEngineServer
from contextengine.v1 import subscription_service_pb2 as spb
from tests.auth.helpers import (
    EXPECTED_ROLE,
    RANK,
    ROLES,
    Outcome,
    Token,
    call,
    methods,
    request,
    short,
    write_tokens,
)
from tests.service.helpers import text_event

pytestmark = pytest.mark.service

TOKENS = {
    "reader": Token("tok-read-a", "read", ["a"]),
    "writer": Token("tok-write-a", "write", ["a"]),
    "admin": Token("tok-admin-a", "admin", ["a"]),
    # admin on app a, but only for user u
    "alice-only": Token("tok-admin-a-u", "admin", ["a"], users=["u"]),
    # admin on apps matching team-*
    "teams": Token("tok-admin-teams", "admin", ["team-*"]),
    "root": Token("tok-root", "admin", ["*"]),
}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ContextEngineServer]:
    tokens = write_tokens(tmp_path / "tokens.json", TOKENS)
    settings = ServerSettings(auth_tokens_file=str(tokens))
    async with start_local_server(settings=settings) as srv:
        # one session with an event in each app the tests touch, so that allowed streams
        # deliver a first message at once
        async with ContextEngineClient(srv.target, attempts=1, token="tok-root") as root:
            for app, user in (("a", "u"), ("a", "v"), ("b", "u"), ("team-x", "u")):
                await root.create_session(app, user, session_id="s1")
                await root.append_event(app, user, "s1", text_event("hello"))
        yield srv


@pytest.fixture
async def channel(server: ContextEngineServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(server.target) as chan:
        yield chan


def test_every_rpc_has_exactly_one_rule() -> None:
    """The table is derived from the service descriptors: a new RPC without an entry fails."""
    served = {m.full_name for m in methods()}
    assert served == set(RULES), {
        "without a rule": sorted(served - set(RULES)),
        "rules of no RPC": sorted(set(RULES) - served),
    }
    assert {short(m) for m in methods()} == set(EXPECTED_ROLE)


def test_an_rpc_without_a_rule_refuses_to_start() -> None:
    from contextengine.auth import Authorizer, TokenTable

    with pytest.raises(ValueError, match=r"no authorization rule for .*NewService\.Rpc"):
        Authorizer(TokenTable.from_settings("", "x" * 20), ["x.v1.NewService.Rpc", *RULES])


def _mismatch(name: str, outcome: Outcome, want_denied: bool) -> str | None:
    if want_denied and (outcome.code, outcome.reason) != (
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
    ):
        return f"{name}: expected PERMISSION_DENIED, got {outcome}"
    if not want_denied and outcome.denied:
        return f"{name}: expected to pass the check, got {outcome}"
    return None


@pytest.mark.parametrize("role", ROLES)
async def test_each_role_against_every_rpc(channel: grpc.aio.Channel, role: str) -> None:
    token = {"read": "tok-read-a", "write": "tok-write-a", "admin": "tok-admin-a"}[role]
    problems = []
    for method in methods():
        name = short(method)
        needed = EXPECTED_ROLE[name]
        outcome = await call(channel, method, request(method, "a", "u"), token)
        problem = _mismatch(name, outcome, RANK[role] < RANK[needed])
        if problem:
            problems.append(problem)
    assert not problems, "\n".join(problems)


async def test_creating_a_session_with_its_own_configuration_needs_admin(
    channel: grpc.aio.Channel,
) -> None:
    [create] = [m for m in methods() if m.name == "CreateSession"]
    body = request(create, "a", "u", "s-configured")
    body.config.SetInParent()  # type: ignore[attr-defined]
    writer = await call(channel, create, body, "tok-write-a")
    assert (writer.code, writer.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    admin = await call(channel, create, body, "tok-admin-a")
    assert admin.code == grpc.StatusCode.OK


async def test_another_app_is_denied_on_every_rpc(channel: grpc.aio.Channel) -> None:
    problems = []
    for method in methods():
        outcome = await call(channel, method, request(method, "b", "u"), "tok-admin-a")
        problems.append(_mismatch(short(method), outcome, want_denied=True))
        # app-wide stream of app b
        if method.name == "SubscribeEvents":
            for scope in (spb.SUBSCRIPTION_SCOPE_USER, spb.SUBSCRIPTION_SCOPE_APP):
                body = request(method, "b", "u", scope=scope)
                outcome = await call(channel, method, body, "tok-admin-a")
                problems.append(_mismatch(f"SubscribeEvents scope {scope}", outcome, True))
    found = [p for p in problems if p]
    assert not found, "\n".join(found)


async def test_a_glob_grant_reaches_only_the_apps_it_matches(channel: grpc.aio.Channel) -> None:
    problems = []
    for method in methods():
        inside = await call(channel, method, request(method, "team-x", "u"), "tok-admin-teams")
        problems.append(_mismatch(f"{short(method)} team-x", inside, want_denied=False))
        outside = await call(channel, method, request(method, "a", "u"), "tok-admin-teams")
        problems.append(_mismatch(f"{short(method)} a", outside, want_denied=True))
    found = [p for p in problems if p]
    assert not found, "\n".join(found)


#: RPCs whose request reaches every user of the app (or the app's own configuration), and so
#: need a grant without a user restriction: (method name, scope of SubscribeEvents)
APP_WIDE = {"GetAppConfig", "UpdateAppConfig"}


async def test_a_user_restricted_grant_reaches_only_its_user(channel: grpc.aio.Channel) -> None:
    problems = []
    for method in methods():
        name = short(method)
        own = await call(channel, method, request(method, "a", "u"), "tok-admin-a-u")
        problems.append(_mismatch(f"{name} own user", own, want_denied=method.name in APP_WIDE))
        other = await call(channel, method, request(method, "a", "v"), "tok-admin-a-u")
        problems.append(_mismatch(f"{name} other user", other, want_denied=True))
    [listing] = [m for m in methods() if m.name == "ListSessions"]
    every_user = await call(channel, listing, request(listing, "a", ""), "tok-admin-a-u")
    problems.append(_mismatch("ListSessions of every user", every_user, want_denied=True))
    [subscribe] = [m for m in methods() if m.name == "SubscribeEvents"]
    for scope, denied in (
        (spb.SUBSCRIPTION_SCOPE_USER, False),
        (spb.SUBSCRIPTION_SCOPE_APP, True),
    ):
        body = request(subscribe, "a", "u", scope=scope)
        outcome = await call(channel, subscribe, body, "tok-admin-a-u")
        problems.append(_mismatch(f"SubscribeEvents scope {scope} of user u", outcome, denied))
    other_user_stream = request(subscribe, "a", "v", scope=spb.SUBSCRIPTION_SCOPE_USER)
    outcome = await call(channel, subscribe, other_user_stream, "tok-admin-a-u")
    problems.append(_mismatch("SubscribeEvents user scope of user v", outcome, True))
    found = [p for p in problems if p]
    assert not found, "\n".join(found)


async def test_app_and_user_scope_streams_are_allowed_with_a_full_grant(
    channel: grpc.aio.Channel,
) -> None:
    [subscribe] = [m for m in methods() if m.name == "SubscribeEvents"]
    for scope in (spb.SUBSCRIPTION_SCOPE_USER, spb.SUBSCRIPTION_SCOPE_APP):
        outcome = await call(
            channel, subscribe, request(subscribe, "a", "u", scope=scope), "tok-read-a"
        )
        assert outcome.code == grpc.StatusCode.OK, (scope, outcome)


async def test_the_denial_names_what_was_needed(server: ContextEngineServer) -> None:
    async with ContextEngineClient(server.target, attempts=1, token="tok-read-a") as reader:
        with pytest.raises(ContextEngineError) as caught:
            await reader.delete_session("a", "u", "s1")
    error = caught.value
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason == "PERMISSION_DENIED"
    assert error.metadata == {
        "app_name": "a",
        "user_id": "u",
        "required_role": "WRITE",
    }
    assert "'reader'" in str(error)
    assert "tok-read-a" not in str(error)
