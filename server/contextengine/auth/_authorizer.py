"""The one check every RPC goes through when tokens are configured: who is calling (the bearer
token of the ``authorization`` metadata) and whether their grant reaches what the request
touches with the role it needs (:data:`~contextengine.auth._rules.RULES`).

Failures are :class:`ContextEngineError` s: UNAUTHENTICATED with reason UNAUTHENTICATED (no
token, or not ``Bearer <token>``) or TOKEN_INVALID (a token nobody issued), PERMISSION_DENIED
with reason PERMISSION_DENIED (another app or user, or a role too low). Neither the token nor
its digest appears in an error or a log line; the grant's name does.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Any

from contextengine.auth._rules import RULES, Rule
from contextengine.auth._tokens import Grant, TokenTable
from contextengine.core.errors import ContextEngineError

__all__ = ["Authorizer", "current_grant"]

_GRANT: contextvars.ContextVar[Grant | None] = contextvars.ContextVar(
    "contextengine_auth_grant", default=None
)
_SCHEME = "bearer "


def current_grant() -> Grant | None:
    """The grant of the RPC running in this task (None without auth): for logs and metrics."""
    return _GRANT.get()


class Authorizer:
    """Checks one RPC's caller against its request."""

    def __init__(self, tokens: TokenTable, methods: Iterable[str]) -> None:
        """``methods``: the full names of every RPC served; ValueError when one of them has no
        rule (a new RPC must be given one before it can be served with auth on)."""
        missing = sorted(m for m in methods if m not in RULES)
        if missing:
            raise ValueError(f"no authorization rule for {', '.join(missing)}")
        if not len(tokens):
            raise ValueError("no tokens configured")
        self._tokens = tokens

    def rule(self, method: str) -> Rule:
        return RULES[method]

    def check(self, method: str, request: Any, metadata: Any) -> Grant:
        """The caller's grant when it may make this request; ContextEngineError otherwise.
        ``metadata``: the call's invocation metadata ((key, value) pairs, or None)."""
        grant = self.authenticate(metadata)
        _GRANT.set(grant)
        target = RULES[method].target(request)
        if grant.role < target.role:
            raise _denied(
                f"the token {grant.name!r} has role {grant.role.name.lower()}; "
                f"{method.rsplit('.', 1)[-1]} needs {target.role.name.lower()}",
                target.app,
                target.user,
                target.role.name,
            )
        if not grant.covers_app(target.app):
            raise _denied(
                f"the token {grant.name!r} grants no access to app {target.app!r}",
                target.app,
                target.user,
                target.role.name,
            )
        if not grant.covers_user(target.user):
            what = "every user" if target.user is None else f"user {target.user!r}"
            raise _denied(
                f"the token {grant.name!r} grants no access to {what} of app {target.app!r}",
                target.app,
                target.user,
                target.role.name,
            )
        return grant

    def authenticate(self, metadata: Iterable[tuple[str, Any]] | None) -> Grant:
        """The grant of the request's bearer token."""
        values = [value for key, value in metadata or () if key == "authorization"]
        if not values:
            raise ContextEngineError(
                "UNAUTHENTICATED",
                "this sidecar requires a bearer token (metadata 'authorization: Bearer <token>')",
            )
        value = values[0]
        token = value[len(_SCHEME) :].strip() if isinstance(value, str) else ""
        if len(values) > 1 or not token or value[: len(_SCHEME)].lower() != _SCHEME:
            raise ContextEngineError(
                "UNAUTHENTICATED",
                "malformed 'authorization' metadata: expected one 'Bearer <token>'",
            )
        grant = self._tokens.lookup(token)
        if grant is None:
            raise ContextEngineError(
                "TOKEN_INVALID", "the bearer token is not known to this sidecar"
            )
        return grant


def _denied(message: str, app: str, user: str | None, role: str) -> ContextEngineError:
    metadata = {"app_name": app, "required_role": role}
    if user is not None:
        metadata["user_id"] = user
    return ContextEngineError("PERMISSION_DENIED", message, **metadata)
