"""Cache-aware compaction: the pure parts of the policy (``docs/design/prompt-cache.md``).

* :func:`cached_prefix` finds the prefix an agent's newest cache metadata describes, and the
  log position from which events are outside it: the cached (or fingerprinted) contents were
  built before the first model response that recorded this metadata, without the request's
  trailing user contents, so the run of user-role events right before that response and every
  event from it on come after the prefix in the contents (:func:`prefix_survives` checks).
* :func:`is_warm` says whether that cache would still be valid for the next model call.
* :func:`predicted_prompt_tokens`: the agent's newest recorded prompt size plus an estimate of
  what was appended since (ADK only looks at the recorded size, so its prompts overshoot).
* :func:`restricted_plan` narrows a compaction plan to the events after the prefix (the summary
  then sits after the prefix and the prefix stays byte-identical); :func:`prefix_survives`
  checks that on the contents themselves.
* :func:`consolidated_plan`: the fallback when narrowing is not enough: one summary of
  everything visible before the retained tail, every surviving summary rolled in (restricted
  compactions leave raw events between summaries that ADK's rolling rule would never reach).

Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextengine.core.compaction import (
    TOKEN_THRESHOLD,
    CompactionPlan,
    is_worth_compacting,
    longest_self_contained_prefix,
    safe_split_index,
    seed_event,
)
from contextengine.core.context import (
    ContextOptions,
    apply_context_edits,
    apply_rewinds,
    build_contents,
    compaction_ranges,
)
from contextengine.core.prompt_cache._decision import CacheSettings, Metadata
from contextengine.core.tokens import content_chars
from contextengine.v1 import config_pb2, content_pb2, event_pb2

__all__ = [
    "CachedPrefix",
    "cached_prefix",
    "consolidated_plan",
    "contents_chars",
    "is_warm",
    "predicted_prompt_tokens",
    "prefix_survives",
    "restricted_plan",
    "with_placeholder_summary",
]


@dataclass(frozen=True)
class CachedPrefix:
    """An agent's newest cache metadata and where its prefix ends in the log."""

    owner: str
    metadata: Metadata
    #: the event that carries it
    event: event_pb2.Event
    #: every event from this sequence on is outside the prefix: the first model response that
    #: recorded this prefix (same fingerprint and contents count), or the run of user-role
    #: events right before it (the request's trailing user contents are never cached)
    boundary_sequence: int


def _same_prefix(a: event_pb2.CacheMetadata, b: event_pb2.CacheMetadata) -> bool:
    return a.fingerprint == b.fingerprint and a.contents_count == b.contents_count


def cached_prefix(log: Sequence[event_pb2.Event], owner: str | None) -> CachedPrefix | None:
    """The newest cache metadata of ``owner`` (None: of any author) and its boundary."""
    newest: event_pb2.Event | None = None
    for event in reversed(log):
        if event.HasField("cache_metadata") and (owner is None or event.author == owner):
            newest = event
            break
    if newest is None:
        return None
    first = len(log) - 1
    for index in range(len(log) - 1, -1, -1):
        event = log[index]
        if event.sequence > newest.sequence or event.author != newest.author:
            continue
        if not event.HasField("cache_metadata"):
            continue
        if not _same_prefix(event.cache_metadata, newest.cache_metadata):
            break
        first = index
    # The request that fixed the prefix left its trailing run of user contents out of it: the
    # events that made that run (user-role contents, and events without content) are outside.
    start = first
    while start > 0:
        previous = log[start - 1]
        if previous.actions.HasField("compaction"):
            break
        if previous.HasField("content") and previous.content.role != "user":
            break
        start -= 1
    return CachedPrefix(
        newest.author, Metadata.from_proto(newest.cache_metadata), newest, log[start].sequence
    )


def is_warm(
    prefix: CachedPrefix, settings: CacheSettings, now: float, invocation_id: str | None
) -> bool:
    """Whether the cache would pass ADK's validity checks (other than the fingerprint) on the
    next model call, in invocation ``invocation_id`` (None: a new invocation)."""
    metadata = prefix.metadata
    if (
        metadata.cache_name is None
        or metadata.expire_time is None
        or metadata.invocations_used is None
    ):
        return False
    if now >= metadata.expire_time:
        return False
    used = metadata.invocations_used
    carrier = prefix.event.invocation_id
    if carrier and carrier != invocation_id:
        used += 1
    return used <= settings.cache_intervals


def predicted_prompt_tokens(log: Sequence[event_pb2.Event], owner: str) -> int | None:
    """The owner's newest recorded prompt token count (not older than a summary) plus the
    characters / 4 of the contents appended after it; None without a recorded count."""
    added = 0
    for event in reversed(log):
        if event.actions.HasField("compaction"):
            return None
        if (
            event.author == owner
            and event.HasField("usage_metadata")
            and event.usage_metadata.HasField("prompt_token_count")
        ):
            return event.usage_metadata.prompt_token_count + added // 4
        if event.HasField("content"):
            added += content_chars(event.content)
    return None


