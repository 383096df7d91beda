"""Which range to summarise now: google-adk 2.13's two rules, plus pinned events.

Both rules read the log with rewinds applied (rewound content never reaches a summary) and return
a :class:`CompactionPlan` (what to give the summarizer and which range the summary will cover)
or the reason there is none.

**Sliding window** (section 3.2), root scope: count invocations (by first appearance) whose
latest event is after the end of the last summary in log order; once there are
``compaction_interval`` of them, summarise them plus the ``overlap_size`` invocations before,
trimmed to the longest self-contained prefix, if the range is worth compacting.

**Token threshold** (sections 4.3-4.6), one isolation scope: when the latest prompt token count
(of ``agent_name``'s model calls, newer than any summary; else an estimate from the contents) is
at least ``token_threshold``, summarise the events after the latest surviving summary except the
last ``event_retention_size`` (moved so that no kept response loses its call), trimmed to the
longest self-contained prefix, with that summary rolled in first so the new one replaces it.

**Pins** (this engine's extension): a pinned event is never inside a range, and since summaries
hide raw events by timestamp, no range ``[first, last timestamp]`` covers a pinned event's
timestamp either. The window is cut into the stretches between pins (an event with a pinned
event's timestamp is kept with it); the first stretch with a self-contained prefix that is worth
compacting is planned (a stretch that is not, e.g. one already summarised, must not stall the
ones after it), cut short where its range would cover a pinned timestamp (clocks out of order).
When the range starts after a pin, or reaching back to the rolled-up summary's start would cover
a pinned timestamp, the rolling seed is dropped, so the summaries on both sides of the pin stay.
Without pins the rules are ADK's exactly.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass

from contextengine.core.compaction._gate import is_worth_compacting
from contextengine.core.compaction._obligations import (
    longest_self_contained_prefix,
    safe_split_index,
)
from contextengine.core.context import (
    DEFAULT_OTHER_AGENT_PREAMBLE,
    ContextOptions,
    apply_context_edits,
    apply_rewinds,
    build_contents,
    latest_non_subsumed_compaction,
)
from contextengine.core.tokens import content_chars
from contextengine.v1 import config_pb2, event_pb2

__all__ = [
    "SLIDING_WINDOW",
    "TOKEN_THRESHOLD",
    "CompactionPlan",
    "PlanResult",
    "RecordedScan",
    "TokenReading",
    "after_surviving_summary",
    "has_live_root_events",
    "latest_prompt_token_count",
    "plan_after_invocation",
    "plan_sliding_window",
    "plan_token_threshold",
    "scan_recorded",
    "seed_event",
]

SLIDING_WINDOW = "sliding_window"
TOKEN_THRESHOLD = "token_threshold"

#: Reasons for not planning (also reported by the service).
NOTHING_TO_COMPACT = "nothing_to_compact"
NOT_ENOUGH_INVOCATIONS = "not_enough_invocations"
BELOW_THRESHOLD = "below_threshold"
NOT_WORTH_COMPACTING = "not_worth_compacting"
NOT_CONFIGURED = "not_configured"


@dataclass(frozen=True)
class CompactionPlan:
    trigger: str
    #: what the summarizer is given, in order: the rolled-up summary (as a "model" event at its
    #: start time) first when there is one, then ``covered``
    window: tuple[event_pb2.Event, ...]
    #: the log's events the summary replaces, in log order
    covered: tuple[event_pb2.Event, ...]
    #: the summary event whose text is rolled in (token threshold), if any
    rolls_up: event_pb2.Event | None
    #: isolation scope of the range (None: root scope)
    isolation_scope: str | None
    #: sequence of the last event of the log the plan was made from
    based_on_sequence: int

    @property
    def start_timestamp(self) -> float:
        return self.window[0].timestamp

    @property
    def end_timestamp(self) -> float:
        return self.window[-1].timestamp


@dataclass(frozen=True)
class PlanResult:
    plan: CompactionPlan | None
    #: why there is no plan ('' when there is one)
    skipped: str = ""


@dataclass(frozen=True)
class TokenReading:
    tokens: int | None
    #: "recorded" (a model call's prompt_token_count) or "estimate" (characters / 4)
    source: str


def _scope(event: event_pb2.Event) -> str | None:
    return event.isolation_scope if event.HasField("isolation_scope") else None


def _is_summary(event: event_pb2.Event) -> bool:
    return event.actions.HasField("compaction")


def _pinned_times(events: Sequence[event_pb2.Event]) -> list[float]:
    """Sorted timestamps of the pinned raw events of ``events`` (the scoped, rewound log)."""
    return sorted(event.timestamp for event in events if event.pinned and not _is_summary(event))


def _covers_pin(start: float, end: float, pinned: Sequence[float]) -> bool:
    """Whether a summary of ``[start, end]`` would hide a pinned timestamp (a reversed range
    hides nothing)."""
    if not start <= end:
        return False
    index = bisect_left(pinned, start)
    return index < len(pinned) and pinned[index] <= end


def _stretches(
    window: Sequence[event_pb2.Event], pinned: Sequence[float]
) -> list[list[event_pb2.Event]]:
    """``window`` cut at pinned events and at events with a pinned event's timestamp (which
    belong to no stretch); empty stretches dropped."""
    times = set(pinned)
    stretches: list[list[event_pb2.Event]] = [[]]
    for event in window:
        if event.pinned or event.timestamp in times:
            stretches.append([])
        else:
            stretches[-1].append(event)
    return [stretch for stretch in stretches if stretch]


def _options(
    window: Sequence[event_pb2.Event],
    events: Sequence[event_pb2.Event],
    pinned: Sequence[float],
) -> Iterator[tuple[list[event_pb2.Event], bool]]:
    """The parts of ``window`` that could be planned, in order, each with whether it starts at
    the window's start. Without pins: the longest self-contained prefix alone (ADK)."""
    if not pinned:
        prefix = longest_self_contained_prefix(window, all_events=events)
        if prefix:
            yield prefix, True
        return
    for stretch in _stretches(window, pinned):
        prefix = longest_self_contained_prefix(stretch, all_events=events)
        if prefix:
            yield prefix, stretch[0] is window[0]


