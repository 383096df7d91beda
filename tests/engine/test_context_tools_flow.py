"""The context-tools benchmark's replays (``bench/context_tools.py``) on a short session, as a
test of behaviour, not of speed: with the tools enabled and unused, every model call's contents
are google-adk 2.13's (its in-flow token compaction included); with the scripted policy, every
edit is accepted and recorded, and every fact stays in every later context."""

from __future__ import annotations

import pytest
from bench.context_tools import run_adk, run_engine, workload

pytestmark = [pytest.mark.unit, pytest.mark.filterwarnings(r"ignore:\[EXPERIMENTAL\]:UserWarning")]


async def test_unused_tools_leave_adks_contexts_and_the_policy_keeps_every_fact() -> None:
    turns = workload(12)
    adk = await run_adk(turns)
    unused = await run_engine(turns, tools=False)
    used = await run_engine(turns, tools=True)
    assert adk.summaries > 0  # ADK's rules compacted on the way
    assert len(unused.contents) == len(adk.contents) == 72
    for number, (theirs, ours) in enumerate(zip(adk.contents, unused.contents, strict=True)):
        assert ours == theirs, f"model call {number + 1}"
    assert used.refusals == 0, used.refused
    assert used.edits["hide"] > 0
    assert used.edits["pin"] > 0
    assert used.edits["summary_sequence"] > 0
    assert used.retention == 1.0
    assert adk.retention == 1.0
    assert used.prompt_tokens < adk.prompt_tokens
