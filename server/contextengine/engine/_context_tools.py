"""The context tools in the engine: declarations, one call, and the edits an answer records.

:class:`ContextToolOps` answers ListContextTools and CallContextTool, and gives the session RPCs
the hook that records an answer's edits on append (:meth:`ContextToolOps.record`). The rules and
answers are core's (``core/context_tools``); this module reads the log and the configuration,
measures tokens with the session's counter, builds the caller's context for the status tool,
searches the session's events with BM25 (memory's tokenizer and formula, over this session
only) and appends a model-written summary under the session's exclusive compaction lock, as
CommitCompaction does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from contextengine.compaction.compactor import Compactor
from contextengine.core import context_tools as tools
from contextengine.core.compaction import summary_event as build_summary_event
from contextengine.core.errors import ContextEngineError, invalid
from contextengine.core.structs import dict_to_struct, struct_to_dict
from contextengine.core.validate import (
    check_agent_name,
    check_branch,
    check_id,
    check_session_address,
)
from contextengine.engine._context import ContextBuilder
from contextengine.memory import bm25
from contextengine.memory.text import count_in, document, query_terms, token_count
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.runtime.resolver import ConfigResolver
from contextengine.store import SessionKey
from contextengine.v1 import (
    content_pb2,
    context_service_pb2 as cpb,
    context_tools_service_pb2 as pb,
    event_pb2,
)

__all__ = ["ContextToolOps"]

#: how long a provider keeps a prompt cache warm when the app names no TTL (Anthropic's and
#: OpenAI's default: five minutes)
DEFAULT_CACHE_TTL_SECONDS = 300
_SNIPPET_CHARS = 300


def _caller(request: pb.CallContextToolRequest) -> tools.Caller:
    check_agent_name(request.agent_name)
    branch = request.branch if request.HasField("branch") else None
    if branch is not None:
        check_branch(branch)
    scope = request.isolation_scope if request.HasField("isolation_scope") else None
    if scope is not None:
        check_id(scope, "isolation_scope", required=False)
    check_id(request.invocation_id, "invocation_id", required=False)
    return tools.Caller(request.agent_name, branch, scope, request.invocation_id)


def _measure(count: Callable[[content_pb2.Content], int]) -> Callable[[event_pb2.Event], int]:
    def measure(event: event_pb2.Event) -> int:
        compaction = event.actions.compaction
        if event.actions.HasField("compaction") and compaction.HasField("compacted_content"):
            return count(compaction.compacted_content)
        return count(event.content) if event.content.parts else 0

    return measure


class ContextToolOps:
    """ListContextTools, CallContextTool and the append hook."""

    def __init__(
        self,
        *,
        resolver: ConfigResolver,
        events: SessionEventCache,
        compactor: Compactor,
        context: ContextBuilder,
        clock: Callable[[], float],
    ) -> None:
        self._resolver = resolver
        self._events = events
        self._compactor = compactor
        self._context = context
        self._clock = clock
        self._declarations = pb.ListContextToolsResponse(
            function_declarations=[dict_to_struct(d) for d in tools.genai_declarations()],
            openai_chat_tools=tools.openai_chat_tools(),
            openai_responses_tools=tools.openai_responses_tools(),
            anthropic_tools=tools.anthropic_tools(),
        )

    async def list_context_tools(
        self, request: pb.ListContextToolsRequest
    ) -> pb.ListContextToolsResponse:
        check_id(request.app_name, "app_name")
        check_id(request.user_id, "user_id", required=False)
        out = pb.ListContextToolsResponse()
        out.CopyFrom(self._declarations)
        return out

    async def _limits(self, key: SessionKey) -> tools.Limits:
        config = await self._resolver.context_tools(key)
        compaction = await self._resolver.compaction(key)
        budget = compaction.token_threshold if compaction is not None else 0
        return tools.Limits.of(config, budget)

    async def call_context_tool(
        self, request: pb.CallContextToolRequest
    ) -> pb.CallContextToolResponse:
        check_session_address(request.app_name, request.user_id, request.session_id)
        key = SessionKey(request.app_name, request.user_id, request.session_id)
        caller = _caller(request)
        if not request.HasField("call") or not request.call.name:
            raise invalid("MISSING_FIELD", "call.name", "call.name is required")
        call = request.call
        if call.name not in tools.TOOL_NAMES:
            raise ContextEngineError(
                "UNKNOWN_CONTEXT_TOOL",
                f"{call.name!r} is not a context tool (ListContextTools names them)",
                field="call.name",
                name=call.name,
            )
        log = await self._events.log(key)  # NOT_FOUND
        limits = await self._limits(key)
        if not limits.enabled:
            raise ContextEngineError(
                "CONTEXT_TOOLS_DISABLED",
                "the context tools are not enabled for this session (ContextToolsConfig.enabled, "
                "in the app's or the session's configuration)",
                app_name=key.app_name,
            )
        try:
            args = tools.parse_args(
                call.name, struct_to_dict(call.args, "args") if call.HasField("args") else {}
            )
        except ContextEngineError as bad:
            return _refused(call, "INVALID_TOOL_ARGUMENTS", "", bad.message, bad.metadata)
        measure = _measure(log.counter.count_content)
        try:
            if call.name == tools.SUMMARIZE:
                return await self._summarize(key, caller, limits, call, args, measure)
            view = tools.SessionView(log.events, caller, measure)
            return await self._run(key, request, view, limits, call, args)
        except tools.EditRefusedError as refusal:
            metadata = {"rule": refusal.rule, **refusal.metadata}
            return _refused(call, "CONTEXT_EDIT_REFUSED", refusal.rule, refusal.message, metadata)

    async def _run(
        self,
        key: SessionKey,
        request: pb.CallContextToolRequest,
        view: tools.SessionView,
        limits: tools.Limits,
        call: content_pb2.FunctionCall,
        args: tools.ToolArgs,
    ) -> pb.CallContextToolResponse:
        name = call.name
        if name == tools.STATUS:
            tokens = await self._context_tokens(key, request)
            cache = await self._cache_state(key, view)
            return _answer(call, tools.status(view, limits, tokens, cache))
        if name == tools.EXPAND:
            return _answer(call, tools.expansion(view, args.sequence, args.max_chars))
        if name == tools.SEARCH:
            return _answer(call, _search(view, args.query, args.limit))
        if name == tools.PIN:
            edit = tools.check_pin(view, limits, args.first, args.last)
            message = (
                f"Pinned {_span(args.first, args.last)}: compaction will keep "
                f"{'it' if args.first == args.last else 'them'} verbatim."
            )
            return _answer(call, {"ok": True, "message": message}, edit)
        if name == tools.UNPIN:
            edit = tools.check_unpin(view, limits, args.first, args.last)
            message = f"Unpinned {_span(args.first, args.last)}."
            return _answer(call, {"ok": True, "message": message}, edit)
        assert name == tools.HIDE
        edit = tools.check_hide(view, limits, args.first, args.last, args.stub)
        hidden = view.in_range(args.first, args.last)
        freed = sum(view.tokens(event) for event in hidden)
        answer = {
            "ok": True,
            "message": (
                f"{_span(args.first, args.last).capitalize()} will show as one stub from your "
                f"next model call on; context_expand with sequence {args.first} reads them back."
            ),
            "stub": edit.hide.stub,
            "tokens_hidden": freed,
            "cached_tokens_invalidated": tools.edit_cost(view, args.first),
        }
        return _answer(call, answer, edit)

    async def _summarize(
        self,
        key: SessionKey,
        caller: tools.Caller,
        limits: tools.Limits,
        call: content_pb2.FunctionCall,
        args: tools.ToolArgs,
        measure: Callable[[event_pb2.Event], int],
    ) -> pb.CallContextToolResponse:
        """Appends the model's summary under the session's exclusive compaction lock, if the
        log still ends where it was read (else ``log_moved``)."""
        async with self._compactor.exclusive(key):
            log = await self._events.log(key)
            view = tools.SessionView(log.events, caller, measure)
            plan = tools.check_summarize(view, limits, args.first, args.last, args.summary)
            cost = tools.edit_cost(view, plan.covered[0].sequence)
            event = build_summary_event(
                plan,
                content_pb2.Content(role="model", parts=[content_pb2.Part(text=args.summary)]),
                event_id=self._compactor.new_id(),
                invocation_id=self._compactor.new_id(),
                timestamp=self._compactor.now(),
            )
            appended = await self._compactor.append_summary(
                key, event, log.last_sequence, created=log.create_time
            )
        if appended is None:
            raise tools.EditRefusedError(
                "log_moved",
                "the session changed while the summary was being written (a rewind or another "
                "summary); call context_status and try again",
            )
        covered = plan.covered
        answer = {
            "ok": True,
            "message": (
                f"Events {covered[0].sequence}..{covered[-1].sequence} are replaced by your "
                f"summary (event {appended.sequence}) from your next model call on; "
                f"context_expand with sequence {appended.sequence} reads them back."
            ),
            "summary_sequence": appended.sequence,
            "covers": [covered[0].sequence, covered[-1].sequence],
            "events_summarized": len(covered),
            "cached_tokens_invalidated": cost,
        }
        edit = event_pb2.ContextEdit(summary_sequence=appended.sequence)
        return _answer(call, answer, edit)

    async def _context_tokens(self, key: SessionKey, request: pb.CallContextToolRequest) -> int:
        build = cpb.BuildContextRequest(
            app_name=key.app_name,
            user_id=key.user_id,
            session_id=key.session_id,
            agent_name=request.agent_name,
            skip_compaction=True,
        )
        if request.HasField("branch"):
            build.branch = request.branch
        if request.HasField("isolation_scope"):
            build.isolation_scope = request.isolation_scope
        result = await self._context.build(build)
        return result.token_estimate

    async def _cache_state(self, key: SessionKey, view: tools.SessionView) -> tools.CacheState:
        app = await self._resolver.app(key.app_name)
        ttl = DEFAULT_CACHE_TTL_SECONDS
        if app is not None and app.context_cache_config.HasField("ttl_seconds"):
            ttl = app.context_cache_config.ttl_seconds
        latest = next(
            (
                event.timestamp
                for event in reversed(view.live)
                if event.author == view.caller.agent_name and view.visible(event)
            ),
            None,
        )
        since = None if latest is None else max(0.0, self._clock() - latest)
        return tools.CacheState(since, ttl)

    async def record(self, key: SessionKey, events: Sequence[event_pb2.Event]) -> None:
        """Sets the edits each of ``events`` (about to be appended, in order; normalized
        copies) records, and clears any a client set. Reads the log only when one of them
        answers an edit tool's call."""
        for event in events:
            del event.context_edits[:]
        if not any(tools.answers_edit_calls(event) for event in events):
            return
        limits = await self._limits(key)
        if not limits.enabled:
            return
        log = await self._events.log(key)
        measure = _measure(log.counter.count_content)
        landed: list[event_pb2.Event] = list(log.events)
        known = {event.id for event in landed}
        for event in events:
            if event.id in known:
                continue  # a re-append: the recorded event stands
            edits = tools.recorded_edits(landed, event, limits, measure)
            event.context_edits.extend(edits)
            placed = event_pb2.Event()
            placed.CopyFrom(event)
            placed.sequence = len(landed) + 1
            landed.append(placed)
            known.add(event.id)


