"""The context engine in process: one :class:`Engine` over the store, the runtime state,
compaction, prompt caching, memory and subscriptions, made by :func:`open_engine`.

The sidecar (``contextengine.transport``) serves exactly this object over gRPC; a Python program can
use it directly, with the same semantics and the same errors (:class:`ContextEngineError`, whose
``reason`` is the ErrorInfo reason a gRPC caller would get)::

    async with await open_engine(EngineSettings(db="agent.db")) as engine:
        created = await engine.create_session(CreateSessionRequest(app_name="app", user_id="u"))
"""

from __future__ import annotations

from contextengine.core.errors import ContextEngineError
from contextengine.engine._context import ContextResult
from contextengine.engine._engine import Engine
from contextengine.engine._open import open_engine
from contextengine.engine._settings import DEFAULT_DB, MEMORY_DB, EngineSettings
from contextengine.engine._subscriptions import Stream

__all__ = [
    "DEFAULT_DB",
    "MEMORY_DB",
    "ContextEngineError",
    "ContextResult",
    "Engine",
    "EngineSettings",
    "Stream",
    "open_engine",
]
