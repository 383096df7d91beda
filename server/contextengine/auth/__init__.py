"""Who may call the sidecar and what they may do: the transport's edge (issue #19).

* bearer tokens (``auth_tokens_file``, ``auth_token``) granting a role (read, write, admin) on a
  set of apps and optionally users (:mod:`._tokens`);
* the one table of what each RPC touches and the role it needs (:data:`RULES`), and the check
  the handler wrapper (``contextengine.service``) runs before every RPC (:class:`Authorizer`);
* TLS and mutual TLS from PEM files, reloaded when they change (:mod:`._tls`);
* the refusal to listen on a non-loopback address without authentication, and unix socket
  permissions (:mod:`._exposure`).

The gRPC health and reflection services are not checked (probes and tools need them without a
token). See ``docs/security.md`` for the trust model.
"""

from __future__ import annotations

from contextengine.auth._authorizer import Authorizer, current_grant
from contextengine.auth._edge import Edge, build_edge, check_edge_files, check_edge_settings
from contextengine.auth._exposure import apply_socket_permissions, is_local_address, socket_umask
from contextengine.auth._rules import RULES, Rule, Target
from contextengine.auth._tokens import Grant, Role, TokenTable, hash_token, load_token_file

__all__ = [
    "RULES",
    "Authorizer",
    "Edge",
    "Grant",
    "Role",
    "Rule",
    "Target",
    "TokenTable",
    "apply_socket_permissions",
    "build_edge",
    "check_edge_files",
    "check_edge_settings",
    "current_grant",
    "hash_token",
    "is_local_address",
    "load_token_file",
    "socket_umask",
]
