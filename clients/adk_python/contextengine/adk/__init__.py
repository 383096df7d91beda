"""google-adk drop-ins backed by contextengine (the ``contextengine-adk`` distribution).

An ADK Python agent adopts the engine by swapping objects, against a sidecar (``target=``) or
the engine embedded in process (``db=``, a SQLite file or ``:memory:``), with one behaviour::

    sessions = ContextEngineSessionService(target="127.0.0.1:50151")
    sessions = ContextEngineSessionService(db="agent.db")

``backend=`` shares one backend (:func:`sidecar_backend` / :func:`embedded_backend`) between the
drop-ins. Errors of the engine are :class:`contextengine.client.ContextEngineError` (code and
ErrorInfo reason) in both modes, mapped to ADK's own exceptions where ADK's services raise one.
"""

from __future__ import annotations

from contextengine.adk._backend import Backend
from contextengine.adk._context_tools import ContextEngineContextTools
from contextengine.adk._embedded import EmbeddedBackend, embedded_backend
from contextengine.adk._memory import ContextEngineMemoryService
from contextengine.adk._plugin import ContextEnginePlugin
from contextengine.adk._sessions import ContextEngineSessionService
from contextengine.adk._sidecar import SidecarBackend, sidecar_backend

__all__ = [
    "Backend",
    "ContextEngineContextTools",
    "ContextEngineMemoryService",
    "ContextEnginePlugin",
    "ContextEngineSessionService",
    "EmbeddedBackend",
    "SidecarBackend",
    "embedded_backend",
    "sidecar_backend",
]
