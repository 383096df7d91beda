"""Compaction in the engine: end of invocation, compact, plan, commit a client's summary,
expand a summary, status.

:class:`CompactionOps` validates every request (INVALID_ARGUMENT / MISSING_FIELD before anything
is read), calls the compactor and translates its outcomes into the response messages. It holds
the whole commit protocol of a client-written summary: under the session's exclusive
compaction lock, the log is read, the plan is checked against what happened since it was made
(COMPACTION_PLAN_STALE), and the summary event is appended only if the log still ends where it
was read.
"""

from __future__ import annotations

from typing import Protocol

from contextengine.compaction.compactor import Compactor, View, invalidated_since
from contextengine.compaction.summarizers.summarizer import DEFAULT_PROMPT_TEMPLATE, fill_template
from contextengine.core.compaction import (
    client_plan,
    expand_summary,
    render_events,
    summary_event as build_summary_event,
)
from contextengine.core.errors import ContextEngineError, invalid
from contextengine.core.validate import (
    check_agent_name,
    check_branch,
    check_id,
    check_session_address,
)
from contextengine.memory.service import MemoryService
from contextengine.runtime.event_cache import SessionEventCache
from contextengine.store import SessionKey
from contextengine.v1 import compaction_service_pb2 as pb

__all__ = ["CompactionOps"]

_TRIGGERS: dict[int, str] = {
    pb.COMPACTION_TRIGGER_UNSPECIFIED: "after_invocation",
    pb.COMPACTION_TRIGGER_AFTER_INVOCATION: "after_invocation",
    pb.COMPACTION_TRIGGER_SLIDING_WINDOW: "sliding_window",
    pb.COMPACTION_TRIGGER_TOKEN_THRESHOLD: "token_threshold",
}
_TRIGGER_VALUES = {
    "sliding_window": pb.COMPACTION_TRIGGER_SLIDING_WINDOW,
    "token_threshold": pb.COMPACTION_TRIGGER_TOKEN_THRESHOLD,
}


class _Addressed(Protocol):
    app_name: str
    user_id: str
    session_id: str


def _key(request: _Addressed) -> SessionKey:
    check_session_address(request.app_name, request.user_id, request.session_id)
    return SessionKey(request.app_name, request.user_id, request.session_id)


def _trigger(value: int) -> str:
    trigger = _TRIGGERS.get(int(value))
    if trigger is None:
        raise invalid("INVALID_ARGUMENT", "trigger", f"trigger {value} is not a known value")
    return trigger


def _view(request: pb.CompactRequest | pb.PlanCompactionRequest) -> View:
    check_agent_name(request.agent_name)
    branch = request.branch if request.HasField("branch") else None
    if branch is not None:
        check_branch(branch)
    scope = request.isolation_scope if request.HasField("isolation_scope") else None
    if scope is not None:
        check_id(scope, "isolation_scope", required=False)
    return View(request.agent_name, branch, scope)