def _span(first: int, last: int) -> str:
    return f"event {first}" if first == last else f"events {first}..{last}"


def _response(
    call: content_pb2.FunctionCall, result: dict[str, Any]
) -> content_pb2.FunctionResponse:
    response = content_pb2.FunctionResponse(name=call.name, response=dict_to_struct(result))
    if call.id:
        response.id = call.id
    return response


def _answer(
    call: content_pb2.FunctionCall, result: dict[str, Any], *edits: event_pb2.ContextEdit
) -> pb.CallContextToolResponse:
    return pb.CallContextToolResponse(response=_response(call, result), edits=edits)


def _refused(
    call: content_pb2.FunctionCall,
    reason: str,
    rule: str,
    message: str,
    metadata: dict[str, str],
) -> pb.CallContextToolResponse:
    result: dict[str, Any] = {"ok": False, "reason": reason, "message": message}
    if rule:
        result["rule"] = rule
    refusal = pb.ContextToolRefusal(reason=reason, rule=rule, message=message, metadata=metadata)
    return pb.CallContextToolResponse(response=_response(call, result), refusal=refusal)


def _only_context_tools(event: event_pb2.Event) -> bool:
    """Whether every part of ``event`` is a context tool's call or answer (left out of
    searches: they describe the context, not the task)."""
    names = [
        part.function_call.name if part.HasField("function_call") else part.function_response.name
        for part in event.content.parts
        if part.HasField("function_call") or part.HasField("function_response")
    ]
    return len(names) == len(event.content.parts) and all(n in tools.TOOL_NAMES for n in names)