def _clear_of_pins(
    prefix: list[event_pb2.Event],
    start: float,
    events: Sequence[event_pb2.Event],
    pinned: Sequence[float],
) -> list[event_pb2.Event]:
    """The longest self-contained prefix of ``prefix`` (itself self-contained) whose range from
    ``start`` covers no pinned timestamp; ``[]`` if there is none."""
    if not _covers_pin(start, prefix[-1].timestamp, pinned):
        return prefix
    for length in range(len(prefix) - 1, 0, -1):
        shorter = prefix[:length]
        if _covers_pin(start, shorter[-1].timestamp, pinned):
            continue
        if len(longest_self_contained_prefix(shorter, all_events=events)) == length:
            return shorter
    return []


def _based_on(log: Sequence[event_pb2.Event]) -> int:
    return log[-1].sequence if log else 0


def plan_sliding_window(
    log: Sequence[event_pb2.Event],
    config: config_pb2.EventsCompactionConfig,
    *,
    ignore_trigger: bool = False,
    memo: MutableMapping[int, int] | None = None,
) -> PlanResult:
    """Section 3.2 over ``log`` (the whole session, in log order). ``memo`` caches content
    sizes by sequence across calls."""
    if not (config.HasField("compaction_interval") and config.HasField("overlap_size")):
        return PlanResult(None, NOT_CONFIGURED)
    events = [
        event
        for event in apply_rewinds(apply_context_edits(log))
        if not event.HasField("isolation_scope")
    ]
    if not events:
        return PlanResult(None, NOTHING_TO_COMPACT)
    boundary = 0.0
    for event in reversed(events):
        if _is_summary(event) and event.actions.compaction.end_timestamp:
            boundary = event.actions.compaction.end_timestamp
            break
    latest: dict[str, float] = {}
    for event in events:
        if event.invocation_id and not _is_summary(event):
            latest[event.invocation_id] = max(latest.get(event.invocation_id, 0.0), event.timestamp)
    order = list(latest)
    new = [invocation for invocation in order if latest[invocation] > boundary]
    if not new or (len(new) < config.compaction_interval and not ignore_trigger):
        return PlanResult(None, NOT_ENOUGH_INVOCATIONS)
    end_invocation = new[-1]
    start_invocation = order[max(0, order.index(new[0]) - config.overlap_size)]
    last = max(i for i, event in enumerate(events) if event.invocation_id == end_invocation)
    first = next(i for i, event in enumerate(events) if event.invocation_id == start_invocation)
    window = [event for event in events[first : last + 1] if not _is_summary(event)]
    pinned = _pinned_times(events)
    skipped = NOTHING_TO_COMPACT
    for option, _ in _options(window, events, pinned):
        covered = _clear_of_pins(option, option[0].timestamp, events, pinned)
        if not covered:
            continue
        if not ignore_trigger and not is_worth_compacting(events, covered, memo):
            skipped = NOT_WORTH_COMPACTING
            continue
        plan = CompactionPlan(
            SLIDING_WINDOW, tuple(covered), tuple(covered), None, None, _based_on(log)
        )
        return PlanResult(plan)
    return PlanResult(None, skipped)