def contents_chars(contents: Sequence[content_pb2.Content]) -> int:
    return sum(content_chars(content) for content in contents)


def _scope(event: event_pb2.Event) -> str | None:
    return event.isolation_scope if event.HasField("isolation_scope") else None


def restricted_plan(
    plan: CompactionPlan, log: Sequence[event_pb2.Event], boundary_sequence: int
) -> CompactionPlan | None:
    """``plan`` without the events before ``boundary_sequence`` (and without a rolled-up summary
    that lies before it), trimmed to its longest self-contained prefix; None when nothing
    worth compacting is left."""
    covered = [event for event in plan.covered if event.sequence >= boundary_sequence]
    if not covered:
        return None
    events = [
        e for e in apply_rewinds(apply_context_edits(log)) if _scope(e) == plan.isolation_scope
    ]
    covered = longest_self_contained_prefix(covered, all_events=events)
    if not covered:
        return None
    rolls_up = plan.rolls_up
    if rolls_up is not None and rolls_up.sequence < boundary_sequence:
        rolls_up = None
    if rolls_up is not None and covered[0].sequence != plan.covered[0].sequence:
        rolls_up = None  # the seed only rolls in when the range continues right after it
    window = [seed_event(rolls_up), *covered] if rolls_up is not None else covered
    if not is_worth_compacting(events, window):
        return None
    return CompactionPlan(
        plan.trigger,
        tuple(window),
        tuple(covered),
        rolls_up,
        plan.isolation_scope,
        plan.based_on_sequence,
    )


def consolidated_plan(
    log: Sequence[event_pb2.Event],
    config: config_pb2.EventsCompactionConfig,
    isolation_scope: str | None,
) -> CompactionPlan | None:
    """One summary of every visible raw event of the scope before the retained tail
    (``event_retention_size``, moved so no kept response loses its call) and before the first
    pinned event, with every surviving summary that ends inside it rolled in (so they are
    subsumed)."""
    events = [e for e in apply_rewinds(apply_context_edits(log)) if _scope(e) == isolation_scope]
    ranges = compaction_ranges(events)
    summaries = [events[r.position] for r in ranges]
    covered_spans = [(r.start, r.end) for r in ranges if r.start <= r.end]
    raw = [
        event
        for event in events
        if not event.actions.HasField("compaction")
        and not any(start <= event.timestamp <= end for start, end in covered_spans)
    ]
    retention = config.event_retention_size if config.HasField("event_retention_size") else 0
    if len(raw) <= retention:
        return None
    head = raw if retention == 0 else raw[: safe_split_index(raw, retention)]
    pins = [index for index, event in enumerate(head) if event.pinned]
    if pins:
        head = head[: pins[0]]  # a range never covers a pinned event
    head = longest_self_contained_prefix(head, all_events=events)
    if not head:
        return None
    end = head[-1].timestamp
    seeds = [
        seed_event(summary)
        for summary in summaries
        if summary.actions.compaction.HasField("start_timestamp")
        and summary.actions.compaction.end_timestamp <= end
    ]
    window = sorted([*seeds, *head], key=lambda event: event.timestamp)
    if window[-1] is not head[-1]:
        window.remove(head[-1])
        window.append(head[-1])
    if not is_worth_compacting(events, window):
        return None
    first = min(
        (s for s in summaries if s.actions.compaction.end_timestamp <= end),
        key=lambda s: s.actions.compaction.start_timestamp,
        default=None,
    )
    return CompactionPlan(
        TOKEN_THRESHOLD,
        tuple(window),
        tuple(head),
        first,
        isolation_scope,
        log[-1].sequence if log else 0,
    )


def with_placeholder_summary(
    log: Sequence[event_pb2.Event], plan: CompactionPlan, text: str, timestamp: float
) -> list[event_pb2.Event]:
    """``log`` plus a summary event for ``plan`` holding ``text`` (for predicting contents)."""
    summary = event_pb2.Event(author="user", timestamp=timestamp)
    if plan.isolation_scope is not None:
        summary.isolation_scope = plan.isolation_scope
    compaction = summary.actions.compaction
    compaction.start_timestamp = plan.start_timestamp
    compaction.end_timestamp = plan.end_timestamp
    compaction.compacted_content.role = "model"
    compaction.compacted_content.parts.add(text=text)
    summary.sequence = (log[-1].sequence if log else 0) + 1
    return [*log, summary]


def prefix_survives(
    before: Sequence[content_pb2.Content],
    after_log: Sequence[event_pb2.Event],
    options: ContextOptions,
    count: int,
) -> tuple[bool, list[content_pb2.Content]]:
    """Whether the first ``count`` contents built from ``after_log`` equal ``before``'s (and the
    contents built)."""
    after = build_contents(after_log, options)
    if count > len(before) or count > len(after):
        return False, after
    return all(a == b for a, b in zip(before[:count], after[:count], strict=True)), after
