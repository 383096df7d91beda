"""``ContextEnginePlugin``: the engine builds the model contents of every model call of an ADK app.

Add it to the ``Runner`` (``plugins=[ContextEnginePlugin(backend=...)]``) next to a
``ContextEngineSessionService`` on the same backend (``backend=``, or the same ``target=`` /
``db=``): the engine then holds the log the contents are built from.

- **Before each model call** (``before_model_callback``) the request's ``contents`` are replaced
  by the engine's ``BuildContext`` for the calling agent: its name, branch, isolation scope and
  ``include_contents``, the model identity (provider and model name, so that "adk-" function-call
  ids are stripped or kept as ADK does for that model), ``RunConfig.
  include_thoughts_from_other_agents`` and the invocation's user content. The engine applies
  rewinds, compaction summaries and, when the app configures a token threshold, compacts first.
  The plugin keeps each (session, agent) view's last contents and asks only for those added
  since (``BuildContextRequest.since``; ``ContextViews``), so the wire carries what changed.
- **Prompt caching**, when the engine's app configuration has a ``context_cache_config``: the
  engine's ``CacheDecision`` is applied as ADK's Gemini cache manager would apply its own. The
  response of the call records ``cache_metadata`` (the next decision is made from it); a reused
  cache (or one the engine created, ``managed_gemini_caches``) is sent as
  ``config.cached_content``, without the system instruction, tools and tool config it holds, and
  with only the contents after the cached ones. A cache the engine asks the agent to create
  itself (not managed) is not created here: the call goes out whole and records the metadata as
  it is, which is ADK's own fallback when creating a cache fails.
- **After an invocation** (``after_run_callback``) ``EndInvocation`` tells the engine, which then
  compacts in the background as the app's compaction configuration says.

**Configure compaction and caching in the engine, not in ADK.** An ``App`` (or ``Runner``) that
also sets ADK's own ``events_compaction_config`` or ``context_cache_config`` would summarise or
cache a second time, over contents the engine no longer sends: the plugin refuses to run such an
app with a ``ValueError`` naming the setting to remove.

ADK's ``PreloadMemoryTool`` puts the memories it finds into the contents, not into the events:
the plugin keeps those blocks, at the place ADK put them. Not supported (a ``ValueError`` at the
model call, rather than contents silently missing): agents with ``static_instruction`` (ADK then
moves the instruction into the contents) and ``RunConfig.model_input_context``; other tools that
insert request-only contents would lose them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from google.adk.models.cache_metadata import CacheMetadata
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types
from google.protobuf import json_format, struct_pb2

from contextengine.adk._backend import Backend, UsesBackend
from contextengine.adk._convert import content_to_genai, content_to_proto
from contextengine.client import ContextEngineError, ContextViews
from contextengine.v1 import compaction_service_pb2 as kpb, context_service_pb2 as cpb

if TYPE_CHECKING:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse

__all__ = ["ContextEnginePlugin", "model_identity"]

logger = logging.getLogger(__name__)

#: model classes of google-adk by (module, class name), looked up along a model's MRO without
#: importing the providers
_PROVIDERS: dict[tuple[str, str], cpb.ModelProvider.ValueType] = {
    ("google.adk.models.google_llm", "Gemini"): cpb.MODEL_PROVIDER_GEMINI,
    ("google.adk.models.anthropic_llm", "AnthropicLlm"): cpb.MODEL_PROVIDER_ANTHROPIC,
    ("google.adk.models.lite_llm", "LiteLlm"): cpb.MODEL_PROVIDER_LITELLM,
    (
        "google.adk.integrations.openai._openai_responses_llm",
        "OpenAIResponsesLlm",
    ): cpb.MODEL_PROVIDER_OPENAI_RESPONSES,
}


def model_identity(model: BaseLlm | None, model_name: str | None = None) -> cpb.ModelIdentity:
    """The engine's ``ModelIdentity`` of an ADK model object (``OTHER`` for a model class ADK
    does not know; ``model_name`` overrides the object's name, as ``LlmRequest.model`` does)."""
    provider: cpb.ModelProvider.ValueType = cpb.MODEL_PROVIDER_OTHER
    interactions = False
    if model is not None:
        for cls in type(model).__mro__:
            found = _PROVIDERS.get((cls.__module__, cls.__name__))
            if found is not None:
                provider = found
                break
        interactions = bool(getattr(model, "use_interactions_api", False))
    name = model_name or (model.model if model is not None else "")
    return cpb.ModelIdentity(
        provider=provider,
        model=name,
        use_interactions_api=interactions and provider == cpb.MODEL_PROVIDER_GEMINI,
    )


