"""From a ``SummarizerConfig`` to a summarizer, and the rules such a config must satisfy.

* unset or ``extractive`` -> :class:`ExtractiveSummarizer` (``max_chars`` default 2000);
* ``gemini`` -> :class:`GeminiSummarizer` (defaults: the engine's prompt, 60 s, 3 attempts),
  reaching the API with the server's :class:`GeminiSettings`;
* ``client`` -> None: the engine never summarises by itself.

Nothing is cached here: every call builds a new summarizer (the caller owns and closes it).
"""

from __future__ import annotations

import math
import string

from contextengine.compaction.summarizers.extractive import ExtractiveSummarizer
from contextengine.compaction.summarizers.gemini import GeminiSettings, GeminiSummarizer
from contextengine.compaction.summarizers.summarizer import Summarizer
from contextengine.core.errors import invalid
from contextengine.v1 import config_pb2

__all__ = [
    "DEFAULT_EXTRACTIVE_MAX_CHARS",
    "DEFAULT_GEMINI_MAX_ATTEMPTS",
    "DEFAULT_GEMINI_TIMEOUT_SECONDS",
    "MAX_GEMINI_ATTEMPTS",
    "check_summarizer_config",
    "summarizer_from_config",
]

DEFAULT_EXTRACTIVE_MAX_CHARS = 2000
DEFAULT_GEMINI_TIMEOUT_SECONDS = 60.0
DEFAULT_GEMINI_MAX_ATTEMPTS = 3
MAX_GEMINI_ATTEMPTS = 10

_REASON = "INVALID_SUMMARIZER_CONFIG"
_PLACEHOLDER = "conversation_history"


def check_summarizer_config(cfg: config_pb2.SummarizerConfig, field: str) -> None:
    """Raises ``INVALID_SUMMARIZER_CONFIG`` (naming the offending field under ``field``) for:
    an extractive ``max_chars`` <= 0; a gemini config without a model, with a timeout that is
    not a finite number > 0, with ``max_attempts`` outside 1..10, or with a prompt template
    that does not hold exactly one ``{conversation_history}`` placeholder and nothing else to
    substitute (other braces must be doubled)."""
    kind = cfg.WhichOneof("kind")
    if kind == "extractive":
        extractive = cfg.extractive
        if extractive.HasField("max_chars") and extractive.max_chars <= 0:
            raise invalid(
                _REASON, f"{field}.extractive.max_chars", "extractive max_chars must be > 0"
            )
    elif kind == "gemini":
        _check_gemini(cfg.gemini, f"{field}.gemini")


def _check_gemini(cfg: config_pb2.GeminiSummarizerConfig, field: str) -> None:
    if not cfg.model.strip():
        raise invalid(_REASON, f"{field}.model", "a gemini summarizer needs a model name")
    if cfg.HasField("timeout_seconds") and not (
        math.isfinite(cfg.timeout_seconds) and cfg.timeout_seconds > 0
    ):
        raise invalid(
            _REASON, f"{field}.timeout_seconds", "timeout_seconds must be a finite number > 0"
        )
    if cfg.HasField("max_attempts") and not 1 <= cfg.max_attempts <= MAX_GEMINI_ATTEMPTS:
        raise invalid(
            _REASON,
            f"{field}.max_attempts",
            f"max_attempts must be between 1 and {MAX_GEMINI_ATTEMPTS}",
        )
    if cfg.HasField("prompt_template"):
        problem = _template_problem(cfg.prompt_template)
        if problem:
            raise invalid(_REASON, f"{field}.prompt_template", problem)


def _template_problem(template: str) -> str:
    """Why ``template`` is not usable with ``str.format(conversation_history=...)``, or ""."""
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
        template.format(conversation_history="")
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as error:
        return (
            f"prompt_template is not a valid str.format template ({error!r}); double literal braces"
        )
    if fields.count(_PLACEHOLDER) != 1 or len(fields) != 1:
        return (
            "prompt_template must hold exactly one {conversation_history} placeholder and no"
            f" other replacement field (found {fields!r}); double literal braces"
        )
    return ""


def summarizer_from_config(
    cfg: config_pb2.SummarizerConfig | None, gemini: GeminiSettings
) -> Summarizer | None:
    """A new summarizer for ``cfg`` (assumed to pass :func:`check_summarizer_config`); None for
    a ``client`` config."""
    kind = cfg.WhichOneof("kind") if cfg is not None else None
    if cfg is None or kind is None:
        return ExtractiveSummarizer(DEFAULT_EXTRACTIVE_MAX_CHARS)
    if kind == "extractive":
        return ExtractiveSummarizer(cfg.extractive.max_chars or DEFAULT_EXTRACTIVE_MAX_CHARS)
    if kind == "gemini":
        settings = cfg.gemini
        return GeminiSummarizer(
            settings.model,
            gemini,
            prompt_template=(
                settings.prompt_template if settings.HasField("prompt_template") else None
            ),
            timeout_seconds=(
                settings.timeout_seconds
                if settings.HasField("timeout_seconds")
                else DEFAULT_GEMINI_TIMEOUT_SECONDS
            ),
            max_attempts=(
                settings.max_attempts
                if settings.HasField("max_attempts")
                else DEFAULT_GEMINI_MAX_ATTEMPTS
            ),
        )
    return None
