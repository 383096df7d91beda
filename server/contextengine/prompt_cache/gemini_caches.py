"""Managed Gemini caches: ``cachedContents`` created and deleted through google-genai.

:class:`GeminiCaches` makes the two calls google-adk's ``GeminiContextCacheManager`` makes
(``caches.create`` with the cached contents, system instruction, tools, tool config and TTL;
``caches.delete``), with the server's Gemini API key and endpoint (the same
:class:`~contextengine.compaction.summarizers.gemini.GeminiSettings` as the Gemini summarizer). google-genai's
own retries are off and every call has a time limit: a cache is an optimisation, so a slow or
failing Gemini must never hold up a context.

:class:`ManagedCaches` applies a CREATE decision: it deletes the invalidated cache (a failure is
only logged, as in ADK), creates the new one and completes the decision, or turns it into ADK's
fingerprint-only fallback with the reason (:meth:`Decision.creation_failed`). It remembers what
it created for a (session, agent, previous metadata) until the agent records newer metadata, so
a retried BuildContext does not create a second cache; calls for one agent of one session are
serialised.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

from contextengine._compat import timeout
from contextengine.compaction.summarizers.gemini import GeminiSettings
from contextengine.core.prompt_cache import Action, Decision
from contextengine.core.telemetry import NO_TELEMETRY, Telemetry
from contextengine.runtime.locks import KeyedLocks
from contextengine.runtime.lru import BoundedLru
from contextengine.v1 import content_pb2

if TYPE_CHECKING:
    from google.genai import Client, types

__all__ = ["CacheCreationError", "CreatedCache", "GeminiCaches", "ManagedCaches"]

_LOG = logging.getLogger("contextengine.prompt_cache")

#: default time limit of one create / delete call, in seconds
DEFAULT_TIMEOUT_SECONDS = 10.0
_MEMO_SIZE = 1024


class CacheCreationError(Exception):
    """Creating a cache failed; the message says why (never holds the API key)."""


@dataclass(frozen=True)
class CreatedCache:
    name: str
    #: the server's expire time (seconds since the epoch), if it reported one
    expire_time: float | None


def to_genai_contents(contents: Sequence[content_pb2.Content]) -> list[types.Content]:
    """Proto contents as google-genai contents (through proto3 JSON, bytes as base64)."""
    # google-genai is imported on first use, not with this module (it takes a second or more);
    # the first managed cache pays the import once.
    from google.genai import types

    return [
        types.Content.model_validate_json(
            json_format.MessageToJson(content, preserving_proto_field_name=True, indent=None)
        )
        for content in contents
    ]


def _describe(error: BaseException, timeout: float) -> str:
    from google.genai import errors as genai_errors  # loaded by then: a client made the call

    if isinstance(error, TimeoutError):
        return f"no answer within {timeout:g}s"
    if isinstance(error, genai_errors.APIError):
        return f"HTTP {error.code} {error.status or ''}: {error.message or ''}".strip()
    return f"{type(error).__name__}: {error}"


class GeminiCaches:
    """google-genai's ``caches`` API with the server's settings. One client, built on first use;
    call :meth:`aclose` when done."""

    def __init__(
        self,
        settings: GeminiSettings,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        if not (math.isfinite(timeout_seconds) and timeout_seconds > 0):
            raise ValueError("timeout_seconds must be a finite number > 0")
        self._settings = settings
        #: each call runs in a ``gemini.caches.create`` / ``.delete`` span (``core.telemetry``)
        self._telemetry = telemetry
        self.timeout_seconds = timeout_seconds
        self._client: Client | None = None

    def __repr__(self) -> str:
        return f"GeminiCaches(base_url={self._settings.base_url!r})"

    def _genai_client(self) -> Client:
        if self._client is None:
            if not self._settings.api_key:
                raise CacheCreationError(
                    "no Gemini API key is configured (set GOOGLE_API_KEY or GEMINI_API_KEY)"
                )
            self._client = self._settings.client(self.timeout_seconds)
        return self._client

    async def create(
        self,
        *,
        model: str,
        contents: Sequence[content_pb2.Content],
        system_instruction: types.Content | None,
        tools: Sequence[types.Tool],
        tool_config: types.ToolConfig | None,
        ttl_seconds: int,
        display_name: str,
    ) -> CreatedCache:
        """Creates a cache; raises :class:`CacheCreationError` on any failure."""
        from google.genai import types  # deferred, see to_genai_contents

        config = types.CreateCachedContentConfig(
            contents=to_genai_contents(contents) or None,
            ttl=f"{ttl_seconds}s",
            display_name=display_name,
            system_instruction=system_instruction,
            tools=list(tools) or None,
            tool_config=tool_config,
        )
        client = self._genai_client()
        try:
            with self._telemetry.span("gemini.caches.create", {"gemini.model": model}):
                async with timeout(self.timeout_seconds):
                    cached = await client.aio.caches.create(model=model, config=config)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            raise CacheCreationError(_describe(error, self.timeout_seconds)) from error
        if not cached.name:
            raise CacheCreationError("the cache service returned no cache name")
        expire = cached.expire_time.timestamp() if cached.expire_time is not None else None
        return CreatedCache(cached.name, expire)

    async def delete(self, name: str) -> bool:
        """Deletes a cache; False (logged) when that fails."""
        try:
            client = self._genai_client()
            with self._telemetry.span("gemini.caches.delete"):
                async with timeout(self.timeout_seconds):
                    await client.aio.caches.delete(name=name)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            _LOG.warning(
                "could not delete Gemini cache %s: %s", name, _describe(error, self.timeout_seconds)
            )
            return False
        return True

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
            await client.aio.aclose()


@dataclass(frozen=True)
class CacheRequest:
    """What a cache needs besides the contents (from the BuildContext request)."""

    model: str
    system_instruction: types.Content | None
    tools: tuple[types.Tool, ...]
    tool_config: types.ToolConfig | None
    ttl_seconds: int


class ManagedCaches:
    """Applies decisions for apps with ``managed_gemini_caches``."""

    def __init__(
        self,
        caches: GeminiCaches | None,
        *,
        clock: Callable[[], float],
        memo_size: int = _MEMO_SIZE,
    ) -> None:
        self._caches = caches
        self._clock = clock
        self._locks: KeyedLocks[Any] = KeyedLocks()
        self._memo: BoundedLru[Any, Decision] = BoundedLru(memo_size)
        self._deleted: BoundedLru[str, None] = BoundedLru(memo_size)

    def lock(self, owner: Any) -> AbstractAsyncContextManager[None]:
        """Serialises the decisions of one (session, agent); the lock is kept only while in use
        or awaited."""
        return self._locks.hold(owner)

    async def apply(
        self,
        owner: Any,
        based_on: Any,
        decision: Decision,
        contents: Sequence[content_pb2.Content],
        request: CacheRequest,
    ) -> Decision:
        """The decision after acting on it. ``based_on`` identifies the agent's metadata the
        decision was made from (a repeated request from the same state gets the same cache)."""
        if decision.action is not Action.CREATE:
            if decision.invalidated_cache_name:
                await self._delete(decision.invalidated_cache_name)
            return decision
        key = (owner, based_on, decision.metadata.fingerprint, decision.metadata.contents_count)
        remembered = self._memo.get(key)
        if remembered is not None:
            expire = remembered.metadata.expire_time
            if remembered.action is Action.CREATE and expire is not None and expire > self._clock():
                return remembered
        if decision.invalidated_cache_name:
            await self._delete(decision.invalidated_cache_name)
        count = decision.metadata.contents_count
        if self._caches is None:
            return decision.creation_failed("managed Gemini caches are not available")
        try:
            created = await self._caches.create(
                model=request.model,
                contents=contents[:count],
                system_instruction=request.system_instruction,
                tools=request.tools,
                tool_config=request.tool_config,
                ttl_seconds=request.ttl_seconds,
                display_name=f"contextengine-{int(self._clock())}-{count}contents",
            )
        except CacheCreationError as error:
            _LOG.warning("Gemini cache creation failed, fingerprint only: %s", error)
            return decision.creation_failed(f"cache creation failed: {error}")
        created_at = self._clock()
        expire = (
            created.expire_time
            if created.expire_time is not None
            else created_at + request.ttl_seconds
        )
        done = decision.created(created.name, expire, created_at)
        self._memo.put(key, done)
        return done

    async def _delete(self, name: str) -> None:
        if self._caches is not None and name not in self._deleted:
            self._deleted.put(name, None)
            await self._caches.delete(name)

    async def aclose(self) -> None:
        if self._caches is not None:
            await self._caches.aclose()
