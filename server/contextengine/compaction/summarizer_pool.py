"""The summarizers in use: one per distinct summarizer configuration, built on first use from
the configuration the resolver gives, and closed with the compactor."""

from __future__ import annotations

import logging

from contextengine.compaction.summarizers.summarizer import Summarizer
from contextengine.compaction.types import SummarizerFactory
from contextengine.runtime.resolver import ConfigResolver

_LOG = logging.getLogger("contextengine.compaction")

__all__ = ["SummarizerPool"]


class SummarizerPool:
    def __init__(self, resolver: ConfigResolver, factory: SummarizerFactory) -> None:
        self._resolver = resolver
        self._factory = factory
        #: by the configuration's deterministic serialisation (b"": none configured)
        self._summarizers: dict[bytes, Summarizer | None] = {}

    async def get(self, app_name: str) -> Summarizer | None:
        """The app's summarizer (None: the app takes client summaries only)."""
        config = await self._resolver.summarizer(app_name)
        key = b"" if config is None else config.SerializeToString(deterministic=True)
        if key not in self._summarizers:
            self._summarizers[key] = self._factory(config)
        return self._summarizers[key]

    async def close(self) -> None:
        """Closes the summarizers that can be closed; a failure is logged, never raised."""
        for summarizer in self._summarizers.values():
            if summarizer is None:
                continue
            close = getattr(summarizer, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # closing must not stop the shutdown
                    _LOG.exception("closing summarizer %s failed", summarizer.name)
        self._summarizers.clear()
