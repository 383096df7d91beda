"""The whole flow against google-adk 2.13: the prompt-cache benchmark's replays
(``bench/cache_sim.py``) on a short session. ADK runs its in-flow token compaction,
``_get_contents``, its context-cache processor and Gemini cache manager, and its post-invocation
compaction; the engine runs its compactor and BuildContext. Parity mode must make ADK's decision,
with ADK's cached contents count and prompt size, at every model call, for each compaction
configuration of the benchmark."""

from __future__ import annotations

import logging

import pytest
from bench.cache_sim import HEADLINE, VARIANTS, Setup, run_adk, run_engine, workload

pytestmark = pytest.mark.parity


@pytest.mark.parametrize("setup", [HEADLINE, *VARIANTS], ids=lambda setup: setup.label)
async def test_parity_replay_equals_adk(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    turns = workload(45, seed=7)
    adk = await run_adk(turns, setup)
    engine = await run_engine(turns, aware=False, setup=setup)
    assert [(r.action, r.contents_count, r.prompt) for r in engine.requests] == [
        (r.action, r.contents_count, r.prompt) for r in adk.requests
    ]
    assert engine.summaries == adk.summaries
    assert {r.action for r in adk.requests} == {"fingerprint_only", "create", "reuse"}
