"""The read-only session inspector in the browser (issue #21): a page served by the sidecar on
its operations port (``--inspector`` with ``--ops-listen``) that shows apps, users and sessions,
a session's event log as a timeline, the context a chosen agent would get beside it, the
context's token size over the session's life, and updates live (server-sent events).

:class:`Inspector` handles the requests (``routes``: auth, JSON errors, security headers),
``api`` computes the views from the engine, ``sse`` turns the engine's subscription stream into
server-sent events, and ``static/`` holds the page (plain HTML, CSS and JavaScript, no build
step). See ``docs/design/inspector.md``.
"""

from __future__ import annotations

from contextengine.inspector.api import ContextQuery, InspectorApi
from contextengine.inspector.routes import PREFIX, Inspector

__all__ = ["PREFIX", "ContextQuery", "Inspector", "InspectorApi"]
