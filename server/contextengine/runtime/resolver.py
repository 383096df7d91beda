"""The configuration in effect, resolved in one place.

Several parts of the engine need the same answers: the context builder and the compactor the
other-agent preamble, the compactor and the cache-aware policy the compaction configuration of a
session (its own ``SessionConfig`` if it sets one, else its app's), the compactor and the
client-summary RPCs the summarizer configuration and its prompt template. :class:`ConfigResolver`
gives those answers over the two configuration caches, so the defaults and the precedence are
written once. It resolves configuration only: the summarizer *object* is built in compaction/
from :meth:`ConfigResolver.summarizer`.
"""

from __future__ import annotations

from contextengine.core.context import DEFAULT_OTHER_AGENT_PREAMBLE
from contextengine.core.errors import ContextEngineError
from contextengine.runtime.app_configs import AppConfigs
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.store import SessionKey
from contextengine.v1 import config_pb2

__all__ = ["ConfigResolver"]


class ConfigResolver:
    """Resolves apps' and sessions' configuration (reads through the caches, never writes)."""

    def __init__(self, app_configs: AppConfigs, session_configs: SessionConfigs) -> None:
        self._apps = app_configs
        self._sessions = session_configs

    async def app(self, app_name: str) -> config_pb2.AppConfig | None:
        """The app's stored configuration (None if never set). Treat it as read-only."""
        return await self._apps.get(app_name)

    async def preamble(self, app_name: str) -> str:
        """The app's ``other_agent_preamble``, else ADK's default."""
        app = await self._apps.get(app_name)
        if app is not None and app.HasField("other_agent_preamble"):
            return app.other_agent_preamble
        return DEFAULT_OTHER_AGENT_PREAMBLE

    async def _own(self, key: SessionKey) -> config_pb2.SessionConfig | None:
        """The session's own configuration; None for a session that does not exist."""
        try:
            return await self._sessions.get(key)
        except ContextEngineError as error:
            if error.reason != "SESSION_NOT_FOUND":
                raise
            return None

    async def compaction(self, key: SessionKey) -> config_pb2.EventsCompactionConfig | None:
        """The compaction configuration in effect for the session: its own, else its app's; None:
        the session is not compacted. Also answers for a session that does not exist (callers
        report that themselves)."""
        own = await self._own(key)
        if own is not None and own.HasField("events_compaction_config"):
            return own.events_compaction_config
        app = await self._apps.get(key.app_name)
        if app is None or not app.HasField("events_compaction_config"):
            return None
        return app.events_compaction_config

    async def context_tools(self, key: SessionKey) -> config_pb2.ContextToolsConfig:
        """The context tools' configuration in effect for the session: its own, else its app's,
        else the default (off)."""
        own = await self._own(key)
        if own is not None and own.HasField("context_tools"):
            return own.context_tools
        app = await self._apps.get(key.app_name)
        if app is None or not app.HasField("context_tools"):
            return config_pb2.ContextToolsConfig()
        return app.context_tools

    async def summarizer(self, app_name: str) -> config_pb2.SummarizerConfig | None:
        """The app's summarizer configuration (None: not set, the default summarizer applies)."""
        app = await self._apps.get(app_name)
        return app.summarizer if app is not None and app.HasField("summarizer") else None

    async def prompt_template(self, app_name: str) -> str | None:
        """The app's Gemini summarizer prompt template, if it configures one."""
        app = await self._apps.get(app_name)
        if app is None or not app.summarizer.HasField("gemini"):
            return None
        gemini = app.summarizer.gemini
        return gemini.prompt_template if gemini.HasField("prompt_template") else None