def _struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


def _system_instruction(value: object) -> types.Content | None:
    if value is None:
        return None
    if isinstance(value, types.Content):
        return value
    if isinstance(value, str):
        return types.Content(parts=[types.Part(text=value)]) if value else None
    if isinstance(value, types.Part):
        return types.Content(parts=[value])
    if isinstance(value, list):
        parts = [types.Part(text=p) if isinstance(p, str) else p for p in value]
        if all(isinstance(p, types.Part) for p in parts):
            return types.Content(parts=parts)
    return None


def _memory_preloads(agent: Any, llm_request: LlmRequest) -> list[types.Content]:
    """The memory blocks ADK's ``PreloadMemoryTool`` inserted into the request's contents (they
    are not events, so the engine's contents do not have them): the user contents of one text
    part holding its ``<PAST_CONVERSATIONS>`` block, when the agent has that tool."""
    from google.adk.tools.preload_memory_tool import PreloadMemoryTool

    if not any(isinstance(tool, PreloadMemoryTool) for tool in getattr(agent, "tools", [])):
        return []
    return [
        content
        for content in llm_request.contents
        if content.role == "user"
        and content.parts is not None
        and len(content.parts) == 1
        and "<PAST_CONVERSATIONS>" in (content.parts[0].text or "")
    ]


def _double_configuration(ic: InvocationContext) -> str | None:
    """What of ADK's own compaction / caching the app configures, or None."""
    found = []
    if ic.events_compaction_config is not None:
        found.append("events_compaction_config")
    if ic.context_cache_config is not None:
        found.append("context_cache_config")
    return " and ".join(found) or None