@dataclass(frozen=True)
class RecordedScan:
    """The newest recorded prompt token count of an agent in a scope, not older than a summary,
    over the first ``count`` events of a log (``tokens`` None: there is none)."""

    count: int
    tokens: int | None


def scan_recorded(
    rewound: Sequence[event_pb2.Event],
    agent_name: str,
    isolation_scope: str | None,
    previous: RecordedScan | None = None,
) -> RecordedScan:
    """Walks ``rewound`` (a log with its rewinds applied) back from its end for the newest
    prompt token count recorded by ``agent_name`` (any author when empty) in the scope, stopping
    at a summary of the scope. ``previous``, the scan of a prefix of the same log (the log has only
    grown since, without a rewind), ends the walk where that prefix ends."""
    stop = previous.count if previous is not None else 0
    # Inlined checks (``_scope``, ``_is_summary``): without a recorded count the first scan
    # walks the whole scope.
    for index in range(len(rewound) - 1, stop - 1, -1):
        event = rewound[index]
        if event.HasField("isolation_scope"):
            if event.isolation_scope != isolation_scope:
                continue
        elif isolation_scope is not None:
            continue
        if event.actions.HasField("compaction"):
            return RecordedScan(len(rewound), None)
        if event.HasField("usage_metadata"):
            usage = event.usage_metadata
            if usage.HasField("prompt_token_count") and (
                not agent_name or event.author == agent_name
            ):
                return RecordedScan(len(rewound), usage.prompt_token_count)
    return RecordedScan(len(rewound), previous.tokens if previous is not None else None)


