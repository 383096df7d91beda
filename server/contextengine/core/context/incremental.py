"""Incremental materialization: extend a previous result with new events instead of rebuilding.

A :class:`View` is the materialized context of the first ``event_count`` events of a log for one
set of :class:`ContextOptions`. When the log grows, :func:`materialize` either *extends* the view
(runs the pipeline over the new events only and appends the result) or *rebuilds* it from all
events. Extending is only done when it provably gives the same contents as a rebuild; the
pipeline's non-local rules decide when that is:

* rewinds, compaction summaries and hidden ranges (context tools) hide earlier events and
  (summaries) re-sort the history by timestamp: new events carrying any of them force a rebuild; so do new events timestamped before the
  end of the view when the view holds a summary (they would be re-sorted into or hidden by it);
* call/response repair pairs events by call id across the whole history: the view must have no
  open call (every call answered, no pending long-running id) and the new events must not refer to
  any call id, response id or tool sub-branch id of the view (and vice versa), nor hold an id-less
  response while the view holds an id-less call (or the other way round), whatever the names;
* the latest-response rearrangement and transcription folding look at the end of the history:
  the view's tail must be *closed* (``build_contents_tail``), judged on the events those rules
  actually see (after visibility, compaction masking and re-sorting, framing and orphan removal),
  never on the last event of the log, which may be one nobody sees (a state delta, an empty
  text, another branch's event). It is open when the latest-response rule moved the trailing
  response (a later event would put it back) or a transcription run has not ended (the last
  fragment, or one held back for the next run). Extending a closed view with new events leaves
  the tail of the new events' own run as the tail of the whole log;
* the isolation-scope opening content depends on the call whose id is the scope.

A property test (``tests/core/context/test_incremental.py``) checks on generated logs, growing in
random steps, that extending always equals rebuilding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from contextengine.core.context._model import (
    Item,
    calls_of,
    item_from_event,
    part_views,
    responses_of,
)
from contextengine.core.context._options import ContextOptions, IncludeContents
from contextengine.core.context._pipeline import build_contents_tail
from contextengine.core.context._rewind import live_indices
from contextengine.core.tokens import TokenCounter
from contextengine.v1 import content_pb2, event_pb2

_CONTENTS_FIELD_TAG = b"\x0a"  # field 1 (contents), wire type 2, of BuildContextResponse

#: the chain digest of no contents: d_0. A change of the serialization or of the chain must
#: change this seed, so that digests of another version never match (the answer is then full).
CONTENTS_DIGEST_SEED = hashlib.blake2b(b"contextengine.contents-digest.v1", digest_size=32).digest()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_contents_field(content: content_pb2.Content) -> bytes:
    """``content`` encoded as one ``contents`` entry of a BuildContextResponse, deterministically
    (map entries, e.g. of function arguments, sorted by key): equal contents give equal bytes in
    every sidecar, which is what :func:`chain_digest` relies on."""
    body = content.SerializeToString(deterministic=True)
    return _CONTENTS_FIELD_TAG + _varint(len(body)) + body


def chain_digest(previous: bytes, encoded: bytes) -> bytes:
    """d_i = H(d_(i-1) || the encoded ``contents`` entry i): the digest of the first i contents
    (H is BLAKE2b-256; d_0 is :data:`CONTENTS_DIGEST_SEED`)."""
    digest = hashlib.blake2b(previous, digest_size=32)
    digest.update(encoded)
    return digest.digest()


@dataclass
class _Ids:
    calls: set[str] = field(default_factory=set)
    responses: set[str] = field(default_factory=set)
    long_running: set[str] = field(default_factory=set)
    branch_run_ids: set[str] = field(default_factory=set)
    #: calls and long-running ids without a response (kept up to date by ``add``)
    open: set[str] = field(default_factory=set)
    #: names of calls / responses without an id (ADK pairs those by name)
    idless_calls: set[str] = field(default_factory=set)
    idless_responses: set[str] = field(default_factory=set)

    def add(self, event: event_pb2.Event, item: Item) -> None:
        calls, responses = item.calls, item.responses
        if item.is_compaction:
            # The summary's compacted content is materialised as an event of its own, with
            # whatever calls and responses a (custom) summarizer put there.
            summary = part_views(event.actions.compaction.compacted_content.parts)
            calls += calls_of(summary)
            responses += responses_of(summary)
        for ref in calls:
            if ref.id:
                self.calls.add(ref.id)
                if ref.id not in self.responses:
                    self.open.add(ref.id)
            else:
                self.idless_calls.add(ref.name or "")
        for ref in responses:
            if ref.id:
                self.responses.add(ref.id)
                self.open.discard(ref.id)
            else:
                self.idless_responses.add(ref.name or "")
        for lr_id in event.long_running_tool_ids:
            self.long_running.add(lr_id)
            if lr_id not in self.responses:
                self.open.add(lr_id)
        if event.branch:
            for segment in event.branch.split("."):
                # ADK takes the run id after the segment's last '@'; every text after an '@'
                # is kept (a superset, whatever way a rule splits the segment).
                pieces = segment.split("@")
                for start in range(1, len(pieces)):
                    self.branch_run_ids.add("@".join(pieces[start:]))

    def knows(self, ids: set[str]) -> bool:
        """Whether any of ``ids`` is a call, response, long-running or branch run id here."""
        return any(
            i in self.calls
            or i in self.responses
            or i in self.branch_run_ids
            or i in self.long_running
            for i in ids
        )


@dataclass
class View:
    """The materialized contents of ``events[:event_count]``."""

    options: ContextOptions
    event_count: int
    contents: list[content_pb2.Content]
    #: the contents encoded as BuildContextResponse fields, concatenated (a response is this
    #: plus the encoded remaining fields)
    body: bytearray
    #: per content: its token count
    tokens: list[int]
    total_tokens: int
    #: whether a later call may extend this view instead of rebuilding it
    extendable: bool
    #: call ids over the raw log (for conflicts with new events)
    ids: _Ids
    #: call ids over the log with rewinds applied (for open calls)
    live_ids: _Ids
    has_compaction: bool
    #: largest event timestamp seen
    max_time: float
    #: largest summary end seen (new events at or before it could be hidden by the summary)
    max_summary_end: float = 0.0
    #: the characters of the contents (ADK's token estimate is this divided by 4)
    total_chars: int = 0
    #: how this view was produced last: "full" or "extended"
    mode: str = "full"
    #: ``offsets[i]``: where content i starts in ``body`` (one more entry than ``contents``: the
    #: last is ``len(body)``), so the contents after the first k are ``body[offsets[k]:]``
    offsets: list[int] = field(default_factory=lambda: [0])
    #: ``digests[i]``: the chain digest of the first i contents (``digests[0]`` is the seed);
    #: each is computed once, when the view gets the content
    digests: list[bytes] = field(default_factory=lambda: [CONTENTS_DIGEST_SEED])
    #: the last answer made of this view (BuildContext's, kept by its builder): where its
    #: contents start and end in ``body``, the encoded fields after them, and the whole answer's
    #: bytes, given again as they are while all three are the same (no copy of the contents)
    last_answer: tuple[int, int, bytes, bytes] | None = None

    def measure_again(self, counter: TokenCounter) -> None:
        """Measures the view's contents again with ``counter`` (for a view materialized with a
        counter that did not measure, before the measures it needs were read)."""
        measures = counter.measure_contents(self.contents)
        self.tokens = [tokens for tokens, _ in measures]
        self.total_tokens = sum(self.tokens)
        self.total_chars = sum(chars for _, chars in measures)

    def append(self, contents: Sequence[content_pb2.Content], counter: TokenCounter) -> None:
        measures = counter.measure_contents(contents)
        digest = self.digests[-1]
        for content, (tokens, chars) in zip(contents, measures, strict=True):
            self.contents.append(content)
            encoded = encode_contents_field(content)
            self.body += encoded
            self.offsets.append(len(self.body))
            digest = chain_digest(digest, encoded)
            self.digests.append(digest)
            self.tokens.append(tokens)
            self.total_tokens += tokens
            self.total_chars += chars


def _can_extend(view: View, new: Sequence[event_pb2.Event], new_items: Sequence[Item]) -> bool:
    if not view.extendable:
        return False
    new_ids = _Ids()
    previous_time = view.max_time
    for event, item in zip(new, new_items, strict=True):
        if item.is_compaction or item.rewind_target:
            return False
        if any(edit.HasField("hide") for edit in event.context_edits):
            return False  # a hidden range replaces earlier events by a stub
        if view.has_compaction:
            # Summaries re-sort the history by timestamp and hide events inside their ranges.
            # (written so that a NaN timestamp, which sorts nowhere in particular, fails too)
            if not event.timestamp >= previous_time or event.timestamp <= view.max_summary_end:
                return False
            previous_time = event.timestamp
        new_ids.add(event, item)
    old = view.ids
    if any(i in old.calls for i in new_ids.responses | new_ids.long_running):
        return False
    if old.knows(new_ids.calls):
        return False
    if any(i in old.calls for i in new_ids.branch_run_ids):
        return False
    # Calls and responses without ids pair across the whole history: by name (orphan removal,
    # the latest-response rule), and by the missing id alone, whatever the names (the async
    # history step, which also gives a response with no indexed call before it to the first
    # id-less call event, even a later one).
    if (new_ids.idless_responses and old.idless_calls) or (
        new_ids.idless_calls and old.idless_responses
    ):
        return False
    scope = view.options.isolation_scope
    return not (scope and scope in new_ids.calls)


def _summarize(
    events: Sequence[event_pb2.Event], items: Sequence[Item]
) -> tuple[_Ids, _Ids, bool, float, float, bool]:
    ids = _Ids()
    live = _Ids()
    has_compaction = False
    max_time = 0.0
    max_end = 0.0
    finite = True
    for event, item in zip(events, items, strict=True):
        ids.add(event, item)
        if item.timestamp != item.timestamp:  # NaN: where a summary re-sorts it is anyone's guess
            finite = False
        max_time = max(max_time, item.timestamp)
        if item.is_compaction:
            has_compaction = True
            compaction = event.actions.compaction
            bounds = (compaction.start_timestamp, compaction.end_timestamp)
            if any(b != b for b in bounds):  # NaN: ADK keeps such ranges; do not reason about them
                finite = False
            else:
                max_end = max(max_end, *bounds)
    if any(item.rewind_target for item in items):
        for index in live_indices(events, [item.rewind_target for item in items]):
            live.add(events[index], items[index])
    else:
        live = _copy_ids(ids)
    return ids, live, has_compaction, max_time, max_end, finite


def _copy_ids(ids: _Ids) -> _Ids:
    return _Ids(
        set(ids.calls),
        set(ids.responses),
        set(ids.long_running),
        set(ids.branch_run_ids),
        set(ids.open),
        set(ids.idless_calls),
        set(ids.idless_responses),
    )


def _new_view(
    events: Sequence[event_pb2.Event],
    items: Sequence[Item],
    options: ContextOptions,
    counter: TokenCounter,
    contents: list[content_pb2.Content],
    tail_open: bool,
) -> View:
    ids, live, has_compaction, max_time, max_end, finite = _summarize(events, items)
    view = View(
        options=options,
        event_count=len(events),
        contents=[],
        body=bytearray(),
        tokens=[],
        total_tokens=0,
        extendable=finite and not live.open and not tail_open,
        ids=ids,
        live_ids=live,
        has_compaction=has_compaction,
        max_time=max_time,
        max_summary_end=max_end,
    )
    view.append(contents, counter)
    return view


def materialize(
    events: Sequence[event_pb2.Event],
    options: ContextOptions,
    counter: TokenCounter,
    previous: View | None = None,
    items: Sequence[Item] | None = None,
) -> View:
    """The view of all ``events``, extending ``previous`` when that is provably equivalent.
    ``items``, when given, are ``item_from_event`` of each event (cached by the caller)."""
    if previous is not None and previous.event_count == len(events) and previous.options == options:
        # Nothing new: the contents of the same events with the same options (whether or not
        # the view could be extended).
        return previous
    if items is None:
        items = [item_from_event(event) for event in events]
    if options.include_contents is IncludeContents.NONE:
        contents, _ = build_contents_tail(events, options, items=items)
        view = _new_view([], [], options, counter, contents, True)
        view.event_count = len(events)
        view.extendable = False
        return view
    if (
        previous is not None
        and previous.options == options
        and previous.event_count <= len(events)
        and _can_extend(previous, events[previous.event_count :], items[previous.event_count :])
    ):
        start = previous.event_count
        new = events[start:]
        if not new:
            return previous
        new_items = items[start:]
        # The view's tail was closed (it is extendable): whatever its events left open for
        # later ones is nothing, so the new events' own tail is the tail of the whole log.
        added, tail_open = build_contents_tail(
            new, options, prepend_scope_content=False, items=new_items
        )
        previous.append(added, counter)
        for event, item in zip(new, new_items, strict=True):
            previous.ids.add(event, item)
            previous.live_ids.add(event, item)
            previous.max_time = max(previous.max_time, item.timestamp)
        previous.event_count = len(events)
        previous.extendable = not previous.live_ids.open and not tail_open
        previous.mode = "extended"
        return previous
    contents, tail_open = build_contents_tail(events, options, items=items)
    return _new_view(events, items, options, counter, contents, tail_open)