class ContextEnginePlugin(UsesBackend, BasePlugin):
    """The engine builds the model contents (and makes the prompt-cache decision) of every
    model call; see the module documentation.

    Pass exactly one of ``target=``, ``db=`` and ``backend=`` (use the session service's backend:
    ``ContextEnginePlugin(backend=sessions.backend)``). ``close()`` (the Runner's) closes the
    backend if the plugin made it. The plugin keeps the contents of the last ``context_views``
    (session, agent) views it built and asks BuildContext only for the contents added since
    (``since``; a rewind or a compaction gets the whole contents again); 0 keeps none.
    """

    def __init__(
        self,
        *,
        target: str | None = None,
        db: str | None = None,
        backend: Backend | None = None,
        name: str = "contextengine",
        context_views: int = 64,
        **client_options: Any,
    ) -> None:
        super().__init__(name)
        self._use_backend(target=target, db=db, backend=backend, client_options=client_options)
        #: the last contents of the last ``context_views`` (session, agent view)s, so that a
        #: model call asks only for the contents added since the previous one (0: none kept)
        self._contexts = (
            ContextViews(self._backend.build_context, max_views=context_views)
            if context_views > 0
            else None
        )
        #: (invocation id, agent name) -> the cache metadata the pending model call records
        self._pending_cache: dict[tuple[str, str], CacheMetadata] = {}

    def _check_app(self, ic: InvocationContext) -> None:
        found = _double_configuration(ic)
        if found is not None:
            raise ValueError(
                f"the app configures google-adk's own {found} and the ContextEnginePlugin: "
                f"remove {found} from the App (or Runner) and configure compaction and prompt "
                "caching in the engine's app configuration (UpdateAppConfig), which the plugin "
                "applies"
            )

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self._check_app(invocation_context)
        return None

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        ic = callback_context._invocation_context
        self._check_app(ic)
        agent: Any = ic.agent
        if agent is None:
            return None
        if getattr(agent, "static_instruction", None) is not None:
            raise ValueError(
                f"agent {agent.name!r} has a static_instruction, which ContextEnginePlugin does "
                "not support yet (ADK moves the instruction into the contents); use instruction"
            )
        run_config = ic.run_config
        if run_config is not None and run_config.model_input_context:
            raise ValueError("ContextEnginePlugin does not support RunConfig.model_input_context")
        request = self._request(ic, agent, llm_request)
        transient = _memory_preloads(agent, llm_request)
        try:
            if self._contexts is not None:
                response = await self._contexts.build(request)
            else:
                response = await self._backend.build_context(request)
        except ContextEngineError as err:
            if err.reason != "SESSION_NOT_FOUND":
                raise
            raise ValueError(
                f"session {request.session_id!r} is not in the plugin's engine "
                f"({self._backend.description}): give the plugin the session service's backend "
                "(ContextEnginePlugin(backend=session_service.backend))"
            ) from err
        llm_request.contents = [content_to_genai(c) for c in response.contents]
        if transient:
            # where ADK's PreloadMemoryTool put them: the current turn's boundary
            llm_request._insert_transient_user_content(transient)
        if response.HasField("cache_decision"):
            self._apply_cache(ic, agent, llm_request, response.cache_decision)
        return None

    def _request(
        self, ic: InvocationContext, agent: Any, llm_request: LlmRequest
    ) -> cpb.BuildContextRequest:
        run_config = ic.run_config
        current_turn = (
            getattr(agent, "include_contents", "default") != "default"
            or llm_request.previous_interaction_id is not None
        )
        canonical = getattr(agent, "canonical_model", None)
        request = cpb.BuildContextRequest(
            app_name=ic.session.app_name,
            user_id=ic.session.user_id,
            session_id=ic.session.id,
            agent_name=agent.name,
            include_contents=(
                cpb.INCLUDE_CONTENTS_NONE if current_turn else cpb.INCLUDE_CONTENTS_DEFAULT
            ),
            model=model_identity(canonical, llm_request.model),
            include_thoughts_from_other_agents=bool(
                run_config is not None
                and run_config.include_thoughts_from_other_agents
                and not current_turn
            ),
            invocation_id=ic.invocation_id,
        )
        if ic.branch is not None:
            request.branch = ic.branch
        if ic.isolation_scope is not None:
            request.isolation_scope = ic.isolation_scope
        if ic.user_content is not None:
            request.user_content.CopyFrom(content_to_proto(ic.user_content))
        config = llm_request.config
        instruction = _system_instruction(config.system_instruction)
        if instruction is not None:
            request.system_instruction.CopyFrom(content_to_proto(instruction))
        for tool in config.tools or []:
            if isinstance(tool, types.Tool):
                request.tools.append(_struct(tool.model_dump(mode="json", exclude_none=True)))
        if config.tool_config is not None:
            request.tool_config.CopyFrom(
                _struct(config.tool_config.model_dump(mode="json", exclude_none=True))
            )
        return request

    def _apply_cache(
        self,
        ic: InvocationContext,
        agent: Any,
        llm_request: LlmRequest,
        decision: cpb.CacheDecision,
    ) -> None:
        metadata = json_format.MessageToDict(
            decision.cache_metadata, preserving_proto_field_name=True
        )
        self._pending_cache[(ic.invocation_id, agent.name)] = CacheMetadata.model_validate(metadata)
        if decision.invalidated_cache_name and not decision.managed:
            logger.warning(
                "prompt cache %s is no longer valid; ContextEnginePlugin does not delete caches "
                "it did not create (set managed_gemini_caches in the engine's app config)",
                decision.invalidated_cache_name,
            )
        if not decision.cache_name:
            return  # FINGERPRINT_ONLY, or CREATE left to the agent: the whole request goes out
        config = llm_request.config
        config.cached_content = decision.cache_name
        config.system_instruction = None
        config.tools = None
        config.tool_config = None
        model = getattr(agent, "canonical_model", None)
        if model is not None:
            model._maybe_append_user_content(llm_request)
        llm_request.contents = llm_request.contents[decision.send_from_index :]

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        ic = callback_context._invocation_context
        if ic.agent is None:
            return None
        metadata = self._pending_cache.pop((ic.invocation_id, ic.agent.name), None)
        if metadata is not None and llm_response.cache_metadata is None:
            llm_response.cache_metadata = metadata
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        session = invocation_context.session
        for key in [k for k in self._pending_cache if k[0] == invocation_context.invocation_id]:
            del self._pending_cache[key]
        await self._backend.end_invocation(
            kpb.EndInvocationRequest(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                invocation_id=invocation_context.invocation_id,
            )
        )
        return None