def latest_prompt_token_count(
    log: Sequence[event_pb2.Event],
    *,
    agent_name: str = "",
    branch: str | None = None,
    isolation_scope: str | None = None,
    other_agent_preamble: str = DEFAULT_OTHER_AGENT_PREAMBLE,
    rewound: Sequence[event_pb2.Event] | None = None,
    contents_chars: Callable[[ContextOptions], int] | None = None,
    scan: RecordedScan | None = None,
) -> TokenReading:
    """Section 4.3: the newest recorded prompt token count of ``agent_name`` (any author when
    empty) in the scope, not older than a summary; else the characters of the contents the agent
    would be given, divided by 4 (None when there are none).

    ``contents_chars``, when given, returns those characters for the options instead of building
    the contents from ``log`` (the service answers from a cached view of the same log).
    ``scan``, when given, is :func:`scan_recorded` of the rewound log for the agent and scope,
    done already (incrementally, by the service)."""
    if rewound is None:
        rewound = apply_rewinds(apply_context_edits(log))
    if scan is None:
        scan = scan_recorded(rewound, agent_name, isolation_scope)
    if scan.tokens is not None:
        return TokenReading(scan.tokens, "recorded")
    options = ContextOptions(
        agent_name=agent_name,
        branch=branch,
        isolation_scope=isolation_scope,
        other_agent_preamble=other_agent_preamble,
    )
    if contents_chars is not None:
        chars = contents_chars(options)
    else:
        chars = sum(content_chars(content) for content in build_contents(rewound, options))
    return TokenReading(chars // 4 if chars > 0 else None, "estimate")


def seed_event(summary: event_pb2.Event) -> event_pb2.Event:
    """The rolled-up summary as the summarizer sees it: a "model" event at the summary's start."""
    seed = event_pb2.Event(author="model", timestamp=summary.actions.compaction.start_timestamp)
    seed.content.CopyFrom(summary.actions.compaction.compacted_content)
    if summary.HasField("branch"):
        seed.branch = summary.branch
    if summary.HasField("isolation_scope"):
        seed.isolation_scope = summary.isolation_scope
    return seed


def after_surviving_summary(
    events: Sequence[event_pb2.Event],
) -> tuple[event_pb2.Event | None, list[event_pb2.Event]]:
    """The latest surviving summary of ``events`` (one scope, rewinds applied), if any, and the
    raw events newer than its end: the token threshold's candidates (section 4.4)."""
    previous = latest_non_subsumed_compaction(events)
    boundary = 0.0
    if previous is not None and previous.actions.compaction.HasField("end_timestamp"):
        boundary = previous.actions.compaction.end_timestamp
    candidates = [
        event for event in events if not _is_summary(event) and event.timestamp > boundary
    ]
    return previous, candidates


def plan_token_threshold(
    log: Sequence[event_pb2.Event],
    config: config_pb2.EventsCompactionConfig,
    *,
    agent_name: str = "",
    branch: str | None = None,
    isolation_scope: str | None = None,
    other_agent_preamble: str = DEFAULT_OTHER_AGENT_PREAMBLE,
    ignore_trigger: bool = False,
    memo: MutableMapping[int, int] | None = None,
    reading: Callable[[], TokenReading] | None = None,
) -> PlanResult:
    """Sections 4.2-4.6 for the view (``agent_name``, ``branch``, ``isolation_scope``).
    ``reading``, when given, replaces :func:`latest_prompt_token_count` (the service knows it
    already)."""
    if not (config.HasField("token_threshold") and config.HasField("event_retention_size")):
        return PlanResult(None, NOT_CONFIGURED)
    rewound = apply_rewinds(apply_context_edits(log))
    events = [event for event in rewound if _scope(event) == isolation_scope]
    if not ignore_trigger:
        tokens = (
            reading()
            if reading is not None
            else latest_prompt_token_count(
                log,
                agent_name=agent_name,
                branch=branch,
                isolation_scope=isolation_scope,
                other_agent_preamble=other_agent_preamble,
                rewound=rewound,
            )
        ).tokens
        if tokens is None or tokens < config.token_threshold:
            return PlanResult(None, BELOW_THRESHOLD)
    previous, candidates = after_surviving_summary(events)
    retention = config.event_retention_size
    if len(candidates) <= retention:
        return PlanResult(None, NOTHING_TO_COMPACT)
    head = candidates if retention == 0 else candidates[: safe_split_index(candidates, retention)]
    seedable = previous is not None and previous.actions.compaction.HasField("start_timestamp")
    pinned = _pinned_times(events)
    skipped = NOTHING_TO_COMPACT
    for option, at_start in _options(head, events, pinned):
        rolls_up = previous if at_start and seedable else None
        covered: list[event_pb2.Event] = []
        if rolls_up is not None:
            start = rolls_up.actions.compaction.start_timestamp
            covered = _clear_of_pins(option, start, events, pinned)
            if not covered:
                rolls_up = None  # reaching back to the old summary's start would hide a pin
        if rolls_up is None:
            covered = _clear_of_pins(option, option[0].timestamp, events, pinned)
            if not covered:
                continue
        given = [seed_event(rolls_up), *covered] if rolls_up is not None else covered
        if not ignore_trigger and not is_worth_compacting(events, given, memo):
            skipped = NOT_WORTH_COMPACTING
            continue
        plan = CompactionPlan(
            TOKEN_THRESHOLD, tuple(given), tuple(covered), rolls_up, isolation_scope, _based_on(log)
        )
        return PlanResult(plan)
    return PlanResult(None, skipped)


def has_live_root_events(log: Sequence[event_pb2.Event]) -> bool:
    """Whether an event of the root scope survives the rewinds (ADK's post-invocation pass does
    nothing otherwise)."""
    return any(
        not event.HasField("isolation_scope") for event in apply_rewinds(apply_context_edits(log))
    )


def plan_after_invocation(
    log: Sequence[event_pb2.Event],
    config: config_pb2.EventsCompactionConfig,
    *,
    other_agent_preamble: str = DEFAULT_OTHER_AGENT_PREAMBLE,
    ignore_trigger: bool = False,
    memo: MutableMapping[int, int] | None = None,
) -> PlanResult:
    """What ADK does after an invocation (section 3.1): nothing for an empty root scope; the
    token threshold first (root scope, any author); if it plans nothing, the sliding window."""
    if not has_live_root_events(log):
        return PlanResult(None, NOTHING_TO_COMPACT)
    token = plan_token_threshold(
        log,
        config,
        other_agent_preamble=other_agent_preamble,
        ignore_trigger=ignore_trigger,
        memo=memo,
    )
    if token.plan is not None:
        return token
    sliding = plan_sliding_window(log, config, ignore_trigger=ignore_trigger, memo=memo)
    if sliding.plan is None and sliding.skipped == NOT_CONFIGURED:
        return token
    return sliding
