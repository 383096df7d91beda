"""The reference side of the cache-decision parity tests: google-adk 2.13's own code.

:func:`adk_cache_step` does what ADK does around one Gemini model call of an agent:

1. ``ContextCacheRequestProcessor._find_cache_info_from_events`` over the session's events (the
   newest cache metadata of the agent, ``invocations_used`` incremented for a new invocation, and
   its newest prompt token count);
2. ``Gemini._maybe_append_user_content`` (the model class's own addition, before caching);
3. ``GeminiContextCacheManager.handle_context_caching`` with a fake genai client whose
   ``aio.caches.create`` / ``delete`` are recorded (and can fail), and with the manager module's
   clock replaced by the simulation's.

It reports what ADK did (:class:`AdkStep`): the metadata it returned, whether it created a cache
(and with how many contents), which cache it deleted and how many leading contents it left out
of the request. Nothing here is copied from ADK; it only calls ADK.
"""

from __future__ import annotations

import contextlib
import datetime
import types as pytypes
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from google.adk.agents.context_cache_config import ContextCacheConfig
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context._cache import ContextCacheRequestProcessor
from google.adk.models import gemini_context_cache_manager as manager_module
from google.adk.models.cache_metadata import CacheMetadata
from google.adk.models.gemini_context_cache_manager import GeminiContextCacheManager
from google.adk.models.google_llm import Gemini
from google.adk.models.llm_request import LlmRequest
from google.genai import types

__all__ = ["AdkStep", "FakeCaches", "adk_cache_step", "adk_clock"]


@dataclass
class FakeCaches:
    """What ``genai_client.aio.caches`` does: creates named caches (or fails when told to) and
    records deletions."""

    #: the next create fails with this exception (then the flag is cleared)
    fail_next: Exception | None = None
    #: expire time the next created cache reports (None: the server reports none)
    server_expire_time: float | None = None
    created: list[tuple[str, int]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    _counter: int = 0

    def next_name(self) -> str:
        return f"cachedContents/c{self._counter + 1}"

    async def create(self, *, model: str, config: types.CreateCachedContentConfig) -> Any:
        failure, self.fail_next = self.fail_next, None
        if failure is not None:
            raise failure
        self._counter += 1
        name = f"cachedContents/c{self._counter}"
        contents = config.contents or []
        assert isinstance(contents, list)  # ADK caches a slice of the request's contents
        self.created.append((name, len(contents)))
        expire = None
        if self.server_expire_time is not None:
            expire = datetime.datetime.fromtimestamp(self.server_expire_time, datetime.UTC)
        return types.CachedContent(name=name, model=model, expire_time=expire)

    async def delete(self, *, name: str) -> None:
        self.deleted.append(name)


class _FakeClient:
    vertexai = False

    def __init__(self, caches: FakeCaches) -> None:
        self.aio = pytypes.SimpleNamespace(caches=caches)


@contextlib.contextmanager
def adk_clock(now: float) -> Iterator[None]:
    """Replaces the cache manager module's clock (``time.time()``) with ``now``."""
    with mock.patch.object(manager_module, "time", pytypes.SimpleNamespace(time=lambda: now)):
        yield


@dataclass(frozen=True)
class AdkStep:
    metadata: CacheMetadata | None
    #: contents in the created cache (None: no cache created)
    created_contents: int | None
    deleted: tuple[str, ...]
    #: leading contents left out of the request (0 without a cache)
    dropped: int
    #: the request's contents after the model class's addition, before the cache was applied
    request_length: int


async def adk_cache_step(
    events: Sequence[Event],
    contents: Sequence[types.Content],
    *,
    agent_name: str,
    invocation_id: str,
    model: str,
    system_instruction: str | None,
    tools: Sequence[types.Tool],
    tool_config: types.ToolConfig | None,
    config: ContextCacheConfig,
    caches: FakeCaches,
    now: float,
) -> AdkStep:
    """One model call's cache handling by ADK (``events`` is the session so far)."""
    context = pytypes.SimpleNamespace(session=pytypes.SimpleNamespace(events=list(events)))
    metadata, previous = ContextCacheRequestProcessor()._find_cache_info_from_events(
        context,  # type: ignore[arg-type]
        agent_name,
        invocation_id,
    )
    request = LlmRequest(
        model=model,
        contents=[content.model_copy(deep=True) for content in contents],
        config=types.GenerateContentConfig(
            system_instruction=system_instruction,
            tools=list(tools) or None,
            tool_config=tool_config,
        ),
    )
    request.cache_config = config
    request.cache_metadata = metadata
    request.cacheable_contents_token_count = previous
    Gemini(model=model)._maybe_append_user_content(request)
    length = len(request.contents)
    created_before = len(caches.created)
    deleted_before = len(caches.deleted)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
        manager = GeminiContextCacheManager(_FakeClient(caches))  # type: ignore[arg-type]
        with adk_clock(now):
            result = await manager.handle_context_caching(request)
    created = caches.created[created_before:]
    return AdkStep(
        metadata=result,
        created_contents=created[0][1] if created else None,
        deleted=tuple(caches.deleted[deleted_before:]),
        dropped=length - len(request.contents),
        request_length=length,
    )
