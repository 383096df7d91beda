"""The one table of what every RPC touches and the role it needs.

Each entry names, for one RPC (by its method's full name), the role it needs and where in its
request the app and user it touches are. ``user`` None means the RPC reaches every user of the
app (an app-wide listing or subscription) or only the app itself (its configuration). A test
derives the RPCs from the service descriptors and fails when one has no entry here, and the
authorizer refuses to start with a service it has no entry for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from contextengine.auth._tokens import Role
from contextengine.v1 import subscription_service_pb2

__all__ = ["RULES", "Rule", "Target"]


@dataclass(frozen=True)
class Target:
    """What one request touches."""

    app: str
    #: the user, or None for every user of the app (or the app's own configuration)
    user: str | None
    #: the role this request needs (a rule's role, raised for some requests)
    role: Role


@dataclass(frozen=True)
class Rule:
    """How to find an RPC's target in its request."""

    role: Role
    #: (request) -> (app, user or None)
    where: Callable[[Any], tuple[str, str | None]]
    #: (request) -> True when this request needs admin (it sets a configuration)
    admin_if: Callable[[Any], bool] | None = None

    def target(self, request: Any) -> Target:
        app, user = self.where(request)
        role = Role.ADMIN if self.admin_if is not None and self.admin_if(request) else self.role
        return Target(app, user, role)


def _user(request: Any) -> tuple[str, str | None]:
    return request.app_name, request.user_id


def _app(request: Any) -> tuple[str, str | None]:
    return request.app_name, None


def _listing(request: Any) -> tuple[str, str | None]:
    # ListSessions: an empty user_id lists every user's sessions of the app.
    return request.app_name, request.user_id or None


def _app_config(request: Any) -> tuple[str, str | None]:
    return request.config.app_name, None


_APP_SCOPE = subscription_service_pb2.SUBSCRIPTION_SCOPE_APP


def _subscription(request: Any) -> tuple[str, str | None]:
    # App scope streams every user's sessions of the app; user and session scopes one user's.
    if request.scope == _APP_SCOPE:
        return request.app_name, None
    return request.app_name, request.user_id


def _has_config(request: Any) -> bool:
    return bool(request.HasField("config"))


_S = "contextengine.v1.SessionService."
_C = "contextengine.v1.ContextService."
_SUB = "contextengine.v1.SubscriptionService."
_COMP = "contextengine.v1.CompactionService."
_MEM = "contextengine.v1.MemoryService."
_TOOLS = "contextengine.v1.ContextToolsService."

R, W, A = Role.READ, Role.WRITE, Role.ADMIN

#: every RPC of the engine's services (the method descriptor's full name,
#: ``contextengine.v1.Service.Method``) -> its rule
RULES: Mapping[str, Rule] = {
    # A session created with its own configuration sets a compaction configuration: admin.
    _S + "CreateSession": Rule(W, _user, admin_if=_has_config),
    _S + "GetSession": Rule(R, _user),
    _S + "ListSessions": Rule(R, _listing),
    _S + "DeleteSession": Rule(W, _user),
    _S + "AppendEvent": Rule(W, _user),
    _S + "AppendEvents": Rule(W, _user),
    _S + "ListEvents": Rule(R, _user),
    _S + "RewindSession": Rule(W, _user),
    _S + "GetUserState": Rule(R, _user),
    _S + "GetAppConfig": Rule(R, _app),
    _S + "UpdateAppConfig": Rule(A, _app_config),
    _S + "GetSessionConfig": Rule(R, _user),
    _S + "UpdateSessionConfig": Rule(A, _user),
    _C + "BuildContext": Rule(R, _user),
    _SUB + "SubscribeEvents": Rule(R, _subscription),
    _SUB + "WatchSessionState": Rule(R, _user),
    _COMP + "EndInvocation": Rule(W, _user),
    _COMP + "Compact": Rule(W, _user),
    _COMP + "PlanCompaction": Rule(R, _user),
    _COMP + "CommitCompaction": Rule(W, _user),
    _COMP + "ExpandSummary": Rule(R, _user),
    _COMP + "GetCompactionStatus": Rule(R, _user),
    # the same declarations for every app; a token restricted to a user names it
    _TOOLS + "ListContextTools": Rule(R, _listing),
    # a call may append a summary (context_summarize)
    _TOOLS + "CallContextTool": Rule(W, _user),
    _MEM + "AddSessionToMemory": Rule(W, _user),
    _MEM + "AddEventsToMemory": Rule(W, _user),
    _MEM + "SearchMemory": Rule(R, _user),
    _MEM + "DeleteMemory": Rule(A, _user),
}