def _search(view: tools.SessionView, query: str, limit: int) -> dict[str, Any]:
    """BM25 (memory's formula and tokenizer) over the caller's live events before the current
    turn, covered and hidden ones included, context tools' own calls and answers left out;
    ties go to the newer event."""
    terms = query_terms(query)
    candidates = [
        event
        for event in view.scoped()
        if event.sequence < view.turn_start  # the history, not the question being asked
        and ((event.content.parts and not _only_context_tools(event)) or view.is_summary(event))
    ]
    texts = {event.sequence: tools.event_text(event) for event in candidates}
    docs = {sequence: document(text) for sequence, text in texts.items()}
    rows = len(docs)
    lengths = {sequence: token_count(doc) for sequence, doc in docs.items()}
    average = (sum(lengths.values()) / rows) if rows else 0.0
    idfs = [
        bm25.idf(rows, sum(1 for doc in docs.values() if count_in(term, doc))) for term in terms
    ]
    ranked: list[tuple[float, int]] = []
    for sequence, doc in docs.items():
        frequencies = [count_in(term, doc) for term in terms]
        if not any(frequencies):
            continue
        ranked.append((bm25.rank(idfs, frequencies, lengths[sequence], average or 1.0), sequence))
    ranked.sort(key=lambda item: (item[0], -item[1]))
    results = []
    for score, sequence in ranked[:limit]:
        event = view.event(sequence)
        assert event is not None
        text = texts[sequence]
        results.append(
            {
                "sequence": sequence,
                "author": event.author,
                "where": tools.where(view, event),
                "score": round(-score, 3),
                "text": text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 1] + "…",
            }
        )
    answer: dict[str, Any] = {"ok": True, "query": query, "results": results}
    if not results:
        answer["message"] = "No event of this session matches; try other words."
    return answer
