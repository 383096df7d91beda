"""A summarizer that asks a Gemini model, through the google-genai async client.

The request is what google-adk 2.13's ``LlmEventSummarizer`` sends: one user content holding the
filled prompt template, nothing else (no system instruction, tools or generation config).

Failure handling:

* every attempt is limited to ``timeout_seconds`` (``asyncio.wait_for`` around the call, and the
  same limit as google-genai's HTTP timeout); google-genai's own retries are switched off;
* a timeout, a transport error, an unreadable answer or an HTTP 408 / 429 / 5xx is retried, up to
  ``max_attempts`` calls in all, sleeping ``backoff_seconds`` * 2**n (capped) in between; any
  other HTTP error (400, 401, 403, 404...) fails at once;
* an answer without a usable summary (no candidates, a blocked prompt, no content, no non-empty
  text part) raises :class:`SummarizerError` without retrying. ADK would return no summary in
  the no-content case; raising instead lets the scheduler count the failure and back off.

The API key is sent as google-genai sends it (the ``x-goog-api-key`` header) and never appears in
logs, reprs or error messages written here.

google-genai (and httpx under it) is imported on first use, not with this module: importing it
takes a second or more, and a sidecar whose apps never summarise with Gemini should not pay it
at start-up. The first summary (or managed cache) pays the import once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf import json_format

from contextengine._compat import timeout
from contextengine.compaction.summarizers.summarizer import (
    DEFAULT_PROMPT_TEMPLATE,
    SummarizerError,
    Summary,
    SummaryInput,
    fill_template,
)
from contextengine.v1 import content_pb2, event_pb2

if TYPE_CHECKING:
    from google.genai import Client, types

__all__ = ["GeminiSettings", "GeminiSummarizer"]

_log = logging.getLogger(__name__)

#: HTTP statuses worth another attempt (the rest of 4xx will fail the same way again).
_RETRYABLE_STATUS = frozenset({408, 429})

_M = TypeVar("_M", content_pb2.Content, event_pb2.UsageMetadata)


@dataclass(frozen=True)
class GeminiSettings:
    """Where and how the server reaches the Gemini API (server settings, not per-app config)."""

    #: the API key; None when none is configured (summaries then fail with SummarizerError)
    api_key: str | None = field(repr=False)
    #: overrides the endpoint (a proxy, a gateway, a local fake); None = google-genai's default
    base_url: str | None = None
    #: API version path segment; None = google-genai's default ("v1beta")
    api_version: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GeminiSettings:
        """Reads ``GOOGLE_API_KEY`` or else ``GEMINI_API_KEY`` (google-genai's precedence) and
        ``GOOGLE_GEMINI_BASE_URL``; empty values count as unset."""
        env = os.environ if environ is None else environ
        key = env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY") or None
        return cls(api_key=key, base_url=env.get("GOOGLE_GEMINI_BASE_URL") or None)

    def client(self, timeout_seconds: float) -> Client:
        """A google-genai client for these settings: the Gemini Developer API, ``timeout_seconds``
        per HTTP call, no retries of its own (callers decide), over httpx whatever else is
        installed (google-genai switches to aiohttp whenever aiohttp can be imported, which
        another package in the same environment may bring). Needs ``api_key``."""
        if not self.api_key:
            raise ValueError("no Gemini API key is configured")
        # Deferred (see the module docstring): the first client pays google-genai's import.
        import httpx
        from google.genai import Client, types

        options = types.HttpOptions(
            base_url=self.base_url,
            api_version=self.api_version,
            timeout=math.ceil(timeout_seconds * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
            # an explicit httpx transport is google-genai's sign to stay on httpx
            async_client_args={"transport": httpx.AsyncHTTPTransport()},
        )
        return Client(vertexai=False, api_key=self.api_key, http_options=options)


class GeminiSummarizer:
    """Summarizes with ``model`` through google-genai; see the module docstring for retries and
    failures. One genai client per summarizer, built on first use; call :meth:`aclose` when done."""

    def __init__(
        self,
        model: str,
        settings: GeminiSettings,
        *,
        prompt_template: str | None = None,
        timeout_seconds: float = 60.0,
        max_attempts: int = 3,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 8.0,
    ) -> None:
        if not model:
            raise ValueError("model is required")
        if not (math.isfinite(timeout_seconds) and timeout_seconds > 0):
            raise ValueError("timeout_seconds must be a finite number > 0")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.name = f"gemini:{model}"
        self.model = model
        self.prompt_template = (
            DEFAULT_PROMPT_TEMPLATE if prompt_template is None else prompt_template
        )
        self.timeout_seconds = timeout_seconds
        self.max_attempts = max_attempts
        self._settings = settings
        self._backoff = backoff_seconds
        self._max_backoff = max_backoff_seconds
        self._client: Client | None = None

    def __repr__(self) -> str:
        return f"GeminiSummarizer(model={self.model!r}, base_url={self._settings.base_url!r})"

    async def __aenter__(self) -> GeminiSummarizer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the HTTP clients (idempotent); a later summary builds a new genai client."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
            await client.aio.aclose()

    def _genai_client(self) -> Client:
        if self._client is None:
            if not self._settings.api_key:
                raise SummarizerError(
                    "no Gemini API key is configured (set GOOGLE_API_KEY or GEMINI_API_KEY)"
                )
            self._client = self._settings.client(self.timeout_seconds)
        return self._client

    async def summarize(self, request: SummaryInput) -> Summary | None:
        """The model's summary of ``request`` (None for an empty range, without a call).

        Raises:
            SummarizerError: invalid template, no API key, every attempt failed, or an answer
                without a usable summary.
        """
        if not request.events:
            return None
        prompt = fill_template(self.prompt_template, request.conversation_history)
        client = self._genai_client()
        from google.genai import types  # loaded by _genai_client (deferred, see the docstring)

        contents = [types.Content(role="user", parts=[types.Part(text=prompt)])]
        for attempt in range(1, self.max_attempts + 1):
            try:
                async with timeout(self.timeout_seconds):
                    response = await client.aio.models.generate_content(
                        model=self.model, contents=contents
                    )
            except Exception as error:
                reason = _describe(error, self.timeout_seconds)
                if not _retryable(error) or attempt == self.max_attempts:
                    raise SummarizerError(
                        f"{self.name}: attempt {attempt} of {self.max_attempts} failed: {reason}"
                    ) from error
                delay = min(self._max_backoff, self._backoff * 2 ** (attempt - 1))
                _log.warning(
                    "%s: attempt %d of %d failed (%s); retrying in %.2fs",
                    self.name,
                    attempt,
                    self.max_attempts,
                    reason,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            return _summary_of(response, self.name)
        raise AssertionError("unreachable: max_attempts >= 1")


def _retryable(error: Exception) -> bool:
    from google.genai import errors as genai_errors  # loaded by then: a client made the call

    if isinstance(error, genai_errors.APIError):
        return error.code in _RETRYABLE_STATUS or error.code >= 500
    return True


def _describe(error: Exception, timeout: float) -> str:
    import httpx  # loaded by then, with google-genai (deferred, see the module docstring)
    from google.genai import errors as genai_errors

    if isinstance(error, (TimeoutError, httpx.TimeoutException)):
        return f"no answer within {timeout:g}s"
    if isinstance(error, genai_errors.APIError):
        return f"HTTP {error.code} {error.status or ''}: {error.message or ''}".strip()
    return f"{type(error).__name__}: {error}"


def _summary_of(response: types.GenerateContentResponse, name: str) -> Summary:
    """The first candidate's content and the usage, or SummarizerError for an unusable answer."""
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        raise SummarizerError(
            f"{name}: the prompt was blocked ({_enum_name(feedback.block_reason)})"
        )
    if not response.candidates:
        raise SummarizerError(f"{name}: the answer has no candidates")
    candidate = response.candidates[0]
    finish = _enum_name(candidate.finish_reason) if candidate.finish_reason else "unknown"
    if candidate.content is None or not candidate.content.parts:
        raise SummarizerError(f"{name}: the answer has no content (finish reason {finish})")
    content = _to_proto(
        content_pb2.Content(), candidate.content.model_dump(mode="json", exclude_none=True), name
    )
    content.role = "model"
    if not any(part.text.strip() and not part.thought for part in content.parts):
        raise SummarizerError(f"{name}: the answer has no text (finish reason {finish})")
    usage = None
    if response.usage_metadata is not None:
        usage = _to_proto(
            event_pb2.UsageMetadata(),
            response.usage_metadata.model_dump(mode="json", exclude_none=True),
            name,
        )
    return Summary(content=content, usage_metadata=usage)


def _to_proto(message: _M, data: dict[str, Any], name: str) -> _M:
    """``data`` (a google-genai model dumped in JSON mode) parsed into ``message``: the protos
    mirror google-genai field for field; fields the proto does not know are dropped."""
    try:
        json_format.ParseDict(data, message, ignore_unknown_fields=True)
    except json_format.ParseError as error:
        raise SummarizerError(f"{name}: unreadable answer: {error}") from error
    return message


def _enum_name(value: object) -> str:
    return str(getattr(value, "value", value))
