"""check_summarizer_config (every invalid config is INVALID_SUMMARIZER_CONFIG, naming the field)
and summarizer_from_config (kinds and defaults)."""

from __future__ import annotations

import math

import pytest

from contextengine.compaction.summarizers.extractive import ExtractiveSummarizer
from contextengine.compaction.summarizers.factory import (
    check_summarizer_config,
    summarizer_from_config,
)
from contextengine.compaction.summarizers.gemini import GeminiSettings, GeminiSummarizer
from contextengine.compaction.summarizers.summarizer import DEFAULT_PROMPT_TEMPLATE
from contextengine.core.errors import Code, ContextEngineError
from contextengine.v1 import config_pb2

pytestmark = pytest.mark.unit

SETTINGS = GeminiSettings(api_key="k", base_url="http://127.0.0.1:9")
Extractive = config_pb2.ExtractiveSummarizerConfig
Gemini = config_pb2.GeminiSummarizerConfig


def _gemini(**fields: object) -> config_pb2.SummarizerConfig:
    fields.setdefault("model", "gemini-2.5-flash")
    return config_pb2.SummarizerConfig(gemini=Gemini(**fields))  # type: ignore[arg-type]


INVALID = {
    "extractive-zero": (
        config_pb2.SummarizerConfig(extractive=Extractive(max_chars=0)),
        "extractive.max_chars",
    ),
    "extractive-negative": (
        config_pb2.SummarizerConfig(extractive=Extractive(max_chars=-5)),
        "extractive.max_chars",
    ),
    "gemini-no-model": (config_pb2.SummarizerConfig(gemini=Gemini()), "gemini.model"),
    "gemini-blank-model": (_gemini(model="  "), "gemini.model"),
    "timeout-zero": (_gemini(timeout_seconds=0), "gemini.timeout_seconds"),
    "timeout-negative": (_gemini(timeout_seconds=-1), "gemini.timeout_seconds"),
    "timeout-nan": (_gemini(timeout_seconds=math.nan), "gemini.timeout_seconds"),
    "timeout-inf": (_gemini(timeout_seconds=math.inf), "gemini.timeout_seconds"),
    "attempts-zero": (_gemini(max_attempts=0), "gemini.max_attempts"),
    "attempts-negative": (_gemini(max_attempts=-1), "gemini.max_attempts"),
    "attempts-eleven": (_gemini(max_attempts=11), "gemini.max_attempts"),
    "template-empty": (_gemini(prompt_template=""), "gemini.prompt_template"),
    "template-no-placeholder": (_gemini(prompt_template="Summarize."), "gemini.prompt_template"),
    "template-other-field": (
        _gemini(prompt_template="{conversation_history} {language}"),
        "gemini.prompt_template",
    ),
    "template-positional": (
        _gemini(prompt_template="{} {conversation_history}"),
        "gemini.prompt_template",
    ),
    "template-twice": (
        _gemini(prompt_template="{conversation_history}\n{conversation_history}"),
        "gemini.prompt_template",
    ),
    "template-stray-brace": (
        _gemini(prompt_template='Return {"a": 1} for {conversation_history}'),
        "gemini.prompt_template",
    ),
    "template-unclosed": (
        _gemini(prompt_template="{conversation_history"),
        "gemini.prompt_template",
    ),
    "template-lone-close": (
        _gemini(prompt_template="} {conversation_history}"),
        "gemini.prompt_template",
    ),
    "template-attribute": (
        _gemini(prompt_template="{conversation_history.nope}"),
        "gemini.prompt_template",
    ),
    "template-index": (
        _gemini(prompt_template="{conversation_history[0]}"),
        "gemini.prompt_template",
    ),
    "template-bad-spec": (
        _gemini(prompt_template="{conversation_history:d}"),
        "gemini.prompt_template",
    ),
}


@pytest.mark.parametrize(("cfg", "field"), INVALID.values(), ids=INVALID.keys())
def test_invalid_configs_are_rejected(cfg: config_pb2.SummarizerConfig, field: str) -> None:
    with pytest.raises(ContextEngineError) as raised:
        check_summarizer_config(cfg, "config.summarizer")
    error = raised.value
    assert error.reason == "INVALID_SUMMARIZER_CONFIG"
    assert error.code is Code.INVALID_ARGUMENT
    assert error.metadata == {"field": f"config.summarizer.{field}"}


VALID = {
    "unset": config_pb2.SummarizerConfig(),
    "extractive-default": config_pb2.SummarizerConfig(extractive=Extractive()),
    "extractive-1": config_pb2.SummarizerConfig(extractive=Extractive(max_chars=1)),
    "client": config_pb2.SummarizerConfig(client=config_pb2.ClientSummarizerConfig()),
    "gemini-minimal": _gemini(),
    "gemini-full": _gemini(
        prompt_template="Summarize {{briefly}}:\n{conversation_history}",
        timeout_seconds=0.5,
        max_attempts=10,
    ),
    "gemini-one-attempt": _gemini(max_attempts=1),
}


@pytest.mark.parametrize("cfg", VALID.values(), ids=VALID.keys())
def test_valid_configs_pass(cfg: config_pb2.SummarizerConfig) -> None:
    check_summarizer_config(cfg, "config.summarizer")


def test_adk_template_is_valid() -> None:
    from google.adk.apps.llm_event_summarizer import LlmEventSummarizer

    template = LlmEventSummarizer._DEFAULT_PROMPT_TEMPLATE
    check_summarizer_config(_gemini(prompt_template=template), "s")
    check_summarizer_config(_gemini(prompt_template=DEFAULT_PROMPT_TEMPLATE), "s")


def test_unset_and_extractive_give_an_extractive_summarizer() -> None:
    for cfg in (None, config_pb2.SummarizerConfig(), VALID["extractive-default"]):
        summarizer = summarizer_from_config(cfg, SETTINGS)
        assert isinstance(summarizer, ExtractiveSummarizer)
        assert summarizer.max_chars == 2000
    sized = config_pb2.SummarizerConfig(extractive=Extractive(max_chars=123))
    summarizer = summarizer_from_config(sized, SETTINGS)
    assert isinstance(summarizer, ExtractiveSummarizer)
    assert summarizer.max_chars == 123


def test_client_gives_no_summarizer() -> None:
    assert summarizer_from_config(VALID["client"], SETTINGS) is None


async def test_gemini_gives_a_gemini_summarizer_with_defaults() -> None:
    summarizer = summarizer_from_config(_gemini(), SETTINGS)
    assert isinstance(summarizer, GeminiSummarizer)
    assert summarizer.name == "gemini:gemini-2.5-flash"
    assert summarizer.prompt_template == DEFAULT_PROMPT_TEMPLATE
    assert summarizer.timeout_seconds == 60.0
    assert summarizer.max_attempts == 3
    await summarizer.aclose()


async def test_gemini_settings_are_taken_from_the_config() -> None:
    cfg = VALID["gemini-full"]
    summarizer = summarizer_from_config(cfg, SETTINGS)
    assert isinstance(summarizer, GeminiSummarizer)
    assert summarizer.prompt_template == cfg.gemini.prompt_template
    assert summarizer.timeout_seconds == 0.5
    assert summarizer.max_attempts == 10
    await summarizer.aclose()


def test_every_call_builds_a_new_summarizer() -> None:
    assert summarizer_from_config(None, SETTINGS) is not summarizer_from_config(None, SETTINGS)
