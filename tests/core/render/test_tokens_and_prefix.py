"""The renderings' token counter is tiktoken's, and a rendering of more contents begins with the
rendering of fewer (what keeps a provider's prompt cache warm)."""

from __future__ import annotations

import random
import warnings

import pytest

from contextengine.core.render import RenderFormat, render, rendering_tokens
from contextengine.core.render._tokens import O200K
from contextengine.core.tokens import _load_cl100k
from tests.core.render.random_contents import random_contents

pytestmark = pytest.mark.unit

CORPUS = [
    "hello world",
    "ünïcödé ✓ 東京 🚀",
    "def f(x):\n    return x ** 2  # comment\n\n",
    '{"city": "São Paulo", "days": -0.0, "n": [1, 2.5]}',
    "   leading and trailing   \t\n",
    "1234567890 12.5e-7 $$$ ^^^",
    "a" * 300,
]


def test_bpe_openai_gives_tiktokens_tokens() -> None:
    """bpe-openai (which ships o200k_base offline) against tiktoken itself, on the vocabulary
    both have offline (cl100k_base): the same tokens."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        ours = bpe_openai.get_encoding("cl100k_base")
    tiktoken = _load_cl100k()
    for text in CORPUS:
        assert ours.encode_ordinary(text) == tiktoken.encode_ordinary(text), text


def test_openai_renderings_are_counted_with_o200k_and_anthropic_estimated() -> None:
    items = [{"role": "user", "content": "hello world"}]
    assert rendering_tokens(items, None, openai=True) == (2, O200K)
    assert rendering_tokens(items, "sys", openai=False) == (
        len("hello world" + "sys") // 4,
        "chars/4",
    )
    media = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:" + "A" * 999}}],
        }
    ]
    assert rendering_tokens(media, None, openai=True)[0] == 0


@pytest.mark.parametrize("format", list(RenderFormat))
def test_a_longer_rendering_begins_with_the_shorter_one(format: RenderFormat) -> None:
    for seed in range(200):
        rng = random.Random(seed)
        contents = random_contents(rng, rng.randint(1, 10))
        whole = render(contents, format, system="Sys")
        for count in range(1, len(contents)):
            last = contents[count - 1]
            if last.role == "user" and format is not RenderFormat.ANTHROPIC_MESSAGES:
                continue  # the last user turn may carry the empty text (it is the request's tail)
            shorter = render(contents[:count], format, system="Sys")
            kept = shorter.items_of(count)
            assert whole.items[:kept] == shorter.items[:kept], (seed, count)
            assert whole.items_of(count) == kept