class CompactionOps:
    """The compaction RPCs over the compactor; every method raises ContextEngineError as the
    RPC reports it."""

    def __init__(
        self, *, compactor: Compactor, events: SessionEventCache, memory: MemoryService
    ) -> None:
        self._compactor = compactor
        self._events = events
        self._memory = memory

    async def end_invocation(self, request: pb.EndInvocationRequest) -> pb.EndInvocationResponse:
        key = _key(request)
        check_id(request.invocation_id, "invocation_id", required=False)
        scheduled = await self._compactor.end_invocation(key)
        # The app's background memory ingestion, if enabled (returns at once, never raises).
        await self._memory.on_invocation_end(key)
        return pb.EndInvocationResponse(scheduled=scheduled)

    async def compact(self, request: pb.CompactRequest) -> pb.CompactResponse:
        key = _key(request)
        trigger = _trigger(request.trigger)
        outcome = await self._compactor.compact(key, trigger, _view(request))
        if outcome.summary is not None:
            return pb.CompactResponse(summary=outcome.summary)
        return pb.CompactResponse(skipped_reason=outcome.skipped)

    async def plan_compaction(self, request: pb.PlanCompactionRequest) -> pb.PlanCompactionResponse:
        key = _key(request)
        trigger = _trigger(request.trigger)
        view = _view(request)
        result = await self._compactor.plan(
            key, trigger, view, ignore_trigger=request.ignore_trigger
        )
        plan = result.plan
        if plan is None:
            return pb.PlanCompactionResponse(skipped_reason=result.skipped)
        history = render_events(plan.window)
        template = await self._compactor.prompt_template(key) or DEFAULT_PROMPT_TEMPLATE
        out = pb.CompactionPlan(
            trigger=_TRIGGER_VALUES[plan.trigger],
            based_on_sequence=plan.based_on_sequence,
            first_sequence=plan.covered[0].sequence,
            last_sequence=plan.covered[-1].sequence,
            rolls_up_sequence=plan.rolls_up.sequence if plan.rolls_up is not None else 0,
            start_timestamp=plan.start_timestamp,
            end_timestamp=plan.end_timestamp,
            event_count=len(plan.window),
            conversation_history=history,
            prompt=fill_template(template, history),
        )
        if plan.isolation_scope is not None:
            out.isolation_scope = plan.isolation_scope
        return pb.PlanCompactionResponse(plan=out)

    async def commit_compaction(
        self, request: pb.CommitCompactionRequest
    ) -> pb.CommitCompactionResponse:
        """Appends the client's summary of the planned range, under the session's exclusive
        compaction lock: the plan must still hold (no rewind or summary since
        ``based_on_sequence``, and the append lands only if the log still ends where it was
        read), else COMPACTION_PLAN_STALE."""
        key = _key(request)
        scope = _commit_scope(request)
        async with self._compactor.exclusive(key):
            log = await self._events.log(key)  # NOT_FOUND
            if request.based_on_sequence > log.last_sequence:
                raise invalid(
                    "INVALID_ARGUMENT",
                    "based_on_sequence",
                    f"based_on_sequence {request.based_on_sequence} is beyond the end of the "
                    f"log ({log.last_sequence})",
                )
            conflict = invalidated_since(log.events, request.based_on_sequence)
            if conflict is not None:
                raise _stale(request.based_on_sequence, conflict.sequence)
            plan = client_plan(
                log.events,
                first_sequence=request.first_sequence,
                last_sequence=request.last_sequence,
                rolls_up_sequence=request.rolls_up_sequence,
                isolation_scope=scope,
                based_on_sequence=request.based_on_sequence,
            )
            event = build_summary_event(
                plan,
                request.summary,
                event_id=self._compactor.new_id(),
                invocation_id=self._compactor.new_id(),
                timestamp=self._compactor.now(),
                usage_metadata=(
                    request.usage_metadata if request.HasField("usage_metadata") else None
                ),
            )
            appended = await self._compactor.append_summary(
                key, event, request.based_on_sequence, created=log.create_time
            )
            if appended is None:
                conflict = await self._compactor.stale_since(key, request.based_on_sequence)
                raise _stale(request.based_on_sequence, conflict.sequence if conflict else 0)
            return pb.CommitCompactionResponse(summary=appended)

    async def expand_summary(self, request: pb.ExpandSummaryRequest) -> pb.ExpandSummaryResponse:
        key = _key(request)
        if request.summary_sequence <= 0:
            raise invalid("MISSING_FIELD", "summary_sequence", "summary_sequence is required (> 0)")
        log = await self._events.log(key)
        expansion = expand_summary(log.events, request.summary_sequence)
        return pb.ExpandSummaryResponse(
            summary=expansion.summary,
            events=expansion.events,
            subsumed_summaries=expansion.subsumed,
        )

    async def get_compaction_status(
        self, request: pb.GetCompactionStatusRequest
    ) -> pb.GetCompactionStatusResponse:
        key = _key(request)
        await self._events.log(key)
        status = self._compactor.status(key)
        return pb.GetCompactionStatusResponse(
            running=status.running,
            attempts=status.attempts,
            summaries=status.summaries,
            failures=status.failures,
            last_error=status.last_error,
            retry_after=status.retry_after,
        )


def _commit_scope(request: pb.CommitCompactionRequest) -> str | None:
    """Checks the commit's own fields (before anything is read); its isolation scope."""
    if not request.HasField("summary") or not request.summary.parts:
        raise invalid("MISSING_FIELD", "summary", "summary must have at least one part")
    if request.based_on_sequence <= 0:
        raise invalid("MISSING_FIELD", "based_on_sequence", "based_on_sequence is required (> 0)")
    scope = request.isolation_scope if request.HasField("isolation_scope") else None
    if scope is not None:
        check_id(scope, "isolation_scope", required=False)
    return scope


def _stale(based_on: int, conflicting: int) -> ContextEngineError:
    """COMPACTION_PLAN_STALE; ``conflicting`` is 0 when no single event is to blame (the session
    was created again, or other appends kept moving the log's end)."""
    why = (
        f"event {conflicting} is a rewind or a summary"
        if conflicting
        else "the session changed under the commit"
    )
    return ContextEngineError(
        "COMPACTION_PLAN_STALE",
        f"the log moved since sequence {based_on}: {why}; plan again",
        based_on_sequence=based_on,
        conflicting_sequence=conflicting,
    )
